package manifest

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func newTestSerials(t *testing.T, stateDir string, log io.Writer) *serialState {
	t.Helper()
	return newSerialState(SourceConfig{StateDir: stateDir, Clock: clocktesting.NewFakeClock(time.Now())}, SourceHTTP,
		slog.New(slog.NewTextHandler(log, nil)))
}

// TestSerialStateAccept walks the serials of one origin: newer accepted,
// equal accepted again, older refused, also by a new serialState reading
// what the first persisted (a berth restart), while another origin's
// serials are its own.
func TestSerialStateAccept(t *testing.T) {
	dir := t.TempDir()
	st := newTestSerials(t, dir, io.Discard)
	const a, b = "https://m.example/a.yaml", "https://m.example/b.yaml"
	steps := []struct {
		st     *serialState
		origin string
		serial uint64
		refuse bool
	}{
		{st, a, 5, false},
		{st, a, 5, false},
		{st, a, 4, true},
		{st, a, 9, false},
		{st, b, 1, false},
		{nil, a, 8, true}, // nil: a fresh serialState over the same dir
		{nil, a, 9, false},
		{nil, b, 0, true},
		{nil, a, 10, false},
	}
	restarted := newTestSerials(t, dir, io.Discard)
	for i, s := range steps {
		cur := s.st
		if cur == nil {
			cur = restarted
		}
		last, err := cur.accept(s.origin, s.serial)
		if (err != nil) != s.refuse {
			t.Fatalf("step %d: accept(%s, %d) = %d, %v; refuse %v", i, s.origin, s.serial, last, err, s.refuse)
		}
	}
	entries, err := os.ReadDir(filepath.Join(dir, "serials"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Fatalf("serial files: %v, want one per origin and no temporary file", entries)
	}
	info, err := os.Stat(filepath.Join(dir, "serials"))
	if err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("serials dir: %v %v, want mode 0700", info, err)
	}
	if last, err := newTestSerials(t, dir, io.Discard).accept(a, 9); err == nil || last != 10 {
		t.Fatalf("after a restart: accept(9) = %d, %v; want refused below 10", last, err)
	}
}

// TestSerialStateIgnoresBadFiles checks that a serial file berth cannot
// trust is ignored with a warning: berth starts, and the next accepted
// serial replaces it.
func TestSerialStateIgnoresBadFiles(t *testing.T) {
	const origin = "https://m.example/pods.yaml"
	good := `{"version":1,"source":"http","origin":"` + origin + `","serial":50,"accepted":"2026-11-24T00:00:00Z"}`
	for _, tt := range []struct {
		name    string
		content string
		mode    os.FileMode
		warn    string
	}{
		{"corrupt", "{", 0o600, "decode"},
		{"other version", strings.Replace(good, `"version":1`, `"version":2`, 1), 0o600, "version 2"},
		{"other origin", strings.Replace(good, "pods.yaml", "else.yaml", 1), 0o600, "want http"},
		{"unknown field", strings.Replace(good, `"serial"`, `"x":1,"serial"`, 1), 0o600, "unknown field"},
		{"trailing data", good + "{}", 0o600, "trailing data"},
		{"writable by others", good, 0o666, "writable by group or others"},
		{"too large", good + strings.Repeat(" ", maxSerialFileBytes), 0o600, "larger than the limit"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			var log bytes.Buffer
			st := newTestSerials(t, dir, &log)
			if err := os.MkdirAll(st.dir, 0o700); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(st.dir, st.serialName(origin))
			if err := os.WriteFile(p, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, tt.mode); err != nil {
				t.Fatal(err)
			}
			if _, err := st.accept(origin, 3); err != nil {
				t.Fatalf("accept with an untrusted serial file: %v", err)
			}
			if !strings.Contains(log.String(), tt.warn) {
				t.Fatalf("log %q does not say %q", log.String(), tt.warn)
			}
			if _, err := newTestSerials(t, dir, io.Discard).accept(origin, 2); err == nil {
				t.Fatal("the serial accepted after the bad file was not persisted")
			}
		})
	}
	// The good one, to be sure the cases above fail for their own reason.
	dir := t.TempDir()
	st := newTestSerials(t, dir, io.Discard)
	if err := os.MkdirAll(st.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(st.dir, st.serialName(origin)), []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	if last, err := st.accept(origin, 49); err == nil || last != 50 {
		t.Fatalf("accept(49) over a good file of 50 = %d, %v", last, err)
	}
}

// TestSerialStateUnusableDir checks a state dir berth may not use only
// turns persistence off: serials are still checked in memory.
func TestSerialStateUnusableDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "serials"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	st := newTestSerials(t, dir, &log)
	if _, err := st.accept("o", 5); err != nil {
		t.Fatal(err)
	}
	if _, err := st.accept("o", 4); err == nil {
		t.Fatal("older serial accepted in memory")
	}
	if !strings.Contains(log.String(), "cannot use the serials directory") {
		t.Fatalf("log %q", log.String())
	}
}
