package agent

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/podevents"
	"github.com/berth-agent/berth/internal/podspec"
)

// fleetURL is the --manifest-url of the tests' HTTP pods.
const fleetURL = "https://fleet.example/pods.yaml"

// httpPod parses a manifest the way the URL source does.
func httpPod(t *testing.T, yaml string) *v1.Pod {
	t.Helper()
	res := podspec.Parse([]byte(yaml), podspec.Origin{Source: podspec.SourceHTTP, Path: fleetURL}, testNode)
	if len(res.Problems) > 0 || len(res.Pods) != 1 {
		t.Fatalf("manifest of %s: %v", fleetURL, res.Problems)
	}
	return res.Pods[0]
}

// neverReadyManifest is a pod "web" whose init container never ends;
// marker makes versions of it differ.
func neverReadyManifest(marker string) string {
	return `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  initContainers: [{name: wait, image: busybox:1.36, command: [sleep, "3600"]}]
  containers: [{name: app, image: busybox:1.36, command: [sleep, "3600` + marker + `"]}]
`
}

// stateMentions reports whether a rollback state file under dir holds
// uid, as a last Ready version or a rollback.
func stateMentions(t *testing.T, dir string, uid types.UID) bool {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), string(uid)) {
			return true
		}
	}
	return false
}

