package podevents

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/kuberuntime"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// readFile decodes the events file in dir.
func readFile(t *testing.T, dir string) persisted {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, eventsFile))
	if err != nil {
		t.Fatal(err)
	}
	var st persisted
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestLogPersists: Run writes the events under the state directory (0600
// in a 0700 directory), coalescing the events of one persistBackoff into
// one write and never writing on Event's path; a new Log opened there
// has them back, with their pods, counts and times.
func TestLogPersists(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "events")
		l := Open(Options{Logger: quietLog(), StateDir: dir})
		l.Event("u1", "web", "default", kuberuntime.EventNormal, "Pulled", "pulled")
		l.Event("u1", "web", "default", kuberuntime.EventWarning, "BackOff", "back-off")
		if _, err := os.Stat(dir); err == nil {
			t.Fatal("written before Run")
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { l.Run(ctx); close(done) }()
		synctest.Wait()
		if st := readFile(t, dir); len(st.Events) != 2 {
			t.Fatalf("after the first write: %d events, want 2", len(st.Events))
		}
		// Run waits out persistBackoff: these are not on disk yet.
		l.Event("u1", "web", "default", kuberuntime.EventWarning, "BackOff", "back-off")
		l.Event("u2", "db", "kube-system", kuberuntime.EventNormal, "Started", "started")
		synctest.Wait()
		if st := readFile(t, dir); len(st.Events) != 2 || st.Events[1].Count != 1 {
			t.Fatalf("written on the event's path: %+v", st.Events)
		}
		time.Sleep(persistBackoff)
		synctest.Wait()
		st := readFile(t, dir)
		if len(st.Events) != 3 || st.Events[1].Count != 2 || st.Events[2].Name != "db" {
			t.Fatalf("after the backoff: %+v, want 3 events, BackOff twice", st.Events)
		}
		cancel()
		<-done
		for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, eventsFile): 0o600} {
			if info, err := os.Stat(path); err != nil || info.Mode().Perm() != want {
				t.Errorf("%s: %v %v, want mode %v", path, info.Mode(), err, want)
			}
		}

		again := Open(Options{Logger: quietLog(), StateDir: dir})
		evs := again.List("u1")
		if len(evs) != 2 || evs[1].Reason != "BackOff" || evs[1].Count != 2 || evs[0].FirstSeen.IsZero() {
			t.Fatalf("after a restart: %+v", evs)
		}
		all := again.All()
		if len(all) != 3 || all[2].Name != "db" || all[2].Namespace != "kube-system" || all[2].UID != "u2" {
			t.Errorf("after a restart, All: %+v", all)
		}
	})
}

// TestLogPersistBounds: the file keeps the newest maxPersisted events,
// each message cut to maxMessage, so it stays under maxFileBytes.
func TestLogPersistBounds(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "events")
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	l := Open(Options{Clock: clk, Logger: quietLog(), StateDir: dir})
	long := strings.Repeat("é", maxMessage)
	for i := range maxPersisted + 200 {
		clk.Step(time.Second)
		l.Event(types.UID(fmt.Sprint("u", i%100)), fmt.Sprint("p", i%100), "default", kuberuntime.EventWarning, "Failed", fmt.Sprint(i, " ", long))
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	l.save()
	info, err := os.Stat(filepath.Join(dir, eventsFile))
	if err != nil || info.Size() > maxFileBytes {
		t.Fatalf("events file: %v, %d bytes; want at most %d", err, info.Size(), maxFileBytes)
	}
	st := readFile(t, dir)
	if len(st.Events) != maxPersisted || !strings.HasPrefix(st.Events[0].Message, "200 ") {
		t.Fatalf("%d events on disk from %.10q, want the newest %d", len(st.Events), st.Events[0].Message, maxPersisted)
	}
	for _, e := range st.Events {
		if len(e.Message) > maxMessage || !utf8.ValidString(e.Message) {
			t.Fatalf("message of %d bytes kept, or cut inside a character", len(e.Message))
		}
	}
}

// TestLogIgnoresBadFiles: a corrupt, foreign-version, oversized,
// symlinked or other-owned events file is ignored with a warning (berth
// starts with no events) and replaced at Run's first write.
func TestLogIgnoresBadFiles(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, path string)
	}{
		{"corrupt", func(t *testing.T, path string) { write(t, path, "{not json") }},
		{"other version", func(t *testing.T, path string) { write(t, path, `{"version":7,"events":[]}`) }},
		{"event without a pod", func(t *testing.T, path string) {
			write(t, path, `{"version":1,"events":[{"uid":"","name":"x","count":1,"firstTimestamp":"2026-01-01T00:00:00Z"}]}`)
		}},
		{"too large", func(t *testing.T, path string) { write(t, path, strings.Repeat(" ", maxFileBytes+1)) }},
		{"symlink", func(t *testing.T, path string) {
			target := filepath.Join(t.TempDir(), "elsewhere")
			write(t, target, `{"version":1,"events":[]}`)
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}},
		{"another owner", func(t *testing.T, path string) {
			write(t, path, `{"version":1,"events":[{"uid":"u","name":"x","count":1,"firstTimestamp":"2026-01-01T00:00:00Z"}]}`)
			if err := os.Chown(path, 65534, 65534); err != nil {
				t.Skip("cannot chown:", err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "events")
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(dir, eventsFile)
				tt.setup(t, path)
				var logged bytes.Buffer
				l := Open(Options{Logger: slog.New(slog.NewTextHandler(&logged, nil)), StateDir: dir})
				if len(l.All()) != 0 || !strings.Contains(logged.String(), "ignoring the pod events kept by an earlier run") {
					t.Fatalf("events %+v, log %q", l.All(), logged.String())
				}
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan struct{})
				go func() { l.Run(ctx); close(done) }()
				synctest.Wait()
				cancel()
				<-done
				info, err := os.Lstat(path)
				if err != nil || !info.Mode().IsRegular() {
					t.Fatalf("not replaced: %v %v", info, err)
				}
				if st := readFile(t, dir); st.Version != eventsVersion || len(st.Events) != 0 {
					t.Errorf("replaced with %+v", st)
				}
			})
		})
	}
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
