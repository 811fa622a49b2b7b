package syncloop

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podtest"
	v1 "k8s.io/api/core/v1"
)

// TestAgentEditWaitsForStartInFlight: the old pod's container whose start
// is still in flight inside the runtime (CREATED; removal refused with
// "starting state", stop refused) keeps the full name taken, whatever
// berth's kill and remove calls return: the new UID waits, says why, and
// the old lane retries with back-off until the container is gone. Whether
// the in-flight start then succeeds or fails, the new UID never runs
// beside it.
func TestAgentEditWaitsForStartInFlight(t *testing.T) {
	for _, startOK := range []bool{true, false} {
		t.Run(fmt.Sprintf("start succeeds %v", startOK), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				// Relists only when the test says: the old pod's first
				// teardown stops what it can, and a relist seeing that would
				// wake its lane once more, besides its timer.
				h := newHarness(t, harnessOpts{relistPeriod: time.Hour})
				old := podtest.Simple(t, "web", podtest.Loop)
				h.apply(podspec.SourceFile, old)
				h.eventually("old running", func() bool { c, _ := h.rt.running(old.UID); return c == 1 })
				id := h.rt.startInFlight(old.UID, "app", h.clock.Now())

				edited := podtest.Simple(t, "web", podtest.Loop+" # v2")
				h.apply(podspec.SourceFile, edited)
				h.eventually("new pod waiting, naming what holds the old one", func() bool {
					st := h.status(edited.UID)
					return st != nil && st.Status.Reason == "WaitingForPreviousPod" &&
						strings.Contains(st.Status.Message, string(old.UID)) &&
						strings.Contains(st.Status.Message, "in state CREATED") &&
						strings.Contains(st.Status.Message, "starting state")
				})
				// The old lane's first teardown failed and armed its retry
				// timer before its step counted.
				h.eventually("the old lane's first teardown", func() bool { return h.steps("terminate") == 1 })
				removes := func() int { return strings.Count(strings.Join(h.rt.events(), ","), "rm:"+id) }
				before := removes()
				// Each retry comes exactly when its doubled back-off ends:
				// not 1 ms before (only the lane's timer can wake it), and at
				// that moment. Counts are exact, so a retry woken by anything
				// else shows.
				for i, backoff := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second} {
					fired := h.timers.Load()
					h.step(backoff - time.Millisecond)
					if n := h.steps("terminate"); n != uint64(i+1) || h.timers.Load() != fired {
						t.Fatalf("teardown retried (%d teardowns, timer fired %v) %s into a %s back-off", n, h.timers.Load() != fired, backoff-time.Millisecond, backoff)
					}
					h.step(time.Millisecond)
					h.eventually(fmt.Sprintf("the retry when the %s back-off ends", backoff), func() bool { return h.steps("terminate") == uint64(i+2) })
					if n := removes() - before; n != i+1 {
						t.Fatalf("%d removals of the starting container after %d retries", n, i+1)
					}
				}
				if slices.Contains(h.rt.events(), "run:"+string(edited.UID)) {
					t.Fatal("the new pod's sandbox ran while the old pod's container start was in flight")
				}
				if st := h.status(edited.UID); st == nil || st.Status.Phase != v1.PodPending {
					t.Errorf("new pod status %+v, want Pending", st)
				}

				h.rt.finishStart(id, startOK, h.clock.Now())
				h.step(h.agent.cfg.RelistPeriod) // sees the start settle and wakes the old lane
				h.eventually("new running", func() bool { c, _ := h.rt.running(edited.UID); return c == 1 })
				h.eventually("old gone", func() bool { return h.rt.objects(old.UID) == 0 })
				if v := h.rt.exclusivityViolations(); len(v) > 0 {
					t.Errorf("two UIDs of one full name ran at once: %v", v)
				}
			})
		})
	}
}

// TestAgentAdoptedPodWithStartInFlightHoldsName: berth restarts after a kill
// that left the old version's container starting, and the manifest now asks
// for a new version. The old pod, found at start-up and removed as an
// orphan, holds the full name until its in-flight container is gone.
func TestAgentAdoptedPodWithStartInFlightHoldsName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newRecordingRuntime()
		old := podtest.Simple(t, "web", podtest.Loop)
		id := rt.startInFlight(old.UID, "app", ranBefore(t, rt, old))

		// Relists only when the test says, so the orphan's lane is woken by
		// its retry timer alone and its teardowns can be counted.
		h := newHarness(t, harnessOpts{rt: rt, relistPeriod: time.Hour})
		edited := podtest.Simple(t, "web", podtest.Loop+" # v2")
		h.apply(podspec.SourceFile, edited)
		h.step(h.agent.cfg.HousekeepingPeriod) // finds the orphan now that the file source delivered
		h.eventually("new pod waiting for the orphan", func() bool {
			st := h.status(edited.UID)
			return st != nil && st.Status.Reason == "WaitingForPreviousPod" && strings.Contains(st.Status.Message, "in state CREATED")
		})
		// Teardown retries and relists come and go; the orphan keeps the name.
		h.eventually("the orphan's first teardown", func() bool { return h.steps("terminate") == 1 })
		h.step(time.Second)
		h.eventually("its retry", func() bool { return h.steps("terminate") == 2 })
		if slices.Contains(rt.events(), "run:"+string(edited.UID)) {
			t.Fatal("the new pod's sandbox ran while the orphan's container start was in flight")
		}
		if !h.agent.workers.Known(old.UID) {
			t.Fatal("the orphan's lane finished while its container start was in flight")
		}
		rt.finishStart(id, true, h.clock.Now())
		h.step(h.agent.cfg.RelistPeriod)
		h.eventually("new running", func() bool { c, _ := rt.running(edited.UID); return c == 1 })
		h.eventually("old gone", func() bool { return rt.objects(old.UID) == 0 })
		if v := rt.exclusivityViolations(); len(v) > 0 {
			t.Errorf("two UIDs of one full name ran at once: %v", v)
		}
	})
}
