//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// startLimit is the --max-parallel-pod-starts of the start-order tests:
// small, so the order shows.
const startLimit = 2

// prioritySleeper is a sleeper with a priority class ("" for none).
func prioritySleeper(name, class string) *v1.Pod {
	p := sleeper(name)
	p.Spec.PriorityClassName = class
	return p
}

// sandboxCreated waits until every named pod (full names) runs its
// container and returns when the runtime created each pod's sandbox.
func sandboxCreated(t *testing.T, names []string) map[string]time.Time {
	t.Helper()
	created := map[string]time.Time{}
	waitCond(t, fmt.Sprintf("%d pods running", len(names)), 3*waitTimeout, func() (bool, string) {
		var pending []string
		for _, n := range names {
			if _, ok := created[n]; ok {
				continue
			}
			cs, err := containersOf(n)
			if err != nil {
				return false, err.Error()
			}
			sbs, err := sandboxesOf(n)
			if err != nil {
				return false, err.Error()
			}
			if len(runningContainers(cs)) == 0 || len(sbs) == 0 {
				pending = append(pending, n)
				continue
			}
			if sbs[0].CreatedAt == 0 {
				return false, n + ": sandbox without a creation time"
			}
			first := time.Unix(0, sbs[0].CreatedAt)
			for _, sb := range sbs[1:] {
				if at := time.Unix(0, sb.CreatedAt); at.Before(first) {
					first = at
				}
			}
			created[n] = first
		}
		return len(pending) == 0, "not running yet: " + strings.Join(pending, ", ")
	})
	return created
}

// createdBefore lists the pods of names whose sandbox the runtime created
// before at, in creation order.
func createdBefore(created map[string]time.Time, names []string, at time.Time) []string {
	var out []string
	for _, n := range names {
		if created[n].Before(at) {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return created[out[i]].Before(created[out[j]]) })
	return out
}

