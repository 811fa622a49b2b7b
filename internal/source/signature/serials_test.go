package signature

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/source/signature/signaturetest"
	"k8s.io/apimachinery/pkg/util/sets"
	clocktesting "k8s.io/utils/clock/testing"
)

func newTestSerials(t *testing.T, stateDir string, log io.Writer) *Serials {
	t.Helper()
	return NewSerials(stateDir, podspec.SourceFile, clocktesting.NewFakeClock(time.Now()),
		slog.New(slog.NewTextHandler(log, nil)))
}

// noLive is a source holding nothing, for flush.
func noLive() (origins, names sets.Set[string]) { return sets.New[string](), sets.New[string]() }

// TestSerialStateConflict walks the serials of two files and the pods they
// define: a body is refused when its file or any pod it names has a higher
// serial, whatever file that serial came from; an equal serial is
// accepted; and a new Serials reading what the first persisted (a
// berth restart) refuses the same.
func TestSerialStateConflict(t *testing.T) {
	dir := t.TempDir()
	st := newTestSerials(t, dir, io.Discard)
	const web, zero = "/m/web.yaml", "/m/0-web.yaml"
	webPod, cfg := Key("", "web-node1", "default"), Key(podspec.KindConfigMap, "cfg", "default")
	steps := []struct {
		name     string
		restart  bool // a fresh Serials over the same dir first
		origin   string
		keys     []string
		serial   uint64
		conflict string // "" accepted; "origin" refused for the file; else the key
	}{
		{"first body", false, web, []string{webPod, cfg}, 2, ""},
		{"same body again", false, web, []string{webPod, cfg}, 2, ""},
		{"older at its file", false, web, []string{webPod}, 1, "origin"},
		{"older under another name", false, zero, []string{webPod}, 1, webPod},
		{"older object under another name", false, zero, []string{cfg}, 1, cfg},
		{"another pod under another name", false, zero, []string{"db-node1_default"}, 1, ""},
		{"equal serial under another name", false, zero, []string{webPod}, 2, ""},
		{"after a restart: older under another name", true, "/m/1-web.yaml", []string{webPod}, 1, webPod},
		{"after a restart: older at its file", false, web, nil, 1, "origin"},
		{"after a restart: newer", false, zero, []string{webPod}, 3, ""},
		{"after a restart: the old file's version now older", false, web, []string{webPod}, 2, webPod},
	}
	for _, s := range steps {
		if s.restart {
			st = newTestSerials(t, dir, io.Discard)
		}
		key, last, older := st.conflict(s.origin, s.keys, s.serial)
		got := ""
		if older {
			got = key
			if key == "" {
				got = "origin"
			}
		}
		if got != s.conflict {
			t.Fatalf("%s: conflict(%s, %v, %d) = %q (serial %d), want %q", s.name, s.origin, s.keys, s.serial, got, last, s.conflict)
		}
		if !older {
			st.record(s.origin, s.keys, s.serial)
			st.Flush(noLive)
		}
	}
	entries, err := os.ReadDir(filepath.Join(dir, "serials"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "file.json" {
		t.Fatalf("serial files: %v, want file.json alone, no temporary file", entries)
	}
	info, err := os.Stat(filepath.Join(dir, "serials"))
	if err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("serials dir: %v %v, want mode 0700", info, err)
	}
}

// TestSerialStateMigration upgrades from the per-origin serial files of
// an earlier berth: their serials still refuse older bodies at their
// files, the current bodies (equal serials) are accepted, adopt gives the
// serial to the pods the file held so they are protected under any name,
// and the first flush moves everything into the new file and removes the
// old ones.
func TestSerialStateMigration(t *testing.T) {
	dir := t.TempDir()
	const web, db = "/m/web.yaml", "/m/db.yaml"
	webPod := Key("", "web-node1", "default")
	st := newTestSerials(t, dir, io.Discard)
	signaturetest.WriteLegacySerial(t, st.dir, podspec.SourceFile, web, 5)
	signaturetest.WriteLegacySerial(t, st.dir, podspec.SourceFile, db, 3)
	if err := os.WriteFile(filepath.Join(st.dir, "file-bogus.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}

	st.Adopt(web, []string{webPod}) // restoreLastGood: web.yaml held web
	for _, tt := range []struct {
		origin string
		keys   []string
		serial uint64
		older  bool
	}{
		{web, []string{webPod}, 4, true},
		{web, []string{webPod}, 5, false},
		{db, nil, 2, true},
		{db, nil, 3, false},
		{"/m/0-web.yaml", []string{webPod}, 4, true},
		{"/m/0-web.yaml", []string{webPod}, 5, false},
	} {
		if _, _, older := st.conflict(tt.origin, tt.keys, tt.serial); older != tt.older {
			t.Fatalf("conflict(%s, %d) = %v, want %v", tt.origin, tt.serial, older, tt.older)
		}
	}
	st.Flush(noLive)
	entries, err := os.ReadDir(st.dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "file.json" {
		t.Fatalf("after the migration: %v, want file.json alone", entries)
	}
	restarted := newTestSerials(t, dir, io.Discard)
	for origin, keys := range map[string][]string{web: nil, db: nil, "/m/0-web.yaml": {webPod}} {
		if _, last, older := restarted.conflict(origin, keys, 2); !older || last < 3 {
			t.Fatalf("after a restart: conflict(%s, %v, 2) = %d, %v; want refused", origin, keys, last, older)
		}
	}
}

// TestSerialStateIgnoresBadFiles checks that a serial file berth cannot
// trust is ignored with a warning: berth starts, and the next accepted
// serial replaces it.
func TestSerialStateIgnoresBadFiles(t *testing.T) {
	const origin = "/m/web.yaml"
	good := `{"version":2,"source":"file","origins":{"` + origin + `":{"serial":50,"accepted":"2026-11-24T00:00:00Z"}},"names":{}}`
	for _, tt := range []struct {
		name    string
		content string
		mode    os.FileMode
		warn    string
	}{
		{"corrupt", "{", 0o600, "decode"},
		{"other version", strings.Replace(good, `"version":2`, `"version":3`, 1), 0o600, "version 3"},
		{"other source", strings.Replace(good, `"source":"file"`, `"source":"http"`, 1), 0o600, "want \\\"file\\\""},
		{"unknown field", strings.Replace(good, `"names"`, `"x":1,"names"`, 1), 0o600, "unknown field"},
		{"empty name", strings.Replace(good, `"names":{}`, `"names":{"":{"serial":1}}`, 1), 0o600, "empty origin or name"},
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
			p := filepath.Join(st.dir, st.fileName())
			if err := os.WriteFile(p, []byte(tt.content), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, tt.mode); err != nil {
				t.Fatal(err)
			}
			if _, _, older := st.conflict(origin, nil, 3); older {
				t.Fatal("refused over an untrusted serial file")
			}
			if !strings.Contains(log.String(), tt.warn) {
				t.Fatalf("log %q does not say %q", log.String(), tt.warn)
			}
			st.record(origin, nil, 3)
			st.Flush(noLive)
			if _, _, older := newTestSerials(t, dir, io.Discard).conflict(origin, nil, 2); !older {
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
	if err := os.WriteFile(filepath.Join(st.dir, st.fileName()), []byte(good), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, last, older := st.conflict(origin, nil, 49); !older || last != 50 {
		t.Fatalf("conflict(49) over a good file of 50 = %d, %v", last, older)
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
	st.record("o", []string{"p_default"}, 5)
	st.Flush(noLive)
	if _, _, older := st.conflict("other", []string{"p_default"}, 4); !older {
		t.Fatal("older serial accepted in memory")
	}
	if !strings.Contains(log.String(), "cannot use the serials directory") {
		t.Fatalf("log %q", log.String())
	}
}

// TestSerialStateBound fills the state past its bounds: entries of what
// the source no longer holds go first, the oldest accepted first, and
// what it holds stays protected.
func TestSerialStateBound(t *testing.T) {
	dir := t.TempDir()
	clk := clocktesting.NewFakeClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	var log bytes.Buffer
	st := NewSerials(dir, podspec.SourceFile, clk, slog.New(slog.NewTextHandler(&log, nil)))
	const live = "live-node1_default"
	st.record("/m/live.yaml", []string{live}, 1)
	for i := range maxSerialNames + 10 {
		clk.Step(time.Second)
		st.record(fmt.Sprintf("/m/%d.yaml", i), []string{fmt.Sprintf("gone%d-node1_default", i)}, 7)
	}
	st.Flush(func() (origins, names sets.Set[string]) {
		return sets.New("/m/live.yaml"), sets.New(live)
	})
	restarted := newTestSerials(t, dir, io.Discard)
	restarted.load()
	if len(restarted.names) != maxSerialNames || len(restarted.origins) != maxSerialOrigins {
		t.Fatalf("%d names and %d origins kept, want %d and %d", len(restarted.names), len(restarted.origins), maxSerialNames, maxSerialOrigins)
	}
	for _, k := range []string{live, fmt.Sprintf("gone%d-node1_default", maxSerialNames+9)} {
		if _, ok := restarted.SerialOf(k); !ok {
			t.Errorf("%s evicted", k)
		}
	}
	var evicted []string
	for i := range maxSerialNames + 10 {
		if _, ok := restarted.SerialOf(fmt.Sprintf("gone%d-node1_default", i)); !ok {
			evicted = append(evicted, fmt.Sprint(i))
		}
	}
	if want := []string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10"}; !slices.Equal(evicted, want) {
		t.Errorf("evicted %v, want the oldest gone ones %v", evicted, want)
	}
	if _, ok := restarted.OriginSerial("/m/live.yaml"); !ok {
		t.Error("the live file's serial evicted")
	}
	if strings.Contains(log.String(), "lose their replay protection") {
		t.Errorf("warned of live entries evicted: %s", log.String())
	}
}
