package agent

import (
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
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/podevents"
	"github.com/berth-agent/berth/internal/podrules"
	"github.com/berth-agent/berth/internal/podspec"
)

// obs is one step of a trial: the clock moves by after, then pod ("a" or
// "b") reports a status, or, with pod "", the sync loop ticks.
type obs struct {
	after    time.Duration
	pod      string
	ready    bool
	phase    v1.PodPhase
	restarts int32
}

func trialStatus(o obs) v1.PodStatus {
	phase := o.phase
	if phase == "" {
		phase = v1.PodRunning
	}
	ready := v1.ConditionFalse
	if o.ready {
		ready = v1.ConditionTrue
	}
	return v1.PodStatus{Phase: phase, Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: ready}},
		ContainerStatuses: []v1.ContainerStatus{{Name: "app", RestartCount: o.restarts}}}
}

// TestRollbackDecisions judges versions from their statuses alone: what
// makes a version the last Ready one, what fails it, and what follows.
func TestRollbackDecisions(t *testing.T) {
	const window, minReady = time.Minute, 10 * time.Second
	accepted := []obs{{pod: "a", ready: true}, {after: minReady, pod: ""}}
	tests := []struct {
		name       string
		annotation string // berth.io/rollback-after of b
		source     string // of a and b; file by default
		// aSource and aOrigin, when set, make a come from another
		// manifest than b (which is of /m/web.yaml).
		aSource, aOrigin string
		steps            []obs
		lastReady        string // of b's manifest: "a", "b" or ""
		rolledBack       bool   // b rolled back to a
		reason           string // of the problem, "" for none
		why              string // in the problem's message
	}{
		{name: "ready for min-ready is the last ready version", steps: accepted, lastReady: "a"},
		{name: "ready for less than min-ready is not", steps: []obs{{pod: "a", ready: true}, {after: minReady - time.Second, pod: "a"}, {after: 2 * time.Second, pod: ""}}},
		{name: "a restart seen only by its count restarts the count", steps: []obs{{pod: "a", ready: true}, {after: 5 * time.Second, pod: "a", ready: true, restarts: 1}, {after: 9 * time.Second, pod: ""}}},
		{name: "readiness regained restarts the count", steps: []obs{{pod: "a", ready: true}, {after: 5 * time.Second, pod: "a"}, {pod: "a", ready: true}, {after: 9 * time.Second, pod: ""}}},
		{name: "crash loop rolls back", steps: append(slices.Clone(accepted), obs{pod: "b"}, obs{after: time.Second, pod: "b", restarts: crashLoopRestarts}),
			lastReady: "a", rolledBack: true, reason: ReasonRolledBack, why: `container "app" restarted 3 times`},
		{name: "fewer restarts do not", steps: append(slices.Clone(accepted), obs{pod: "b"}, obs{after: time.Second, pod: "b", restarts: crashLoopRestarts - 1}),
			lastReady: "a"},
		{name: "not ready when the window ends rolls back", steps: append(slices.Clone(accepted), obs{pod: "b"}, obs{after: window - time.Second, pod: ""}, obs{after: time.Second, pod: ""}),
			lastReady: "a", rolledBack: true, reason: ReasonRolledBack, why: "not Ready 1m0s after it started"},
		{name: "ready when the window ends is judged on", steps: append(slices.Clone(accepted), obs{pod: "b"}, obs{after: window - time.Second, pod: "b", ready: true}, obs{after: 2 * time.Second, pod: ""}),
			lastReady: "a"},
		{name: "readiness lost after the window before min-ready rolls back", steps: append(slices.Clone(accepted), obs{pod: "b"}, obs{after: window - time.Second, pod: "b", ready: true}, obs{after: 2 * time.Second, pod: "b"}),
			lastReady: "a", rolledBack: true, reason: ReasonRolledBack, why: "not Ready"},
		{name: "ready for min-ready in the window replaces the last ready version", steps: append(slices.Clone(accepted), obs{pod: "b", ready: true}, obs{after: minReady, pod: ""}, obs{after: window, pod: "b", restarts: 9}),
			lastReady: "b"},
		{name: "phase Failed rolls back at once", steps: append(slices.Clone(accepted), obs{pod: "b", phase: v1.PodFailed}),
			lastReady: "a", rolledBack: true, reason: ReasonRolledBack, why: "phase Failed"},
		{name: "phase Succeeded ends the trial", steps: append(slices.Clone(accepted), obs{pod: "b", phase: v1.PodSucceeded}, obs{after: 2 * window, pod: ""}),
			lastReady: "a"},
		{name: "annotation 0 disables", annotation: "0", steps: append(slices.Clone(accepted), obs{pod: "b", restarts: 9}, obs{after: 2 * window, pod: ""}),
			lastReady: "a"},
		{name: "annotation enables where the source default is off", annotation: "30s", source: podspec.SourceHTTP,
			steps:     append(slices.Clone(accepted), obs{pod: "b"}, obs{after: 30 * time.Second, pod: ""}),
			lastReady: "a", rolledBack: true, reason: ReasonRolledBack, why: "not Ready 30s after"},
		{name: "source default off", source: podspec.SourceHTTP, steps: append(slices.Clone(accepted), obs{pod: "b", restarts: 9}, obs{after: 2 * window, pod: ""}),
			lastReady: "a"},
		{name: "no earlier ready version: it runs on, with a problem", steps: []obs{{pod: "b", restarts: crashLoopRestarts}},
			reason: ReasonNoReadyVersion, why: "no earlier version of it was Ready"},
		{name: "a failed first version that turns ready becomes the last ready one", steps: []obs{{pod: "b", restarts: crashLoopRestarts}, {pod: "b", ready: true, restarts: crashLoopRestarts}, {after: minReady, pod: ""}},
			lastReady: "b"},
		{name: "the last ready version is never on trial", steps: append(slices.Clone(accepted), obs{pod: "a", restarts: 9}, obs{after: 2 * window, pod: ""}),
			lastReady: "a"},
		{name: "a ready version of another file is no rollback target", aOrigin: "/m/web-a.yaml",
			steps:  append(slices.Clone(accepted), obs{pod: "b"}, obs{after: window, pod: ""}),
			reason: ReasonNoReadyVersion, why: "no earlier version of it was Ready from its manifest (file /m/web.yaml)"},
		{name: "a ready version of another source is no rollback target", aSource: podspec.SourceHTTP, aOrigin: "https://fleet.example/pods.yaml",
			steps:  append(slices.Clone(accepted), obs{pod: "b", restarts: crashLoopRestarts}),
			reason: ReasonNoReadyVersion, why: "no earlier version of it was Ready"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			r := newRollbacks(RollbackConfig{After: map[string]time.Duration{podspec.SourceFile: window}, MinReady: minReady},
				testNode, clk, log, podevents.New(clk, log), prometheus.NewRegistry())
			a := simplePod(t, "web", loop)
			src := tt.source
			if src == "" {
				src = podspec.SourceFile
			}
			a.Annotations[podspec.AnnotationSource] = src
			if tt.aSource != "" {
				a.Annotations[podspec.AnnotationSource] = tt.aSource
			}
			if tt.aOrigin != "" {
				a.Annotations[podspec.AnnotationOrigin] = tt.aOrigin
			}
			b := pod(t, "/m/web.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: app, image: busybox:1.36, command: [\"false\"]}]}")
			b.Annotations[podspec.AnnotationSource] = src
			if tt.annotation != "" {
				b.Annotations[podrules.AnnotationRollbackAfter] = tt.annotation
			}
			pods := map[string]*v1.Pod{"a": a, "b": b}
			started := map[string]time.Time{}
			for _, o := range tt.steps {
				clk.Step(o.after)
				if o.pod == "" {
					r.tick(func(types.UID) bool { return true })
					continue
				}
				if _, ok := started[o.pod]; !ok {
					started[o.pod] = clk.Now()
				}
				r.observe(pods[o.pod], trialStatus(o), started[o.pod])
			}
			rec := r.records[keyOf(b)]
			var got string
			if rec != nil {
				got = map[types.UID]string{a.UID: "a", b.UID: "b"}[rec.LastReady.UID]
			}
			if got != tt.lastReady {
				t.Errorf("last Ready version %q, want %q", got, tt.lastReady)
			}
			actions := r.take()
			if rolled := rec != nil && rec.RolledBack != nil; rolled != tt.rolledBack || len(actions) != map[bool]int{true: 1}[tt.rolledBack] {
				t.Fatalf("rolled back %v with actions %v, want %v", rolled, actions, tt.rolledBack)
			}
			if tt.rolledBack {
				if actions[0].bad != b || actions[0].good != a {
					t.Errorf("action %+v, want b stopped and a run", actions[0])
				}
				if run := r.substitute(b); run != a {
					t.Errorf("b delivered again runs %s, want a (the bad version is not retried)", run.UID)
				}
			}
			probs := r.problems()
			if tt.reason == "" {
				if len(probs) > 0 {
					t.Errorf("problems %v, want none", probs)
				}
				return
			}
			if len(probs) != 1 || probs[0].Reason != tt.reason || !strings.Contains(probs[0].Message, tt.why) ||
				!strings.Contains(probs[0].Message, string(b.UID)) || probs[0].Name != b.Name || probs[0].Origin != "/m/web.yaml" {
				t.Fatalf("problems %+v, want one %s naming %s and saying %q", probs, tt.reason, b.UID, tt.why)
			}
			if tt.rolledBack && !strings.Contains(probs[0].Message, string(a.UID)) {
				t.Errorf("problem %q does not name the version run in its place, %s", probs[0].Message, a.UID)
			}
			if n := testutil.ToFloat64(r.total.WithLabelValues(tt.reason)); n != 1 {
				t.Errorf("berth_rollbacks_total{reason=%q} = %v, want 1", tt.reason, n)
			}
		})
	}
}

