package syncloop

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podtest"
	"github.com/berth-agent/berth/internal/rollback"
)

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
			bad:     func(t *testing.T) *v1.Pod { return podtest.HTTP(t, podtest.NeverReadyManifest("")) },
			waiting: podspec.SourceHTTP,
			then:    func(bad *v1.Pod) ([]*v1.Pod, []*v1.Pod) { return nil, []*v1.Pod{bad} },
		},
		{
			name:    "file removed while another file serves the name",
			bad:     func(t *testing.T) *v1.Pod { return podtest.Parse(t, "/m/web-b.yaml", podtest.NeverReadyManifest("")) },
			waiting: podspec.SourceFile,
			then:    func(bad *v1.Pod) ([]*v1.Pod, []*v1.Pod) { return []*v1.Pod{bad}, nil },
		},
		{
			name: "file renamed and broken at once",
			bad:  func(t *testing.T) *v1.Pod { return podtest.Parse(t, "/m/web2.yaml", podtest.NeverReadyManifest("")) },
			then: func(bad *v1.Pod) ([]*v1.Pod, []*v1.Pod) { return []*v1.Pod{bad}, nil },
		},
		{
			name:       "file edited badly rolls back to its last Ready version",
			bad:        func(t *testing.T) *v1.Pod { return podtest.Parse(t, "/m/web.yaml", podtest.NeverReadyManifest("")) },
			then:       func(bad *v1.Pod) ([]*v1.Pod, []*v1.Pod) { return []*v1.Pod{bad}, nil },
			rolledBack: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "rollback")
				h := newHarness(t, harnessOpts{sources: []string{podspec.SourceFile, podspec.SourceHTTP}, rollback: rollback.Config{
					After:    map[string]time.Duration{podspec.SourceFile: time.Minute, podspec.SourceHTTP: time.Minute},
					MinReady: 4 * time.Second, StateDir: dir}})
				good, bad := podtest.Simple(t, "web", podtest.Loop), tt.bad(t)
				h.apply(podspec.SourceHTTP)
				h.apply(podspec.SourceFile, good)
				h.eventually("good Ready", func() bool {
					st := h.status(good.UID)
					return st != nil && podtest.ConditionTrue(st.Status, v1.PodReady)
				})
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
				h.stepUntil("bad judged", 2*time.Second, 60, func() bool { return len(h.agent.Problems()) == 1 })
				probs := h.agent.Problems()
				runs := func(uid types.UID) int {
					return len(slices.DeleteFunc(h.rt.events(), func(e string) bool { return e != "run:"+string(uid) }))
				}
				if tt.rolledBack {
					if probs[0].Reason != rollback.ReasonRolledBack {
						t.Fatalf("problems %+v, want RolledBack to %s", probs, good.UID)
					}
					h.eventually("good running again", func() bool { n, _ := h.rt.running(good.UID); return n == 1 })
					if !stateMentions(t, dir, good.UID) {
						t.Error("the rollback to the last Ready version is not persisted")
					}
					return
				}
				if probs[0].Reason != rollback.ReasonNoReadyVersion || !strings.Contains(probs[0].Message, string(bad.UID)) {
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
