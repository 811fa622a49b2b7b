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

	"github.com/berth-agent/berth/internal/podevents"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podtest"
	"github.com/berth-agent/berth/internal/rollback"
)

// TestAgentRollsBackToLastReadyVersion: on the fake runtime, an edit whose
// init container never ends is stopped when its window ends and the last
// Ready version runs again, never beside it; delivering the bad version
// again changes nothing, and a new version ends the rollback.
func TestAgentRollsBackToLastReadyVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOpts{rollback: rollback.Config{After: map[string]time.Duration{podspec.SourceFile: time.Minute},
			MinReady: 4 * time.Second, StateDir: filepath.Join(t.TempDir(), "rollback")}})
		good := podtest.Simple(t, "web", podtest.Loop)
		h.apply(podspec.SourceFile, good)
		h.eventually("good Ready", func() bool {
			st := h.status(good.UID)
			return st != nil && podtest.ConditionTrue(st.Status, v1.PodReady)
		})
		h.stepUntil("good is the last Ready version", 2*time.Second, 10, func() bool { return h.lastReady(good) == good.UID })

		bad := neverReadyPod(t)
		h.apply(podspec.SourceFile, bad)
		h.eventually("bad running its init container", func() bool { n, _ := h.rt.running(bad.UID); return n == 1 })
		h.stepUntil("good running again", 2*time.Second, 60, func() bool { n, _ := h.rt.running(good.UID); return n == 1 })
		h.eventually("bad removed", func() bool { return h.rt.objects(bad.UID) == 0 })
		if v := h.rt.exclusivityViolations(); len(v) > 0 {
			t.Fatalf("two versions ran at once: %v", v)
		}
		probs := h.agent.Problems()
		if len(probs) != 1 || probs[0].Reason != rollback.ReasonRolledBack || !strings.Contains(probs[0].Message, string(bad.UID)) || !strings.Contains(probs[0].Message, string(good.UID)) {
			t.Fatalf("problems %+v, want one RolledBack naming both versions", probs)
		}
		// The runtime runs the good version before its worker has recorded
		// its status: wait for /pods to show it.
		var p *v1.Pod
		h.eventually("/pods showing the good version", func() bool {
			p = h.agent.Pod("default", good.Name)
			return p != nil && p.UID == good.UID
		})
		var cond *v1.PodCondition
		for i := range p.Status.Conditions {
			if p.Status.Conditions[i].Type == rollback.ConditionLatestVersion {
				cond = &p.Status.Conditions[i]
			}
		}
		if cond == nil || cond.Status != v1.ConditionFalse || cond.Reason != rollback.ReasonRolledBack || !strings.Contains(cond.Message, string(bad.UID)) {
			t.Errorf("condition %s = %+v, want False RolledBack naming %s", rollback.ConditionLatestVersion, cond, bad.UID)
		}
		if !slices.ContainsFunc(h.agent.Events(good.UID), func(e podevents.Event) bool { return e.Reason == rollback.ReasonRolledBack }) {
			t.Errorf("no RolledBack event on the good version: %+v", h.agent.Events(good.UID))
		}

		runs := func(uid types.UID) int {
			return len(slices.DeleteFunc(h.rt.events(), func(e string) bool { return e != "run:"+string(uid) }))
		}
		badRuns := runs(bad.UID)
		h.apply(podspec.SourceFile, bad)
		h.step(2 * time.Minute)
		if runs(bad.UID) != badRuns {
			t.Fatal("the bad version started again though its manifest did not change")
		}

		next := podtest.Simple(t, "web", podtest.Loop+" # fixed")
		h.apply(podspec.SourceFile, next)
		h.eventually("the new version running", func() bool { n, _ := h.rt.running(next.UID); return n == 1 })
		h.eventually("the good version stopped", func() bool { n, _ := h.rt.running(good.UID); return n == 0 })
		if probs := h.agent.Problems(); len(probs) != 0 {
			t.Errorf("problems %+v after the manifest changed", probs)
		}
		if v := h.rt.exclusivityViolations(); len(v) > 0 {
			t.Fatalf("two versions ran at once: %v", v)
		}
	})
}