// TestRollbackAdmit: a delivered version other than the bad one ends the
// rollback (the manifest changed); the bad one runs the good one.
func TestRollbackAdmit(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := filepath.Join(t.TempDir(), "rollback")
	cfg := RollbackConfig{After: map[string]time.Duration{podspec.SourceFile: time.Minute}, StateDir: dir}
	r := newRollbacks(cfg, testNode, clk, log, podevents.New(clk, log), prometheus.NewRegistry())
	a, b, c := simplePod(t, "web", loop), simplePod(t, "web", "exit 1"), simplePod(t, "web", loop+" # c")
	r.observe(a, trialStatus(obs{ready: true}), clk.Now())
	r.observe(b, trialStatus(obs{phase: v1.PodFailed}), clk.Now())
	if got := r.admit(b); got != a {
		t.Fatalf("admit(bad) = %s, want the last Ready version %s", got.UID, a.UID)
	}
	// A restart reads the rollback back.
	r2 := newRollbacks(cfg, testNode, clk, log, podevents.New(clk, log), prometheus.NewRegistry())
	if got := r2.admit(b); got.UID != a.UID {
		t.Fatalf("after a restart admit(bad) = %s, want %s", got.UID, a.UID)
	}
	if got := r2.admit(c); got != c {
		t.Fatalf("admit(new version) = %s, want itself", got.UID)
	}
	if len(r2.problems()) != 0 {
		t.Errorf("problems %v after the manifest changed", r2.problems())
	}
	r3 := newRollbacks(cfg, testNode, clk, log, podevents.New(clk, log), prometheus.NewRegistry())
	if got := r3.admit(b); got != b {
		t.Errorf("after the change and a restart, admit(old bad version) = %s: the rollback must be over", got.UID)
	}
	r3.forget(keyOf(a))
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Errorf("state files %v left after the full name was forgotten", names)
	}
}

