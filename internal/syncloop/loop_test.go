package syncloop

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podtest"
)

func TestAgentRunsAndRemovesPod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOpts{})
		p := podtest.Simple(t, "web", podtest.Loop)
		h.apply(podspec.SourceFile, p)
		h.eventually("pod running", func() bool { c, s := h.rt.running(p.UID); return c == 1 && s == 1 })
		h.eventually("status Running and Ready", func() bool {
			st := h.status(p.UID)
			return st != nil && st.Status.Phase == v1.PodRunning && podtest.ConditionTrue(st.Status, v1.PodReady)
		})
		if err := h.agent.Ready(); err != nil {
			t.Errorf("Ready() = %v after the pod was dispatched", err)
		}

		h.apply(podspec.SourceFile)
		h.eventually("pod removed from the runtime", func() bool { return h.rt.objects(p.UID) == 0 })
		h.eventually("status dropped", func() bool { return h.status(p.UID) == nil })
		h.eventually("lane closed", func() bool { all, _ := h.agent.workers.Count(); return all == 0 })
	})
}

// TestAgentDeleteStopsFirst: a pod removed from its source is stopped from
// its lane's observation: the first runtime call after the removal is its
// StopContainer, with no read of the pod before it, as the kubelet kills
// from its pod cache. The pod is still removed completely.
func TestAgentDeleteStopsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOpts{})
		p := podtest.Simple(t, "web", podtest.Loop)
		h.apply(podspec.SourceFile, p)
		h.eventually("pod running", func() bool { c, s := h.rt.running(p.UID); return c == 1 && s == 1 })
		h.rt.resetCalls()
		h.apply(podspec.SourceFile)
		h.eventually("pod removed from the runtime", func() bool { return h.rt.objects(p.UID) == 0 })
		if calls := h.rt.GetCalls(); len(calls) == 0 || calls[0] != "StopContainer" {
			t.Errorf("runtime calls after the removal %v, want StopContainer first", calls)
		}
	})
}

// TestAgentOnReady: OnReady is called once berth is ready (berth's start
// ends there: its collector comes back on), not before every source has
// delivered, and not again while berth stays ready.
func TestAgentOnReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var calls atomic.Int32
		h := newHarness(t, harnessOpts{onReady: func() { calls.Add(1) }})
		h.step(h.agent.cfg.HousekeepingPeriod)
		if n := calls.Load(); n != 0 || h.agent.Ready() == nil {
			t.Fatalf("before the source delivered: OnReady called %d times, Ready() = %v", n, h.agent.Ready())
		}
		p := podtest.Simple(t, "web", podtest.Loop)
		h.apply(podspec.SourceFile, p)
		h.eventually("ready", func() bool { return h.agent.Ready() == nil })
		h.eventually("OnReady called", func() bool { return calls.Load() > 0 })
		h.apply(podspec.SourceFile, p, podtest.Simple(t, "db", podtest.Loop))
		h.eventually("the second pod dispatched", func() bool { all, _ := h.agent.workers.Count(); return all == 2 })
		h.step(h.agent.cfg.HousekeepingPeriod)
		if n := calls.Load(); n != 1 {
			t.Fatalf("OnReady called %d times, want once", n)
		}
	})
}

func TestAgentEditStopsOldPodBeforeStartingNew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOpts{})
		old := podtest.Simple(t, "web", podtest.Loop)
		h.apply(podspec.SourceFile, old)
		h.eventually("old running", func() bool { c, _ := h.rt.running(old.UID); return c == 1 })

		release := h.rt.hold(old.UID)
		edited := podtest.Simple(t, "web", podtest.Loop+" # v2")
		if edited.UID == old.UID || edited.Name != old.Name {
			t.Fatalf("an edit must keep the name and change the UID: %s/%s vs %s/%s", old.Name, old.UID, edited.Name, edited.UID)
		}
		h.apply(podspec.SourceFile, edited)
		h.eventually("new pod waiting for the name", func() bool {
			st := h.status(edited.UID)
			return st != nil && st.Status.Reason == "WaitingForPreviousPod"
		})
		if st := h.status(old.UID); st == nil || st.DeletionTimestamp == nil || st.DeletionGracePeriodSeconds == nil || *st.DeletionGracePeriodSeconds != 30 {
			t.Errorf("the old pod being stopped must carry a deletion timestamp and its grace period (Terminating): %+v", st)
		}
		// A relist, a housekeeping and a resync pass later the old lane is
		// still inside StopContainer, so nothing has released the name.
		h.step(time.Minute)
		if slices.Contains(h.rt.events(), "run:"+string(edited.UID)) {
			t.Fatal("new pod's sandbox started while the old pod's containers were still being stopped")
		}
		release()
		h.eventually("new running", func() bool { c, _ := h.rt.running(edited.UID); return c == 1 })
		ev := h.rt.events()
		stopOld := slices.Index(ev, "stop:"+string(old.UID))
		runNew := slices.Index(ev, "run:"+string(edited.UID))
		if stopOld < 0 || runNew < stopOld {
			t.Errorf("runtime events %v: the old sandbox must stop before the new one runs", ev)
		}
	})
}

func TestAgentWaitingPodRemovedNeverStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOpts{})
		a := podtest.Simple(t, "web", podtest.Loop)
		b := podtest.Simple(t, "web", podtest.Loop+" # b")
		c := podtest.Simple(t, "web", podtest.Loop+" # c")
		h.apply(podspec.SourceFile, a)
		h.eventually("a running", func() bool { n, _ := h.rt.running(a.UID); return n == 1 })
		release := h.rt.hold(a.UID)
		h.apply(podspec.SourceFile, b)
		h.eventually("b waiting", func() bool { st := h.status(b.UID); return st != nil && st.Status.Reason == "WaitingForPreviousPod" })
		h.apply(podspec.SourceFile, c)
		h.eventually("b withdrawn", func() bool { return !h.agent.workers.Known(b.UID) })
		release()
		h.eventually("c running", func() bool { n, _ := h.rt.running(c.UID); return n == 1 })
		if slices.Contains(h.rt.events(), "run:"+string(b.UID)) {
			t.Errorf("pod b was removed while waiting, yet it started: %v", h.rt.events())
		}
	})
}

func TestAgentTwoSourcesSameFullNameNeverRunBoth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOpts{sources: []string{podspec.SourceFile, podspec.SourceHTTP}})
		fromFile := podtest.Simple(t, "web", podtest.Loop)
		fromHTTP := podtest.Parse(t, "http://example/pods", `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers: [{name: app, image: "busybox:1.36", command: [sh, -c, "sleep 1000"]}]
`)
		h.apply(podspec.SourceFile, fromFile)
		h.apply(podspec.SourceHTTP, fromHTTP)
		h.eventually("one of them running", func() bool {
			a, _ := h.rt.running(fromFile.UID)
			b, _ := h.rt.running(fromHTTP.UID)
			return a+b == 1
		})
		// Relists, housekeeping and a resync wake every lane; the one that
		// waits for the name keeps waiting.
		h.step(time.Minute)
		a, _ := h.rt.running(fromFile.UID)
		b, _ := h.rt.running(fromHTTP.UID)
		if a+b != 1 {
			t.Fatalf("%d pods of one full name run, want 1", a+b)
		}
		if v := h.rt.exclusivityViolations(); len(v) > 0 {
			t.Errorf("two UIDs of one full name ran at once: %v", v)
		}
	})
}

func TestAgentOrphansOnlyAfterSourcesReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newRecordingRuntime()
		gone := podtest.Simple(t, "gone", podtest.Loop)
		ranBefore(t, rt, gone)

		h := newHarness(t, harnessOpts{rt: rt, sources: []string{podspec.SourceFile, podspec.SourceHTTP}})
		h.apply(podspec.SourceFile)
		// The first relist saw the unknown pod; a housekeeping pass looks at it
		// again. Orphan cleanup starts a lane inside the pass, so once the pass
		// is done a lane would exist.
		h.step(h.agent.cfg.HousekeepingPeriod)
		if h.agent.workers.Known(gone.UID) {
			t.Fatal("a pod unknown to the sources was taken for an orphan before every source had delivered")
		}
		if n, _ := rt.running(gone.UID); n != 1 {
			t.Fatal("a pod unknown to the sources was stopped before every source had delivered")
		}
		h.apply(podspec.SourceHTTP)
		h.step(h.agent.cfg.HousekeepingPeriod)
		h.eventually("orphan removed once every source is ready", func() bool { return rt.objects(gone.UID) == 0 })
	})
}

func TestAgentLeavesForeignSandboxesAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOpts{})
		foreign, err := h.rt.FakeRuntimeService.RunPodSandbox(t.Context(), foreignSandboxConfig(), "")
		if err != nil {
			t.Fatal(err)
		}
		h.apply(podspec.SourceFile)
		// Every source has delivered, and a relist and a housekeeping pass,
		// which would start a lane for an orphan within the pass, have run.
		h.step(h.agent.cfg.HousekeepingPeriod)
		if all, _ := h.agent.workers.Count(); all != 0 {
			t.Errorf("%d lanes for no berth pod: the foreign sandbox was taken for an orphan", all)
		}
		h.rt.FakeRuntimeService.Lock()
		s := h.rt.Sandboxes[foreign]
		h.rt.FakeRuntimeService.Unlock()
		if s == nil || s.State != readySandbox {
			t.Errorf("foreign sandbox was touched: %+v", s)
		}
	})
}

func TestAgentAdoptsRunningPodsWithoutRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newRecordingRuntime()
		p := podtest.Simple(t, "web", podtest.Loop)
		ranBefore(t, rt, p)
		rt.resetCalls()

		h := newHarness(t, harnessOpts{rt: rt})
		h.apply(podspec.SourceFile, p)
		h.eventually("ready", func() bool { return h.agent.Ready() == nil })
		h.eventually("status Running", func() bool { return h.phase(p.UID) == v1.PodRunning })
		// The periodic resync syncs the adopted pod once more.
		synced := h.steps("sync")
		h.step(h.agent.cfg.SyncFrequency)
		h.eventually("the resync's sync", func() bool { return h.steps("sync") > synced })
		if got := rt.calls("RunPodSandbox", "CreateContainer", "StartContainer", "StopContainer", "StopPodSandbox"); len(got) > 0 {
			t.Errorf("adopting a running pod changed the runtime: %v", got)
		}
	})
}

// TestAgentStartsFromTheFirstRelist: after a restart, a pod's lane begins
// from what the first relist read of it, with no list of its own: an
// adopted pod costs no CRI call at all, and a pod left dead by a power cut
// is brought back with only the read that follows its start. At the boot
// of a node with 50 pods that is 100 lists fewer, made while the runtime
// is busiest.
func TestAgentStartsFromTheFirstRelist(t *testing.T) {
	for _, tc := range []struct {
		name string
		// powerCut leaves the pod as a power cut does: its container
		// exited, its sandbox NOTREADY.
		powerCut bool
		// ownLists are the lists of the lane's own beyond the relists'.
		ownLists int
	}{
		{name: "running pod adopted", ownLists: 0},
		{name: "dead pod brought back", powerCut: true, ownLists: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := newRecordingRuntime()
				p := podtest.Simple(t, "web", podtest.Loop)
				stopped := ranBefore(t, rt, p)
				if tc.powerCut {
					rt.exit(p.UID, 137, stopped)
					rt.FakeRuntimeService.Lock()
					for _, sb := range rt.Sandboxes {
						sb.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
					}
					rt.FakeRuntimeService.Unlock()
				}
				rt.resetCalls()

				h := newHarness(t, harnessOpts{rt: rt})
				h.apply(podspec.SourceFile, p)
				h.eventually("ready", func() bool { return h.agent.Ready() == nil })
				h.eventually("status Running", func() bool {
					n, _ := rt.running(p.UID)
					return n == 1 && h.phase(p.UID) == v1.PodRunning
				})
				h.eventually("the sync done", func() bool { return h.steps("sync") > 0 })
				lists := rt.calls("ListPodSandbox", "ListContainers")
				relists := h.passes("relist")
				for _, call := range []string{"ListPodSandbox", "ListContainers"} {
					if got, want := lists[call], relists+tc.ownLists; got != want {
						t.Errorf("%s called %d times over %d relists; want %d", call, got, relists, want)
					}
				}
				starts := rt.calls("RunPodSandbox", "StartContainer")
				if tc.powerCut && (starts["RunPodSandbox"] != 1 || starts["StartContainer"] != 1) {
					t.Errorf("dead pod brought back with %v; want one new sandbox and container", starts)
				}
				if !tc.powerCut && len(starts) > 0 {
					t.Errorf("adopting a running pod changed the runtime: %v", starts)
				}
			})
		})
	}
}

