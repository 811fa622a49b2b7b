package syncloop

import (
	"errors"
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
	"github.com/berth-agent/berth/internal/podworkers"
	"github.com/berth-agent/berth/internal/rollback"
)

// editedTo is web's manifest with the image of its container.
func editedTo(t *testing.T, image string) *v1.Pod {
	return podtest.Parse(t, "/m/web.yaml", `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  restartPolicy: Always
  containers:
  - name: app
    image: `+image+`
    command: ["sh", "-c", "`+podtest.Loop+`"]
`)
}

// TestAgentPullBeforeStop: an edit to an image the runtime lacks, whose
// pull keeps failing, leaves the old version running (no restart, no
// rollback however long it fails: the new version never started) and
// shows the problem on the new one; then the pull works and the new
// version replaces the old one, or the edit is reverted and the old one
// simply runs on.
func TestAgentPullBeforeStop(t *testing.T) {
	for _, revert := range []bool{false, true} {
		name := "pull works at last"
		if revert {
			name = "edit reverted"
		}
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := newHarness(t, harnessOpts{rollback: rollback.Config{After: map[string]time.Duration{podspec.SourceFile: time.Minute},
					MinReady: 4 * time.Second, StateDir: filepath.Join(t.TempDir(), "rollback")}})
				old := podtest.Simple(t, "web", podtest.Loop)
				h.apply(podspec.SourceFile, old)
				h.stepUntil("old is the last Ready version", 2*time.Second, 10, func() bool { return h.lastReady(old) == old.UID })
				runs := func(uid types.UID) int {
					return len(slices.DeleteFunc(h.rt.events(), func(e string) bool { return e != "run:"+string(uid) }))
				}

				// Every pull fails for the next few minutes (10+20+40+80 s of back-off).
				for range 5 {
					h.img.InjectError("PullImage", errors.New("registry.test/app:2: not found"))
				}
				edited := editedTo(t, "registry.test/app:2")
				h.apply(podspec.SourceFile, edited)
				h.eventually("the new version shows its failed pull", func() bool {
					st := h.status(edited.UID)
					return st != nil && st.Status.Reason == podworkers.ReasonPullBeforeStopFailed
				})
				h.stepUntil("past the rollback window, pulls failing", 10*time.Second, 15, func() bool { return h.clock.Since(h.start) > 2*time.Minute })
				if n, _ := h.rt.running(old.UID); n != 1 || runs(old.UID) != 1 {
					t.Fatalf("old version: %d running containers, %d sandbox runs; want 1 and 1: it must run on untouched", n, runs(old.UID))
				}
				if runs(edited.UID) != 0 {
					t.Fatal("the new version started without its image")
				}
				if probs := h.agent.Problems(); len(probs) != 0 {
					t.Errorf("problems %+v: a failed pull before the stop is no failure of a running version, nothing to roll back", probs)
				}
				p := h.agent.Pod("default", edited.Name)
				fails := slices.DeleteFunc(h.agent.Events(edited.UID), func(e podevents.Event) bool { return e.Reason != podworkers.ReasonPullBeforeStopFailed })
				if len(fails) == 0 || !strings.Contains(fails[0].Message, string(old.UID)) {
					t.Errorf("events %+v, want PullBeforeStopFailed naming the old version", h.agent.Events(edited.UID))
				}
				// The name shows the version that runs, with the new one's
				// problem as a condition.
				if p == nil || p.UID != old.UID {
					t.Fatalf("web shows %v, want the old version that runs", p)
				}
				if c := podCondition(p, podworkers.ConditionPulledBeforeStop); c == nil || c.Status != v1.ConditionFalse ||
					!strings.Contains(c.Message, string(edited.UID)) || !strings.Contains(c.Message, "not found") {
					t.Errorf("condition %s of the old version = %+v, want False naming the new version and the pull's error", podworkers.ConditionPulledBeforeStop, c)
				}

				if revert {
					h.apply(podspec.SourceFile, old)
					h.eventually("the pending version gone", func() bool { return h.status(edited.UID) == nil })
					h.step(time.Minute)
					if n, _ := h.rt.running(old.UID); n != 1 || runs(old.UID) != 1 {
						t.Fatalf("old version after the revert: %d running containers, %d sandbox runs; want 1 and 1", n, runs(old.UID))
					}
					return
				}
				h.img.Lock()
				h.img.Errors = nil
				h.img.Unlock()
				h.stepUntil("the new version running", 10*time.Second, 20, func() bool { n, _ := h.rt.running(edited.UID); return n == 1 })
				h.eventually("old gone", func() bool { return h.rt.objects(old.UID) == 0 })
				if v := h.rt.exclusivityViolations(); len(v) > 0 {
					t.Errorf("two versions ran at once: %v", v)
				}
				reasons := []string{}
				for _, e := range h.agent.Events(edited.UID) {
					reasons = append(reasons, e.Reason)
				}
				if !slices.Contains(reasons, podworkers.ReasonPulledBeforeStop) {
					t.Errorf("events of the new version %v, want %s", reasons, podworkers.ReasonPulledBeforeStop)
				}
			})
		})
	}
}