// TestAgentRollsBackToLastReadyVersion: on the fake runtime, an edit whose
// init container never ends is stopped when its window ends and the last
// Ready version runs again, never beside it; delivering the bad version
// again changes nothing, and a new version ends the rollback.
func TestAgentRollsBackToLastReadyVersion(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOpts{rollback: RollbackConfig{After: map[string]time.Duration{podspec.SourceFile: time.Minute},
			MinReady: 4 * time.Second, StateDir: filepath.Join(t.TempDir(), "rollback")}})
		good := simplePod(t, "web", loop)
		h.apply(podspec.SourceFile, good)
		h.eventually("good Ready", func() bool { st := h.status(good.UID); return st != nil && conditionTrue(st.Status, v1.PodReady) })
		h.stepUntil("good is the last Ready version", 2*time.Second, 10, func() bool { return h.lastReady(good) == good.UID })

		bad := neverReadyPod(t)
		h.apply(podspec.SourceFile, bad)
		h.eventually("bad running its init container", func() bool { n, _ := h.rt.running(bad.UID); return n == 1 })
		h.stepUntil("good running again", 2*time.Second, 60, func() bool { n, _ := h.rt.running(good.UID); return n == 1 })
		h.eventually("bad removed", func() bool { return h.rt.objects(bad.UID) == 0 })
		if v := h.rt.exclusivityViolations(); len(v) > 0 {
			t.Fatalf("two versions ran at once: %v", v)
		}
		probs := h.agent.problems()
		if len(probs) != 1 || probs[0].Reason != ReasonRolledBack || !strings.Contains(probs[0].Message, string(bad.UID)) || !strings.Contains(probs[0].Message, string(good.UID)) {
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
			if p.Status.Conditions[i].Type == ConditionLatestVersion {
				cond = &p.Status.Conditions[i]
			}
		}
		if cond == nil || cond.Status != v1.ConditionFalse || cond.Reason != ReasonRolledBack || !strings.Contains(cond.Message, string(bad.UID)) {
			t.Errorf("condition %s = %+v, want False RolledBack naming %s", ConditionLatestVersion, cond, bad.UID)
		}
		if !slices.ContainsFunc(h.agent.Events(good.UID), func(e podevents.Event) bool { return e.Reason == ReasonRolledBack }) {
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

		next := simplePod(t, "web", loop+" # fixed")
		h.apply(podspec.SourceFile, next)
		h.eventually("the new version running", func() bool { n, _ := h.rt.running(next.UID); return n == 1 })
		h.eventually("the good version stopped", func() bool { n, _ := h.rt.running(good.UID); return n == 0 })
		if probs := h.agent.problems(); len(probs) != 0 {
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
		cfg := RollbackConfig{After: map[string]time.Duration{podspec.SourceFile: time.Minute},
			MinReady: 4 * time.Second, StateDir: filepath.Join(t.TempDir(), "rollback")}
		h := newHarness(t, harnessOpts{rollback: cfg})
		good := simplePod(t, "web", loop)
		h.apply(podspec.SourceFile, good)
		h.eventually("good Ready", func() bool { st := h.status(good.UID); return st != nil && conditionTrue(st.Status, v1.PodReady) })
		h.stepUntil("good is the last Ready version", 2*time.Second, 10, func() bool { return h.lastReady(good) == good.UID })
		bad := neverReadyPod(t)
		h.apply(podspec.SourceFile, bad)
		h.eventually("bad running its init container", func() bool { n, _ := h.rt.running(bad.UID); return n == 1 })
		release := h.rt.hold(bad.UID)
		h.stepUntil("the rollback decided", 2*time.Second, 60, func() bool { return len(h.agent.problems()) == 1 })
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
		if h2.lastReady(good) != "" || len(h2.agent.problems()) != 0 {
			t.Errorf("after the removal the last Ready version is %q and the problems %v, want none", h2.lastReady(good), h2.agent.problems())
		}
		if names, _ := os.ReadDir(cfg.StateDir); len(names) != 0 {
			t.Errorf("state files %v left after the manifest was removed", names)
		}
	})
}

