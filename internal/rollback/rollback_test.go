package rollback

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/podevents"
	"github.com/berth-agent/berth/internal/podrules"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podtest"
)

// obs is one step of a trial: the clock moves by after, then pod ("a" or
// "b") reports a status, or, with pod "", the sync podtest.Loop ticks.
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
		{name: "crash podtest.Loop rolls back", steps: append(slices.Clone(accepted), obs{pod: "b"}, obs{after: time.Second, pod: "b", restarts: crashLoopRestarts}),
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
			r := New(Config{After: map[string]time.Duration{podspec.SourceFile: window}, MinReady: minReady},
				podtest.Node, clk, log, podevents.New(clk, log), prometheus.NewRegistry())
			a := podtest.Simple(t, "web", podtest.Loop)
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
			b := podtest.Parse(t, "/m/web.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec: {containers: [{name: app, image: busybox:1.36, command: [\"false\"]}]}")
			b.Annotations[podspec.AnnotationSource] = src
			if tt.annotation != "" {
				b.Annotations[podrules.AnnotationRollbackAfter] = tt.annotation
			}
			pods := map[string]*v1.Pod{"a": a, "b": b}
			started := map[string]time.Time{}
			for _, o := range tt.steps {
				clk.Step(o.after)
				if o.pod == "" {
					r.Tick(func(types.UID) bool { return true })
					continue
				}
				if _, ok := started[o.pod]; !ok {
					started[o.pod] = clk.Now()
				}
				r.Observe(pods[o.pod], trialStatus(o), started[o.pod])
			}
			rec := r.records[KeyOf(b)]
			var got string
			if rec != nil {
				got = map[types.UID]string{a.UID: "a", b.UID: "b"}[rec.LastReady.UID]
			}
			if got != tt.lastReady {
				t.Errorf("last Ready version %q, want %q", got, tt.lastReady)
			}
			actions := r.Take()
			if rolled := rec != nil && rec.RolledBack != nil; rolled != tt.rolledBack || len(actions) != map[bool]int{true: 1}[tt.rolledBack] {
				t.Fatalf("rolled back %v with actions %v, want %v", rolled, actions, tt.rolledBack)
			}
			if tt.rolledBack {
				if actions[0].Bad != b || actions[0].Good != a {
					t.Errorf("action %+v, want b stopped and a run", actions[0])
				}
				if run := r.Substitute(b); run != a {
					t.Errorf("b delivered again runs %s, want a (the bad version is not retried)", run.UID)
				}
			}
			probs := r.Problems()
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
	cfg := Config{After: map[string]time.Duration{podspec.SourceFile: time.Minute}, StateDir: dir}
	r := New(cfg, podtest.Node, clk, log, podevents.New(clk, log), prometheus.NewRegistry())
	a, b, c := podtest.Simple(t, "web", podtest.Loop), podtest.Simple(t, "web", "exit 1"), podtest.Simple(t, "web", podtest.Loop+" # c")
	r.Observe(a, trialStatus(obs{ready: true}), clk.Now())
	r.Observe(b, trialStatus(obs{phase: v1.PodFailed}), clk.Now())
	if got := r.Admit(b); got != a {
		t.Fatalf("admit(bad) = %s, want the last Ready version %s", got.UID, a.UID)
	}
	// A restart reads the rollback back.
	r2 := New(cfg, podtest.Node, clk, log, podevents.New(clk, log), prometheus.NewRegistry())
	if got := r2.Admit(b); got.UID != a.UID {
		t.Fatalf("after a restart admit(bad) = %s, want %s", got.UID, a.UID)
	}
	if got := r2.Admit(c); got != c {
		t.Fatalf("admit(new version) = %s, want itself", got.UID)
	}
	if len(r2.Problems()) != 0 {
		t.Errorf("problems %v after the manifest changed", r2.Problems())
	}
	r3 := New(cfg, podtest.Node, clk, log, podevents.New(clk, log), prometheus.NewRegistry())
	if got := r3.Admit(b); got != b {
		t.Errorf("after the change and a restart, admit(old bad version) = %s: the rollback must be over", got.UID)
	}
	r3.Forget(KeyOf(a))
	if names, _ := os.ReadDir(dir); len(names) != 0 {
		t.Errorf("state files %v left after the full name was forgotten", names)
	}
}