// TestStartOrder: with a start limit of 2, critical pods start before the
// others, at boot (all manifests present when berth starts) and when 21
// manifests arrive at once while berth runs with the critical one written
// last. The order comes from the runtime's sandbox creation times, never
// from how long anything took.
func TestStartOrder(t *testing.T) {
	manifests := map[string]string{}
	var bootRegular []string
	for i := range 4 {
		n := fmt.Sprintf("so-boot-%02d", i)
		manifests[n+".yaml"] = podManifest(prioritySleeper(n, ""))
		bootRegular = append(bootRegular, podName(n))
	}
	// Named to sort last: the order seen would put them at the end.
	manifests["so-boot-zz-node.yaml"] = podManifest(prioritySleeper("so-boot-zz-node", "system-node-critical"))
	manifests["so-boot-zz-cluster.yaml"] = podManifest(prioritySleeper("so-boot-zz-cluster", "system-cluster-critical"))
	b := newBerth(t, berthOptions{args: []string{"--max-parallel-pod-starts", fmt.Sprint(startLimit)}, manifests: manifests})
	b.waitReady()
	// The start ran without the garbage collector; once every pod is
	// handed over it is back, as is the memory limit there was (none).
	// Well before the 10 s after which it would be back anyway.
	waitCond(t, "the collector back on after the start", 5*time.Second, func() (bool, string) {
		gogc, limit := metricValue(t, b, "go_gc_gogc_percent"), metricValue(t, b, "go_gc_gomemlimit_bytes")
		return gogc == 50 && limit > 1<<60, fmt.Sprintf("GOGC %v, memory limit %v", gogc, limit)
	})

	critical := []string{podName("so-boot-zz-node"), podName("so-boot-zz-cluster")}
	created := sandboxCreated(t, append(append([]string{}, bootRegular...), critical...))
	for _, c := range critical {
		if early := createdBefore(created, bootRegular, created[c]); len(early) > 0 {
			t.Errorf("boot: %s started after %v", c, early)
		}
	}
	t.Logf("boot: critical sandboxes created at %s and %s, the first other one at %s", created[critical[0]].Format(time.StampMicro),
		created[critical[1]].Format(time.StampMicro), created[createdBefore(created, bootRegular, time.Now())[0]].Format(time.StampMicro))

	// 20 regular pods and a critical one, renamed into place together,
	// the critical one last. The file source may hand over the first ones
	// a few ms before it (one debounce window), and they may take the free
	// slots: at most the limit. The critical pod then has the next slot,
	// but the other slots may free in the same instant, and a regular pod
	// granted a moment after it may reach the runtime first: at most the
	// limit less one more. (This assumes no pod starts completely within
	// the few ms the file source takes: a start takes hundreds.)
	var liveRegular, files []string
	for i := range 21 {
		n, class := fmt.Sprintf("so-live-%02d", i), ""
		if i == 20 {
			n, class = "so-live-zz-crit", "system-node-critical"
		} else {
			liveRegular = append(liveRegular, podName(n))
		}
		files = append(files, n+".yaml")
		// A dotfile, which berth ignores, until the rename below.
		if err := os.WriteFile(b.manifestPath("."+n+".tmp"), []byte(podManifest(prioritySleeper(n, class))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		if err := os.Rename(b.manifestPath("."+strings.TrimSuffix(f, ".yaml")+".tmp"), b.manifestPath(f)); err != nil {
			t.Fatal(err)
		}
	}
	crit := podName("so-live-zz-crit")
	created = sandboxCreated(t, append(append([]string{}, liveRegular...), crit))
	if early := createdBefore(created, liveRegular, created[crit]); len(early) > 2*startLimit-1 {
		t.Errorf("live: %d regular pods started before the critical one, at most %d may: %v", len(early), 2*startLimit-1, early)
	}
	all := createdBefore(created, append(liveRegular, crit), time.Now())
	t.Logf("live: creation order %v", all)
}

// TestStopsIgnoreStartLimit: with the only start slot held by a sandbox
// creation that containerd does not answer (a CRI proxy holds the
// answer), a running pod whose manifest is removed is still stopped, and
// a third pod waits, shown as ContainerCreating with the reason.
func TestStopsIgnoreStartLimit(t *testing.T) {
	proxy := startCRIProxy(t, t.TempDir())
	b := newBerth(t, berthOptions{
		args:      []string{"--container-runtime-endpoint", proxy.endpoint(), "--max-parallel-pod-starts", "1"},
		omit:      []string{"container-runtime-endpoint"},
		manifests: map[string]string{"sl-running.yaml": podManifest(sleeper("sl-running"))},
	})
	b.waitReady()
	running := b.waitRunning(podName("sl-running"))
	b.waitRuntime(running.Name, "main", running.UID)

	hold := holdSandbox(t, proxy, "sl-blocker")
	b.writeManifest("sl-blocker.yaml", podManifest(sleeper("sl-blocker")))
	hold.waitAsked(t)
	b.writeManifest("sl-waiting.yaml", podManifest(sleeper("sl-waiting")))
	waitForStartSlot(b, "sl-waiting", "waiting for a pod start slot", 1)

	b.removeManifest("sl-running.yaml")
	waitCond(t, "the removed pod stopped", waitTimeout, func() (bool, string) {
		cs, err := containersOf(running.Name)
		if err != nil {
			return false, err.Error()
		}
		return len(runningContainers(cs)) == 0, describeContainers(cs)
	})
	// The slot is still held: the waiting pod has not been given one.
	if sbs, err := sandboxesOf(podName("sl-waiting")); err != nil || len(sbs) > 0 {
		t.Fatalf("the waiting pod got a sandbox while the only slot was held: %v %s", err, describeSandboxes(sbs))
	}
	hold.release(t)
	b.waitRunning(podName("sl-waiting"))
	b.waitRunning(podName("sl-blocker"))
}

// TestDeadSandboxStartTakesTwoSlots: a pod whose sandbox died must stop it
// before it starts again, and that start takes two of the start slots.
// With three slots and one such start held in sandbox creation (a CRI
// proxy holds the answer), a second pod whose sandbox dies waits, though
// a count of pods would leave it two slots, and says why; once the first
// start ends, it starts.
func TestDeadSandboxStartTakesTwoSlots(t *testing.T) {
	proxy := startCRIProxy(t, t.TempDir())
	b := newBerth(t, berthOptions{
		args: []string{"--container-runtime-endpoint", proxy.endpoint(), "--max-parallel-pod-starts", "3"},
		omit: []string{"container-runtime-endpoint"},
		manifests: map[string]string{
			"ds-first.yaml":  podManifest(sleeper("ds-first")),
			"ds-second.yaml": podManifest(sleeper("ds-second")),
		},
	})
	b.waitReady()
	var old [2]runtimePod
	for i, base := range []string{"ds-first", "ds-second"} {
		api := b.waitRunning(podName(base))
		old[i] = b.waitRuntime(api.Name, "main", api.UID)
	}
	stopSandbox := func(rp runtimePod) {
		t.Helper()
		ctx, cancel := criCtx()
		defer cancel()
		// berth stops the dead sandbox too, and two network teardowns of
		// one sandbox can fail one of them; an operator repeats the stop.
		if err := retried(func() error {
			_, err := bed.Runtime().StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: rp.sandbox.Id})
			return err
		}); err != nil {
			t.Fatalf("stop sandbox %s: %v", shortID(rp.sandbox.Id), err)
		}
	}

	hold := holdSandbox(t, proxy, "ds-first")
	stopSandbox(old[0])
	hold.waitAsked(t)
	stopSandbox(old[1])
	waitForStartSlot(b, "ds-second", "the starts in flight take 2 slots", 3)
	sbs, err := sandboxesOf(podName("ds-second"))
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range sbs {
		if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
			t.Fatalf("the waiting pod got a new sandbox beside a two-slot start under a limit of three: %s", describeSandboxes(sbs))
		}
	}
	hold.release(t)
	for i, base := range []string{"ds-first", "ds-second"} {
		api := b.waitRunning(podName(base))
		if now := b.waitRuntime(api.Name, "main", api.UID); now.sandbox.Id == old[i].sandbox.Id {
			t.Errorf("%s runs in its old sandbox %s", base, shortID(old[i].sandbox.Id))
		}
	}
}