// lastReady is the UID of the last Ready version of pod's manifest and
// full name.
func (h *harness) lastReady(pod *v1.Pod) types.UID {
	r := h.agent.rollback
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec := r.records[keyOf(pod)]; rec != nil {
		return rec.LastReady.UID
	}
	return ""
}

// neverReadyPod is a version of "web" whose init container never ends, so
// it never becomes Ready.
func neverReadyPod(t *testing.T) *v1.Pod {
	return pod(t, "/m/web.yaml", `apiVersion: v1
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
		h := newHarness(t, harnessOpts{rollback: RollbackConfig{After: map[string]time.Duration{podspec.SourceFile: time.Minute},
			MinReady: 4 * time.Second}})
		good := simplePod(t, "web", loop)
		h.apply(podspec.SourceFile, good)
		h.eventually("good Ready", func() bool { st := h.status(good.UID); return st != nil && conditionTrue(st.Status, v1.PodReady) })
		h.stepUntil("good is the last Ready version", 2*time.Second, 10, func() bool { return h.lastReady(good) == good.UID })
		bad := neverReadyPod(t)
		h.apply(podspec.SourceFile, bad)
		h.eventually("bad running its init container", func() bool { n, _ := h.rt.running(bad.UID); return n == 1 })
		release := h.rt.hold(bad.UID)
		h.stepUntil("the rollback decided", 2*time.Second, 60, func() bool { return len(h.agent.problems()) == 1 })
		h.eventually("the good version waiting for the bad one", func() bool {
			st := h.status(good.UID)
			return st != nil && st.Status.Reason == "WaitingForPreviousPod"
		})

		next := simplePod(t, "web", loop+" # next")
		h.apply(podspec.SourceFile, next)
		h.eventually("the good version withdrawn", func() bool { return !h.agent.workers.known(good.UID) })
		release()
		h.eventually("the new version running", func() bool { n, _ := h.rt.running(next.UID); return n == 1 })
		if runs := len(slices.DeleteFunc(h.rt.events(), func(e string) bool { return e != "run:"+string(good.UID) })); runs != 1 {
			t.Errorf("the withdrawn good version's sandbox ran %d times, want 1 (before the edit only)", runs)
		}
		if probs := h.agent.problems(); len(probs) != 0 {
			t.Errorf("problems %+v after the manifest changed", probs)
		}
		if v := h.rt.exclusivityViolations(); len(v) > 0 {
			t.Fatalf("two versions ran at once: %v", v)
		}
	})
}