// TestAgentResyncReadsNothingForUnchangedPod: once a pod runs, the periodic
// resync syncs it from the lane's last observation (its own read, or a
// relist since): the only runtime reads over a resync are the relists
// themselves. An adopted pod is the case that matters: reading each pod
// again every resync was most of an idle node's CRI calls (issue 16).
func TestAgentResyncReadsNothingForUnchangedPod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newRecordingRuntime()
		p := podtest.Simple(t, "web", podtest.Loop)
		ranBefore(t, rt, p)

		h := newHarness(t, harnessOpts{rt: rt})
		h.apply(podspec.SourceFile, p)
		h.eventually("status Running", func() bool { return h.phase(p.UID) == v1.PodRunning })
		for range 3 {
			reads := func() int { return rt.calls("ListPodSandbox")["ListPodSandbox"] }
			lists, relists, synced := reads(), h.passes("relist"), h.steps("sync")
			h.step(h.agent.cfg.SyncFrequency)
			h.eventually("the resync's sync", func() bool { return h.steps("sync") > synced })
			if got, want := reads()-lists, h.passes("relist")-relists; got != want {
				t.Fatalf("a resync of an unchanged pod listed sandboxes %d times over %d relists; want only the relists'", got, want)
			}
		}

		// A container that dies is seen by the next relist, which hands the
		// lane a newer observation: it is restarted from that.
		starts := rt.calls("StartContainer")["StartContainer"]
		rt.exit(p.UID, 1, h.clock.Now())
		h.step(h.agent.cfg.RelistPeriod)
		h.eventually("the container restarted", func() bool { return rt.calls("StartContainer")["StartContainer"] > starts })
	})
}

// TestAgentRestartsExitedContainerWithBackoff: the first exit restarts at
// once; each later one waits for the crash-loop back-off, measured from
// the exit, and not a millisecond less: a sync 1 ms early still refuses,
// and the lane's own timer restarts the container right at the back-off.
func TestAgentRestartsExitedContainerWithBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOpts{})
		p := podtest.Simple(t, "crash", "exit 1")
		h.apply(podspec.SourceFile, p)
		h.eventually("running", func() bool { n, _ := h.rt.running(p.UID); return n == 1 })
		container := func() v1.ContainerStatus {
			if st := h.status(p.UID); st != nil && len(st.Status.ContainerStatuses) == 1 {
				return st.Status.ContainerStatuses[0]
			}
			return v1.ContainerStatus{}
		}
		restarted := func(n int32) func() bool {
			return func() bool { c := container(); return c.RestartCount == n && c.State.Running != nil }
		}
		// exitSeen kills the container and steps to the relist that sees it,
		// waiting for the sync that follows (and arms the lane's timer).
		exitSeen := func() {
			t.Helper()
			synced := h.steps("sync")
			h.rt.exit(p.UID, 1, h.clock.Now())
			h.step(h.agent.cfg.RelistPeriod)
			h.eventually("the sync after the exit", func() bool { return h.steps("sync") > synced })
		}

		exitSeen()
		h.eventually("restarted at once after the first exit", restarted(1))

		for i, backoff := range []time.Duration{10 * time.Second, 20 * time.Second} {
			want := int32(i + 1)
			exitSeen()
			// The sync counted by exitSeen may be one that began before the
			// exit (finishing the previous restart); the one that sees the
			// exit shows the back-off. Its timer is armed for the back-off's
			// absolute end, whenever it is armed.
			h.eventually(fmt.Sprintf("exit %d shown as CrashLoopBackOff", want+1), func() bool {
				w := container().State.Waiting
				return w != nil && w.Reason == "CrashLoopBackOff"
			})
			w := container().State.Waiting
			if w == nil || w.Reason != "CrashLoopBackOff" || !strings.Contains(w.Message, "back-off "+backoff.String()) {
				t.Fatalf("exit %d: waiting %+v, want CrashLoopBackOff of %s", want+1, w, backoff)
			}
			// The lane's timer is armed for the back-off's end: not fired 1 ms
			// before it, and a sync forced then refuses the restart too.
			fired := h.timers.Load()
			h.step(backoff - h.agent.cfg.RelistPeriod - time.Millisecond)
			if h.timers.Load() != fired {
				t.Fatalf("the lane's timer fired %s into a %s back-off", backoff-time.Millisecond, backoff)
			}
			synced := h.steps("sync")
			h.agent.workers.Wake(p.UID)
			h.eventually("a sync 1 ms before the back-off ends", func() bool { return h.steps("sync") > synced })
			if c := container(); c.RestartCount != want || c.State.Running != nil {
				t.Fatalf("restarted %v after %s of a %s back-off", c.State.Running != nil, backoff-time.Millisecond, backoff)
			}
			h.step(time.Millisecond)
			h.eventually(fmt.Sprintf("restarted when the %s back-off ends", backoff), restarted(want+1))
		}
		if got := h.rt.calls("CreateContainer")["CreateContainer"]; got != 4 {
			t.Errorf("%d CreateContainer calls, want 4 (start and three restarts)", got)
		}
	})
}

