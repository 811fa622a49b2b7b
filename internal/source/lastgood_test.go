package source

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podspec/podspectest"
	"github.com/berth-agent/berth/internal/store"
)

// lockedBuffer collects a source's log lines; the source writes from its
// own goroutine while the test reads.
type lockedBuffer struct {
	mu  sync.Mutex // guards buf
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// stateClock is when the tests' sources accept manifests.
var stateClock = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// startedSource is one berth lifetime of the sources: Run over a fresh
// store, as after a restart, with the state dir the test gives.
type startedSource struct {
	store *store.Store
	log   *lockedBuffer
	stop  func()
}

func startSources(t *testing.T, cfg Config) *startedSource {
	t.Helper()
	if cfg.NodeName == "" {
		cfg.NodeName = podspectest.Node
	}
	if cfg.FileCheckFrequency == 0 {
		cfg.FileCheckFrequency = time.Hour
	}
	cfg.Clock = newClock(stateClock)
	logs := &lockedBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	st := store.New(cfg.SourceNames()...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- Run(ctx, cfg, signalledStore{st}) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return &startedSource{store: st, log: logs, stop: stop}
}

// podUIDs renders the store's pods as "name image uid" lines.
func podUIDs(s *store.Store) string {
	var lines []string
	for _, p := range s.Pods() {
		lines = append(lines, p.Name+" "+p.Spec.Containers[0].Image+" "+string(p.UID))
	}
	return strings.Join(lines, "\n")
}

// stateName is the file name of an origin's state: the SHA-256 of the
// origin, in hex, then ".json".
func stateName(origin string) string {
	sum := sha256.Sum256([]byte(origin))
	return hex.EncodeToString(sum[:]) + ".json"
}

// stateFiles lists the files of a source's state dir.
func stateFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestFileSourceLastGoodAcrossRestart runs a good manifest, stops the
// source, changes the manifest (and the state) while it is down, and starts
// a new source over the same state dir, as a restart of berth would.
func TestFileSourceLastGoodAcrossRestart(t *testing.T) {
	good := podspectest.Manifest("web", "nginx:1")
	tests := []struct {
		name string
		// down changes things while berth is down.
		down func(t *testing.T, manifest, stateDir string)
		// pods after the restart: "good" for the persisted pods with the
		// good UID, "" for none, or an image for a new version.
		pods string
		// problem is a substring of the one problem after the restart.
		problem string
		// files are the state files left after the restart (1 or 0).
		files int
		// warning is a substring of the log.
		warning string
	}{
		{
			name: "invalid edit keeps the last good pod",
			down: func(t *testing.T, m, _ string) {
				write(t, m, podspectest.Manifest("web", "nginx:2")+"    imagePullPolicy: Sometimes\n")
			},
			pods: "good", problem: "(the last good version of this pod keeps running)", files: 1,
		},
		{
			name: "syntax error keeps the last good pod",
			down: func(t *testing.T, m, _ string) { write(t, m, "{{ not yaml") },
			pods: "good", problem: "(the pods this manifest defined before keep running)", files: 1,
		},
		{
			name: "unreadable file keeps the last good pod",
			down: func(t *testing.T, m, _ string) { write(t, m, strings.Repeat("#", 5000)) },
			pods: "good", problem: "larger than the limit", files: 1,
		},
		{
			name: "file removed while down drops the pod and its state",
			down: func(t *testing.T, m, _ string) {
				if err := os.Remove(m); err != nil {
					t.Fatal(err)
				}
			},
			pods: "", files: 0,
		},
		{
			name: "file fixed while down runs the new version",
			down: func(t *testing.T, m, _ string) { write(t, m, podspectest.Manifest("web", "nginx:3")) },
			pods: "nginx:3", files: 1,
		},
		{
			name: "truncated state is ignored",
			down: func(t *testing.T, m, sd string) {
				write(t, m, "{{ not yaml")
				truncateState(t, sd)
			},
			pods: "", problem: "DecodeError", files: 0, warning: "ignoring a last good manifest state file",
		},
		{
			name: "state writable by others is ignored",
			down: func(t *testing.T, m, sd string) {
				write(t, m, "{{ not yaml")
				for _, n := range stateFiles(t, filepath.Join(sd, podspec.SourceFile)) {
					if err := os.Chmod(filepath.Join(sd, podspec.SourceFile, n), 0o666); err != nil {
						t.Fatal(err)
					}
				}
			},
			pods: "", problem: "DecodeError", files: 0, warning: "writable by group or others",
		},
		{
			name: "state of another manifest is ignored",
			down: func(t *testing.T, m, sd string) {
				write(t, m, "{{ not yaml")
				dir := filepath.Join(sd, podspec.SourceFile)
				names := stateFiles(t, dir)
				if err := os.Rename(filepath.Join(dir, names[0]), filepath.Join(dir, stateName(m+".other"))); err != nil {
					t.Fatal(err)
				}
			},
			pods: "", problem: "DecodeError", files: 0, warning: "named for another origin",
		},
		{
			name: "a write cut short by a kill is cleaned up",
			down: func(t *testing.T, m, sd string) {
				write(t, m, "{{ not yaml")
				write(t, filepath.Join(sd, podspec.SourceFile, "."+stateName(m)+".tmp-123"), "{\"version\":")
			},
			pods: "good", problem: "DecodeError", files: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			stateDir := filepath.Join(t.TempDir(), "root", "manifests")
			m := filepath.Join(dir, "web.yaml")
			write(t, m, good)
			cfg := Config{ManifestPath: dir, StateDir: stateDir, MaxBytes: 4096}

			first := startSources(t, cfg)
			eventually(t, "the good pod", func() bool { return len(first.store.Pods()) == 1 })
			goodPods := podUIDs(first.store)
			first.stop()
			if n := len(stateFiles(t, filepath.Join(stateDir, podspec.SourceFile))); n != 1 {
				t.Fatalf("%d state files after a good manifest, want 1", n)
			}

			tc.down(t, m, stateDir)
			second := startSources(t, cfg)
			eventually(t, "the source to deliver", second.store.SourcesReady)
			got := podUIDs(second.store)
			switch tc.pods {
			case "good":
				if got != goodPods {
					t.Errorf("pods after the restart:\n%s\nwant the last good ones:\n%s", got, goodPods)
				}
			case "":
				if got != "" {
					t.Errorf("pods after the restart: %s, want none", got)
				}
			default:
				if !strings.Contains(got, " "+tc.pods+" ") {
					t.Errorf("pods after the restart: %s, want %s", got, tc.pods)
				}
			}
			problems := second.store.Problems()
			if tc.problem == "" && len(problems) > 0 {
				t.Errorf("problems: %+v", problems)
			}
			if tc.problem != "" && (len(problems) != 1 || !strings.Contains(problems[0].Reason+" "+problems[0].Message, tc.problem)) {
				t.Errorf("problems: %+v, want one with %q", problems, tc.problem)
			}
			second.stop()
			if files := stateFiles(t, filepath.Join(stateDir, podspec.SourceFile)); len(files) != tc.files || (tc.files == 1 && files[0] != stateName(m)) {
				t.Errorf("state files after the restart: %v, want %d", files, tc.files)
			}
			if !strings.Contains(second.log.String(), tc.warning) {
				t.Errorf("log has no %q:\n%s", tc.warning, second.log.String())
			}
			if strings.Contains(first.log.String()+second.log.String(), "level=ERROR") {
				t.Errorf("errors logged:\n%s%s", first.log.String(), second.log.String())
			}
		})
	}
}

// truncateState cuts every state file of the file source in half, as a
// disk without the fsync might leave it.
func truncateState(t *testing.T, stateDir string) {
	t.Helper()
	dir := filepath.Join(stateDir, podspec.SourceFile)
	for _, n := range stateFiles(t, dir) {
		p := filepath.Join(dir, n)
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data[:len(data)/2], 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLastGoodStateFile checks what a state file holds and how it is
// written: one file per manifest, named by the hash of its origin, mode
// 0600, no temporary file left, rewritten only when the pods change, and
// removed with the manifest.
func TestLastGoodStateFile(t *testing.T) {
	dir := t.TempDir()
	stateDir := filepath.Join(t.TempDir(), "manifests")
	a, b := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	write(t, a, podspectest.Manifest("a", "img:1"))
	write(t, b, podspectest.Manifest("b", "img:1")+"---\n"+podspectest.Manifest("b2", "img:1"))
	src := startSources(t, Config{ManifestPath: dir, StateDir: stateDir})
	eventually(t, "the pods", func() bool { return len(src.store.Pods()) == 3 })
	sdir := filepath.Join(stateDir, podspec.SourceFile)
	eventually(t, "two state files", func() bool { return len(stateFiles(t, sdir)) == 2 })

	info, err := os.Stat(sdir)
	if err != nil || info.Mode().Perm() != 0o700 {
		t.Errorf("state dir: %v %v, want mode 0700", info.Mode(), err)
	}
	var sf struct {
		Source, Origin, NodeName string
		Accepted                 time.Time
		Pods                     []json.RawMessage
	}
	data, err := os.ReadFile(filepath.Join(sdir, stateName(b)))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &sf); err != nil {
		t.Fatal(err)
	}
	if sf.Origin != b || sf.Source != podspec.SourceFile || sf.NodeName != podspectest.Node || !sf.Accepted.Equal(stateClock) || len(sf.Pods) != 2 {
		t.Errorf("state of b.yaml: origin %q source %q node %q accepted %s, %d pods", sf.Origin, sf.Source, sf.NodeName, sf.Accepted, len(sf.Pods))
	}
	for _, n := range stateFiles(t, sdir) {
		fi, err := os.Stat(filepath.Join(sdir, n))
		if err != nil || fi.Mode().Perm() != 0o600 || !strings.HasSuffix(n, ".json") || strings.HasPrefix(n, ".") {
			t.Errorf("state file %s: %v %v", n, fi.Mode(), err)
		}
	}

	// A touch or a comment-only edit keeps the file as it is.
	before, _ := os.Stat(filepath.Join(sdir, stateName(a)))
	write(t, a, podspectest.Manifest("a", "img:1")+"# comment\n")
	// Files are read in event order: once b's edit is in, a's was read.
	write(t, b, podspectest.Manifest("b", "img:2"))
	eventually(t, "b2 gone", func() bool { return len(src.store.Pods()) == 2 })
	after, _ := os.Stat(filepath.Join(sdir, stateName(a)))
	if !os.SameFile(before, after) {
		t.Errorf("state of an unchanged manifest was rewritten")
	}

	if err := os.Remove(b); err != nil {
		t.Fatal(err)
	}
	eventually(t, "b's state removed", func() bool {
		names := stateFiles(t, sdir)
		return len(names) == 1 && names[0] == stateName(a)
	})
	src.stop()
}

// TestLastGoodTooLarge: an entry whose state would exceed the manifest
// size limit is not persisted (and an older state of it goes), with a
// warning.
func TestLastGoodTooLarge(t *testing.T) {
	dir := t.TempDir()
	stateDir := filepath.Join(t.TempDir(), "manifests")
	m := filepath.Join(dir, "a.yaml")
	write(t, m, podspectest.Manifest("a", "img:1"))
	src := startSources(t, Config{ManifestPath: dir, StateDir: stateDir, MaxBytes: 200})
	eventually(t, "the pod", func() bool { return len(src.store.Pods()) == 1 })
	src.stop()
	if names := stateFiles(t, filepath.Join(stateDir, podspec.SourceFile)); len(names) != 0 {
		t.Errorf("state files %v of an entry above the limit", names)
	}
	if !strings.Contains(src.log.String(), "larger than the limit") {
		t.Errorf("no warning:\n%s", src.log.String())
	}
}

// TestLastGoodSourceNoLongerConfigured: the state of a source berth no
// longer runs is dropped, so it never brings those pods back.
func TestLastGoodSourceNoLongerConfigured(t *testing.T) {
	dir := t.TempDir()
	stateDir := filepath.Join(t.TempDir(), "manifests")
	write(t, filepath.Join(dir, "a.yaml"), podspectest.Manifest("a", "img:1"))
	src := startSources(t, Config{ManifestPath: dir, StateDir: stateDir})
	eventually(t, "the pod", func() bool { return len(src.store.Pods()) == 1 })
	src.stop()
	fake := &fakeServer{status: http.StatusOK, body: podspectest.List()}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	src = startSources(t, Config{URL: srv.URL, HTTPClient: srv.Client(), StateDir: stateDir})
	eventually(t, "the URL", src.store.SourcesReady)
	src.stop()
	if _, err := os.Stat(filepath.Join(stateDir, podspec.SourceFile)); !os.IsNotExist(err) {
		t.Errorf("state of the file source is still there: %v", err)
	}
}

// TestHTTPSourceLastGoodAcrossRestart: the URL body's last good pods
// survive a restart; a broken body at start keeps them; an unreachable URL
// at start delivers them but the source is not ready; an empty PodList
// removes the state.
func TestHTTPSourceLastGoodAcrossRestart(t *testing.T) {
	fake := &fakeServer{status: http.StatusOK, body: podspectest.List(podspectest.Manifest("a", "img:1"))}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	stateDir := filepath.Join(t.TempDir(), "manifests")
	cfg := Config{URL: srv.URL + "/pods", HTTPClient: srv.Client(), StateDir: stateDir,
		HTTPCheckFrequency: time.Hour, HTTPTimeout: time.Second}

	src := startSources(t, cfg)
	eventually(t, "the pod", func() bool { return len(src.store.Pods()) == 1 })
	good := podUIDs(src.store)
	src.stop()

	// A broken body at start.
	fake.set(http.StatusOK, "", "apiVersion: v1\nkind: PodList\nitems: [", false)
	src = startSources(t, cfg)
	eventually(t, "ready", src.store.SourcesReady)
	if got := podUIDs(src.store); got != good {
		t.Errorf("broken body at start: pods %q, want %q", got, good)
	}
	if ps := src.store.Problems(); len(ps) != 1 || !strings.Contains(ps[0].Message, "keep running") {
		t.Errorf("broken body at start: problems %+v", ps)
	}
	src.stop()

	// An unreachable URL at start: the last good pods, not ready.
	fake.set(http.StatusServiceUnavailable, "", "", false)
	src = startSources(t, cfg)
	eventually(t, "the persisted pods", func() bool { return podUIDs(src.store) == good })
	eventually(t, "the problem", func() bool { return problemsOf(src.store) == "Unreachable pods " })
	if src.store.SourcesReady() {
		t.Errorf("ready although the URL never answered")
	}
	src.stop()

	// The body no longer has the pod: the state goes.
	fake.set(http.StatusOK, "", podspectest.List(), false)
	src = startSources(t, cfg)
	eventually(t, "ready", src.store.SourcesReady)
	src.stop()
	if names := stateFiles(t, filepath.Join(stateDir, podspec.SourceHTTP)); len(names) != 0 {
		t.Errorf("state files %v after the body emptied", names)
	}
	fake.set(http.StatusOK, "", "{{", false)
	src = startSources(t, cfg)
	eventually(t, "ready", src.store.SourcesReady)
	if got := podUIDs(src.store); got != "" {
		t.Errorf("pods %q from a state that should be gone", got)
	}
}
