package rollback

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/podevents"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podtest"
)

// v1RollbackFile is the layout-1 state file, keyed by full name alone,
// as berth wrote it before rollback targets belonged to their manifest.
type v1RollbackFile struct {
	Version    int       `json:"version"`
	NodeName   string    `json:"nodeName"`
	FullName   string    `json:"fullName"`
	LastReady  *v1.Pod   `json:"lastReady,omitempty"`
	ReadyAt    time.Time `json:"readyAt,omitzero"`
	RolledBack *rollback `json:"rolledBack,omitempty"`
}

// TestRollbackStateLayout1: a berth upgraded over layout-1 state keeps a
// record only as its kept pod's manifest (its config.source and
// config.origin annotations) owns it. A rollback in force from another
// manifest's failed version to it is dropped, so that version gets a trial
// of its own; a rollback within one manifest stays in force. The files are
// rewritten in the current layout.
func TestRollbackStateLayout1(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := filepath.Join(t.TempDir(), "rollback")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(good, bad *v1.Pod) {
		t.Helper()
		fn := podspec.FullName(good)
		data, err := json.Marshal(v1RollbackFile{Version: 1, NodeName: podtest.Node, FullName: fn, LastReady: good, ReadyAt: clk.Now(),
			RolledBack: &rollback{Bad: bad.UID, BadSource: bad.Annotations[podspec.AnnotationSource], BadOrigin: bad.Annotations[podspec.AnnotationOrigin],
				Good: good.UID, At: clk.Now(), Reason: ReasonRolledBack, Message: "m"}})
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(fn))
		if err := os.WriteFile(filepath.Join(dir, hex.EncodeToString(sum[:])+".json"), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// web: the file's version runs in place of the URL's failed one, the
	// state the removal of web.yaml turned into a rollback to a removed
	// manifest. db: a bad edit of db.yaml rolled back to its last Ready
	// version.
	webGood, webBad := podtest.Simple(t, "web", podtest.Loop), podtest.HTTP(t, podtest.NeverReadyManifest(""))
	dbGood, dbBad := podtest.Simple(t, "db", podtest.Loop), podtest.Simple(t, "db", "exit 1")
	write(webGood, webBad)
	write(dbGood, dbBad)

	cfg := Config{After: map[string]time.Duration{podspec.SourceFile: time.Minute, podspec.SourceHTTP: time.Minute}, StateDir: dir}
	r := New(cfg, podtest.Node, clk, log, podevents.New(clk, log), prometheus.NewRegistry())
	if got := r.Admit(webBad); got != webBad {
		t.Errorf("admit(the URL's version) = %s, want itself: a layout-1 rollback to another manifest's version must not hold", got.UID)
	}
	if got := r.Admit(dbBad); got.UID != dbGood.UID {
		t.Errorf("admit(db's bad edit) = %s, want its last Ready version %s: a rollback within one manifest holds", got.UID, dbGood.UID)
	}
	if probs := r.Problems(); len(probs) != 1 || probs[0].Reason != ReasonRolledBack || !strings.Contains(probs[0].Message, "m") || probs[0].Origin != "/m/db.yaml" {
		t.Errorf("problems %+v, want db's rollback only", probs)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		var head struct {
			Version int    `json:"version"`
			Source  string `json:"source"`
			Origin  string `json:"origin"`
		}
		if err := json.Unmarshal(data, &head); err != nil || head.Version < 2 || head.Source != podspec.SourceFile || !strings.HasPrefix(head.Origin, "/m/") {
			t.Errorf("state file %s after the upgrade: %+v (%v), want the current layout naming its manifest", e.Name(), head, err)
		}
	}
	if len(entries) != 2 {
		t.Errorf("%d state files after the upgrade, want 2", len(entries))
	}

	// The next berth reads the rewritten files the same.
	r2 := New(cfg, podtest.Node, clk, log, podevents.New(clk, log), prometheus.NewRegistry())
	if got := r2.Admit(webBad); got != webBad {
		t.Errorf("after a restart admit(the URL's version) = %s, want itself", got.UID)
	}
	if got := r2.Admit(dbBad); got.UID != dbGood.UID {
		t.Errorf("after a restart admit(db's bad edit) = %s, want %s", got.UID, dbGood.UID)
	}
}