// TestAgentRollbackAcrossRestart: berth killed after it decided a
// rollback, while the bad version is still being stopped. The next berth
// finds the bad version running and the rollback on disk: it stops the bad
// version first, then starts the good one once, never both at once.
func TestAgentRollbackAcrossRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := rollback.Config{After: map[string]time.Duration{podspec.SourceFile: time.Minute},
			MinReady: 4 * time.Second, StateDir: filepath.Join(t.TempDir(), "rollback")}
		h := newHarness(t, harnessOpts{rollback: cfg})
		good := podtest.Simple(t, "web", podtest.Loop)
		h.apply(podspec.SourceFile, good)
		h.eventually("good Ready", func() bool {
			st := h.status(good.UID)
			return st != nil && podtest.ConditionTrue(st.Status, v1.PodReady)
		})
		h.stepUntil("good is the last Ready version", 2*time.Second, 10, func() bool { return h.lastReady(good) == good.UID })
		bad := neverReadyPod(t)
		h.apply(podspec.SourceFile, bad)
		h.eventually("bad running its init container", func() bool { n, _ := h.rt.running(bad.UID); return n == 1 })
		release := h.rt.hold(bad.UID)
		h.stepUntil("the rollback decided", 2*time.Second, 60, func() bool { return len(h.agent.Problems()) == 1 })
		h.eventually("the good version waiting for the bad one", func() bool {
			st := h.status(good.UID)
			return st != nil && st.Status.Reason == "WaitingForPreviousPod"
		})
		h.stop() // SIGKILL: the bad version's stop was in flight
		release()
		if n, s := h.rt.running(good.UID); n+s != 0 {
			t.Fatal("the good version started while the bad one was being stopped")
		}

		h2 := newHarness(t, harnessOpts{rollback: cfg, rt: h.rt})
		h2.apply(podspec.SourceFile, bad)
		h2.stepUntil("good running again", 2*time.Second, 30, func() bool { n, _ := h2.rt.running(good.UID); return n == 1 })
		h2.eventually("bad removed", func() bool { return h2.rt.objects(bad.UID) == 0 })
		if v := h2.rt.exclusivityViolations(); len(v) > 0 {
			t.Fatalf("two versions ran at once: %v", v)
		}
		runs := len(slices.DeleteFunc(h2.rt.events(), func(e string) bool { return e != "run:"+string(good.UID) }))
		if runs != 2 {
			t.Errorf("the good version's sandbox ran %d times, want 2 (before the edit, and once for the rollback)", runs)
		}

		// Removing the manifest stops the version running in its place and
		// forgets the pod's versions, on disk too.
		h2.apply(podspec.SourceFile)
		h2.eventually("the good version removed", func() bool { return h2.rt.objects(good.UID) == 0 })
		if h2.lastReady(good) != "" || len(h2.agent.Problems()) != 0 {
			t.Errorf("after the removal the last Ready version is %q and the problems %v, want none", h2.lastReady(good), h2.agent.Problems())
		}
		if names, _ := os.ReadDir(cfg.StateDir); len(names) != 0 {
			t.Errorf("state files %v left after the manifest was removed", names)
		}
	})
}

// lastReady is the UID of the last Ready version of pod's manifest and
// full name.
func (h *harness) lastReady(pod *v1.Pod) types.UID {
	return h.agent.rollback.LastReady(rollback.KeyOf(pod))
}

// neverReadyPod is a version of "web" whose init container never ends, so
// it never becomes Ready.
func neverReadyPod(t *testing.T) *v1.Pod {
	return podtest.Parse(t, "/m/web.yaml", `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  initContainers: [{name: wait, image: busybox:1.36, command: [sleep, "3600"]}]
  containers: [{name: app, image: busybox:1.36, command: [sleep, "3600"]}]
`)
}

// TestAgentEditDuringRollback: the manifest changes while the bad version
// is still being stopped and the good one waits for it: the good one is
// withdrawn and never starts, the new version runs once the bad one is
// terminated, and the rollback is over.
func TestAgentEditDuringRollback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOpts{rollback: rollback.Config{After: map[string]time.Duration{podspec.SourceFile: time.Minute},
			MinReady: 4 * time.Second}})
		good := podtest.Simple(t, "web", podtest.Loop)
		h.apply(podspec.SourceFile, good)
		h.eventually("good Ready", func() bool {
			st := h.status(good.UID)
			return st != nil && podtest.ConditionTrue(st.Status, v1.PodReady)
		})
		h.stepUntil("good is the last Ready version", 2*time.Second, 10, func() bool { return h.lastReady(good) == good.UID })
		bad := neverReadyPod(t)
		h.apply(podspec.SourceFile, bad)
		h.eventually("bad running its init container", func() bool { n, _ := h.rt.running(bad.UID); return n == 1 })
		release := h.rt.hold(bad.UID)
		h.stepUntil("the rollback decided", 2*time.Second, 60, func() bool { return len(h.agent.Problems()) == 1 })
		h.eventually("the good version waiting for the bad one", func() bool {
			st := h.status(good.UID)
			return st != nil && st.Status.Reason == "WaitingForPreviousPod"
		})

		next := podtest.Simple(t, "web", podtest.Loop+" # next")
		h.apply(podspec.SourceFile, next)
		h.eventually("the good version withdrawn", func() bool { return !h.agent.workers.Known(good.UID) })
		release()
		h.eventually("the new version running", func() bool { n, _ := h.rt.running(next.UID); return n == 1 })
		if runs := len(slices.DeleteFunc(h.rt.events(), func(e string) bool { return e != "run:"+string(good.UID) })); runs != 1 {
			t.Errorf("the withdrawn good version's sandbox ran %d times, want 1 (before the edit only)", runs)
		}
		if probs := h.agent.Problems(); len(probs) != 0 {
			t.Errorf("problems %+v after the manifest changed", probs)
		}
		if v := h.rt.exclusivityViolations(); len(v) > 0 {
			t.Fatalf("two versions ran at once: %v", v)
		}
	})
}