// heldSandbox holds the answer to one pod's next RunPodSandbox in the CRI
// proxy, so the start it belongs to keeps its start slots until the test
// lets it go.
type heldSandbox struct {
	proxy   *criProxy
	hook    *proxyHook
	asked   chan struct{} // closed once berth asked
	letGo   chan struct{}
	letOnce sync.Once
}

// holdSandbox arms the hold for the pod of base; the test's cleanup lets
// the answer go if the test did not, before berth is stopped.
func holdSandbox(t *testing.T, proxy *criProxy, base string) *heldSandbox {
	h := &heldSandbox{proxy: proxy, asked: make(chan struct{}), letGo: make(chan struct{})}
	h.hook = &proxyHook{methods: []string{"RunPodSandbox"}, phase: requestSent, pod: fullName(podName(base), "default"), fired: make(chan struct{}),
		fire: func() {
			close(h.asked)
			<-h.letGo
		}}
	proxy.arm(h.hook)
	t.Cleanup(func() { h.letOnce.Do(func() { close(h.letGo) }) })
	return h
}

// waitAsked waits until berth has asked for the held sandbox.
func (h *heldSandbox) waitAsked(t *testing.T) {
	t.Helper()
	select {
	case <-h.asked:
	case <-time.After(waitTimeout):
		t.Fatalf("berth never asked for the sandbox of %s", h.hook.pod)
	}
}

// release disarms the hold and lets the held answer go.
func (h *heldSandbox) release(t *testing.T) {
	t.Helper()
	if h.proxy.disarm(h.hook) {
		t.Fatal("the hook never fired")
	}
	h.letOnce.Do(func() { close(h.letGo) })
}

// waitForStartSlot waits until the pod of base shows its container
// ContainerCreating with a message that says why (contains), and checks
// the start queue's gauges: the limit, one start in flight, one queued.
func waitForStartSlot(b *berth, base, contains string, limit float64) {
	b.t.Helper()
	waiting := b.waitPod(podName(base), "waiting for a start slot: "+contains, func(p *v1.Pod) bool {
		cs := containerStatus(p, "main")
		return cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == "ContainerCreating" &&
			strings.Contains(cs.State.Waiting.Message, contains)
	})
	b.t.Logf("waiting pod: %s", containerStatus(waiting, "main").State.Waiting.Message)
	for series, want := range map[string]float64{"berth_pod_start_limit": limit, "berth_pod_starts_in_flight": 1, "berth_pod_starts_queued": 1} {
		if got, line := b.metric(series); got != want {
			b.t.Errorf("%s = %v, want %v (%s)", series, got, want, line)
		}
	}
}