// TestAgentRollbackTargetIsTheManifests: a rollback target belongs to the
// manifest (source and origin) that produced it. Once the operator removes
// that manifest, a failing version of the same full name from another
// manifest (the URL, another file, the file renamed) runs on with a
// NoReadyVersion problem: the removed manifest's version never runs
// again, and the state on disk keeps nothing of it. A bad edit of the
// same file still rolls back to its last Ready version.
func TestAgentRollbackTargetIsTheManifests(t *testing.T) {
	tests := []struct {
		name string
		bad  func(t *testing.T) *v1.Pod
		// waiting is the source that serves bad beside good (it waits
		// behind it), once good is the last Ready version; "" for none.
		waiting string
		// then is what the sources serve next: bad, without good.
		then       func(bad *v1.Pod) (file, http []*v1.Pod)
		rolledBack bool
	}{
		{
			name:    "file removed while the URL serves the name",
			bad:     func(t *testing.T) *v1.Pod { return httpPod(t, neverReadyManifest("")) },
			waiting: podspec.SourceHTTP,
			then:    func(bad *v1.Pod) ([]*v1.Pod, []*v1.Pod) { return nil, []*v1.Pod{bad} },
		},
		{
			name:    "file removed while another file serves the name",
			bad:     func(t *testing.T) *v1.Pod { return pod(t, "/m/web-b.yaml", neverReadyManifest("")) },
			waiting: podspec.SourceFile,
			then:    func(bad *v1.Pod) ([]*v1.Pod, []*v1.Pod) { return []*v1.Pod{bad}, nil },
		},
		{
			name: "file renamed and broken at once",
			bad:  func(t *testing.T) *v1.Pod { return pod(t, "/m/web2.yaml", neverReadyManifest("")) },
			then: func(bad *v1.Pod) ([]*v1.Pod, []*v1.Pod) { return []*v1.Pod{bad}, nil },
		},
		{
			name:       "file edited badly rolls back to its last Ready version",
			bad:        func(t *testing.T) *v1.Pod { return pod(t, "/m/web.yaml", neverReadyManifest("")) },
			then:       func(bad *v1.Pod) ([]*v1.Pod, []*v1.Pod) { return []*v1.Pod{bad}, nil },
			rolledBack: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "rollback")
				h := newHarness(t, harnessOpts{sources: []string{podspec.SourceFile, podspec.SourceHTTP}, rollback: RollbackConfig{
					After:    map[string]time.Duration{podspec.SourceFile: time.Minute, podspec.SourceHTTP: time.Minute},
					MinReady: 4 * time.Second, StateDir: dir}})
				good, bad := simplePod(t, "web", loop), tt.bad(t)
				h.apply(podspec.SourceHTTP)
				h.apply(podspec.SourceFile, good)
				h.eventually("good Ready", func() bool { st := h.status(good.UID); return st != nil && conditionTrue(st.Status, v1.PodReady) })
				h.stepUntil("good persisted as the last Ready version", 2*time.Second, 10, func() bool { return stateMentions(t, dir, good.UID) })
				switch tt.waiting {
				case podspec.SourceHTTP:
					h.apply(podspec.SourceHTTP, bad)
				case podspec.SourceFile:
					h.apply(podspec.SourceFile, good, bad)
				}
				if tt.waiting != "" {
					h.eventually("bad waiting behind good", func() bool {
						st := h.status(bad.UID)
						return st != nil && st.Status.Reason == "WaitingForPreviousPod"
					})
				}

				file, web := tt.then(bad)
				h.apply(podspec.SourceHTTP, web...)
				h.apply(podspec.SourceFile, file...)
				h.eventually("bad running its init container", func() bool { n, _ := h.rt.running(bad.UID); return n == 1 })
				h.stepUntil("bad judged", 2*time.Second, 60, func() bool { return len(h.agent.problems()) == 1 })
				probs := h.agent.problems()
				runs := func(uid types.UID) int {
					return len(slices.DeleteFunc(h.rt.events(), func(e string) bool { return e != "run:"+string(uid) }))
				}
				if tt.rolledBack {
					if probs[0].Reason != ReasonRolledBack {
						t.Fatalf("problems %+v, want RolledBack to %s", probs, good.UID)
					}
					h.eventually("good running again", func() bool { n, _ := h.rt.running(good.UID); return n == 1 })
					if !stateMentions(t, dir, good.UID) {
						t.Error("the rollback to the last Ready version is not persisted")
					}
					return
				}
				if probs[0].Reason != ReasonNoReadyVersion || !strings.Contains(probs[0].Message, string(bad.UID)) {
					t.Fatalf("problems %+v, want NoReadyVersion for %s: the version of a removed manifest is no rollback target", probs, bad.UID)
				}
				h.step(2 * time.Minute)
				if n := runs(good.UID); n != 1 {
					t.Errorf("the removed manifest's version ran %d times, want 1 (before its removal only)", n)
				}
				if n, _ := h.rt.running(bad.UID); n != 1 {
					t.Errorf("the failed version has %d running containers, want 1: with no target it runs on", n)
				}
				if stateMentions(t, dir, good.UID) {
					t.Error("the rollback state still holds the removed manifest's version")
				}
			})
		})
	}
}

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
		data, err := json.Marshal(v1RollbackFile{Version: 1, NodeName: testNode, FullName: fn, LastReady: good, ReadyAt: clk.Now(),
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
	webGood, webBad := simplePod(t, "web", loop), httpPod(t, neverReadyManifest(""))
	dbGood, dbBad := simplePod(t, "db", loop), simplePod(t, "db", "exit 1")
	write(webGood, webBad)
	write(dbGood, dbBad)

	cfg := RollbackConfig{After: map[string]time.Duration{podspec.SourceFile: time.Minute, podspec.SourceHTTP: time.Minute}, StateDir: dir}
	r := newRollbacks(cfg, testNode, clk, log, podevents.New(clk, log), prometheus.NewRegistry())
	if got := r.admit(webBad); got != webBad {
		t.Errorf("admit(the URL's version) = %s, want itself: a layout-1 rollback to another manifest's version must not hold", got.UID)
	}
	if got := r.admit(dbBad); got.UID != dbGood.UID {
		t.Errorf("admit(db's bad edit) = %s, want its last Ready version %s: a rollback within one manifest holds", got.UID, dbGood.UID)
	}
	if probs := r.problems(); len(probs) != 1 || probs[0].Reason != ReasonRolledBack || !strings.Contains(probs[0].Message, "m") || probs[0].Origin != "/m/db.yaml" {
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
	r2 := newRollbacks(cfg, testNode, clk, log, podevents.New(clk, log), prometheus.NewRegistry())
	if got := r2.admit(webBad); got != webBad {
		t.Errorf("after a restart admit(the URL's version) = %s, want itself", got.UID)
	}
	if got := r2.admit(dbBad); got.UID != dbGood.UID {
		t.Errorf("after a restart admit(db's bad edit) = %s, want %s", got.UID, dbGood.UID)
	}
}