func TestAgentCompletedPodIsTerminatedNotRestarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOpts{})
		p := podtest.Parse(t, "/m/job.yaml", `apiVersion: v1
kind: Pod
metadata: {name: job}
spec:
  restartPolicy: Never
  containers: [{name: app, image: "busybox:1.36", command: [sh, -c, "true"]}]
`)
		h.apply(podspec.SourceFile, p)
		h.eventually("running", func() bool { n, _ := h.rt.running(p.UID); return n == 1 })
		h.rt.exit(p.UID, 0, h.clock.Now())
		h.step(h.agent.cfg.RelistPeriod)
		h.eventually("Succeeded and its sandbox stopped", func() bool {
			_, sandboxes := h.rt.running(p.UID)
			return h.phase(p.UID) == v1.PodSucceeded && sandboxes == 0
		})
		// The resync wakes the terminated lane, whose step returns at once.
		h.step(h.agent.cfg.SyncFrequency)
		if got := h.rt.calls("CreateContainer")["CreateContainer"]; got != 1 {
			t.Errorf("a completed pod under restartPolicy Never was restarted: %d CreateContainer calls", got)
		}
		if h.rt.objects(p.UID) == 0 {
			t.Error("a completed pod still listed in its source lost its containers (its logs)")
		}
	})
}

func TestAgentMaxPods(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOpts{maxPods: 1})
		a := podtest.Simple(t, "a", podtest.Loop)
		b := podtest.Simple(t, "b", podtest.Loop)
		h.apply(podspec.SourceFile, a, b)
		h.eventually("a running", func() bool { n, _ := h.rt.running(a.UID); return n == 1 })
		h.eventually("b rejected", func() bool { st := h.status(b.UID); return st != nil && st.Status.Reason == "OutOfpods" })
		if st := h.status(b.UID); st.Status.Phase != v1.PodFailed {
			t.Errorf("rejected pod phase = %s, want Failed", st.Status.Phase)
		}
		if h.rt.objects(b.UID) != 0 {
			t.Error("a pod beyond max-pods got runtime objects")
		}
		h.apply(podspec.SourceFile, a)
		h.eventually("rejected pod's status dropped with its manifest", func() bool { return h.status(b.UID) == nil })
	})
}

func TestAgentRuntimeOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOpts{})
		p := podtest.Simple(t, "web", podtest.Loop)
		h.apply(podspec.SourceFile, p)
		h.eventually("running and healthy", func() bool { n, _ := h.rt.running(p.UID); return n == 1 && h.agent.Healthy() == nil })
		down := errors.New("connection refused")
		for range 5 {
			h.rt.InjectError("ListPodSandbox", down)
		}
		h.step(h.agent.cfg.RelistPeriod)
		if err := h.agent.Healthy(); err == nil {
			t.Fatal("healthy after a relist the runtime failed")
		}
		h.stepUntil("healthy once it answers again", h.agent.cfg.RelistPeriod, 10, func() bool { return h.agent.Healthy() == nil })
		if n, s := h.rt.running(p.UID); n != 1 || s != 1 {
			t.Errorf("after the outage: %d running containers, %d ready sandboxes; want 1 and 1", n, s)
		}
	})
}

// TestAgentNewPodCallsOnlyWhatItNeeds: a pod the runtime had nothing of
// is started with the calls a start needs and no listing of the runtime
// before them: the relist the sync loop already has says it is new.
func TestAgentNewPodCallsOnlyWhatItNeeds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOpts{})
		before := len(h.rt.GetCalls())
		p := podtest.Simple(t, "web", podtest.Loop)
		h.apply(podspec.SourceFile, p)
		h.eventually("pod running", func() bool { c, s := h.rt.running(p.UID); return c == 1 && s == 1 })
		var got []string
		for _, c := range h.rt.GetCalls()[before:] {
			switch c {
			case "GetContainerEvents", "Version", "Status":
				continue
			}
			got = append(got, c)
			if c == "StartContainer" {
				break
			}
		}
		want := []string{"RunPodSandbox", "PodSandboxStatus", "CreateContainer", "StartContainer"}
		if !slices.Equal(got, want) {
			t.Errorf("CRI calls up to the start = %v, want %v", got, want)
		}
	})
}
