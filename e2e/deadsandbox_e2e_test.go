//go:build e2e

package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestDeadSandboxThatCannotBeStopped: a runtime that can stop a dead
// sandbox's processes but not tear its network down, for good, must not keep
// the pod from running again, nor berth from removing the pod once the
// runtime is repaired.
//
// The failure is containerd 1.6's own (containernetworking/cni#1055): its
// libcni fails every CNI DEL of a sandbox whose cached result is empty,
// which is what containerd leaves when it dies while writing it
// (TestCrashCycles once killed it there). The test empties the cache entry
// of a running pod's sandbox and stops the sandbox through CRI, as an
// operator's `crictl stopp` would: the runtime stops the containers and the
// sandbox (NOTREADY) and then fails on the network, and fails every stop
// after. Newer runtimes tolerate the entry; there the test checks the
// ordinary recovery.
func TestDeadSandboxThatCannotBeStopped(t *testing.T) {
	const base = "stuck-net"
	name := podName(base)
	b := newBerth(t, berthOptions{args: fastBackoff, manifests: map[string]string{base + ".yaml": podManifest(sleeper(base))}})
	b.waitReady()
	api := b.waitRunning(name)
	before := b.waitRuntime(name, "main", api.UID)

	files, err := bed.CNICacheFiles(before.sandbox.Id)
	if err != nil || len(files) == 0 {
		t.Fatalf("the CNI cache entries of sandbox %s: %v, %v", shortID(before.sandbox.Id), files, err)
	}
	for _, f := range files {
		if err := os.Truncate(f, 0); err != nil {
			t.Fatal(err)
		}
	}
	// berth sees the sandbox stop while the runtime tears its network
	// down, and stops it too: two CNI DELs of one sandbox race, and the
	// bridge plugin fails the one that finds the interface gone between
	// looking it up and deleting it. Stopping is idempotent, so the
	// runtime's verdict is the stop that no other stop overlaps: the one
	// that succeeds or fails on the cache.
	var stopErr error
	b.waitFor("the runtime's verdict on stopping sandbox "+shortID(before.sandbox.Id), waitTimeout, func() (bool, string) {
		ctx, cancel := criCtx()
		defer cancel()
		_, stopErr = bed.Runtime().StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: before.sandbox.Id})
		if stopErr == nil || strings.Contains(stopErr.Error(), "cached result") {
			return true, ""
		}
		t.Logf("StopPodSandbox overlapped another stop: %v", stopErr)
		return false, stopErr.Error()
	})
	stuck := stopErr != nil
	switch {
	case stuck:
		t.Logf("%s cannot stop the sandbox: %v", bed.ContainerdName(), stopErr)
	case !bed.ContainerdAtLeast(2, 0):
		t.Fatalf("%s stopped a sandbox whose CNI cache entry is empty: the failure this test is about did not happen", bed.ContainerdName())
	default:
		t.Logf("%s tolerates an empty CNI cache entry: the ordinary recovery is checked", bed.ContainerdName())
	}

	var after runtimePod
	b.waitFor("a new running container of "+name+" in a new sandbox", waitTimeout, func() (bool, string) {
		rp, ok, detail := runtimeState(name, "main", api.UID)
		if !ok {
			return false, detail
		}
		if rp.sandbox.Id == before.sandbox.Id {
			return false, "still the old sandbox " + shortID(rp.sandbox.Id)
		}
		after = rp
		return true, detail
	})
	b.waitPod(name, "Running and Ready in the new sandbox", func(p *v1.Pod) bool {
		cs := containerStatus(p, "main")
		return p.Status.Phase == v1.PodRunning && podReady(p) && cs != nil && shortID(cs.ContainerID) == shortID(after.container.Id)
	})
	if stuck {
		if e := b.findEvent(name, "FailedKillPod", "creating a new one anyway"); e == nil || e.Type != v1.EventTypeWarning {
			t.Errorf("no FailedKillPod warning says the old sandbox could not be cleaned up: %+v", e)
		}
		sbs, err := sandboxesOf(name)
		if err != nil {
			t.Fatal(err)
		}
		if !hasSandbox(sbs, before.sandbox.Id) {
			t.Errorf("the old sandbox %s is gone although the runtime cannot stop it: %s", shortID(before.sandbox.Id), describeSandboxes(sbs))
		}
	}

	// Removed while the runtime still refuses: the new sandbox goes, the
	// old one stays until the repair, the removal is retried with back-off,
	// and after the repair nothing of the pod is left.
	b.removeManifest(base + ".yaml")
	if stuck {
		b.waitFor("only the old sandbox of "+name+" left", waitTimeout, func() (bool, string) {
			sbs, err := sandboxesOf(name)
			if err != nil {
				return false, err.Error()
			}
			return len(sbs) == 1 && sbs[0].Id == before.sandbox.Id, describeSandboxes(sbs)
		})
		b.waitFor("berth retrying the removal with back-off", waitTimeout, func() (bool, string) {
			return b.logContains("remove pod; retrying in 2s"), "no second failed removal logged"
		})
		// What the runtime still holds of it stays visible.
		if p, err := b.apiPod(name); err != nil || p == nil {
			t.Errorf("the removed pod left /pods (%v) while the runtime still holds its sandbox", err)
		}

		// Added back, the same pod (the same UID) runs again at once
		// although the runtime still refuses; removed again, it waits
		// for the repair as before.
		b.writeManifest(base+".yaml", podManifest(sleeper(base)))
		b.waitFor(name+" running again beside the old sandbox", waitTimeout, func() (bool, string) {
			rp, ok, detail := runtimeState(name, "main", api.UID)
			return ok && rp.sandbox.Id != before.sandbox.Id, detail
		})
		b.waitRunning(name)
		b.removeManifest(base + ".yaml")
		b.waitFor("only the old sandbox of "+name+" left again", waitTimeout, func() (bool, string) {
			sbs, err := sandboxesOf(name)
			if err != nil {
				return false, err.Error()
			}
			return len(sbs) == 1 && sbs[0].Id == before.sandbox.Id, describeSandboxes(sbs)
		})
		removed, err := bed.RepairCNICache()
		if err != nil || len(removed) == 0 {
			t.Fatalf("repair the CNI cache: removed %v, %v", removed, err)
		}
		t.Logf("repaired: removed %v", removed)
	}
	took := b.waitGone(name)
	t.Logf("nothing of %s left %s later", name, took.Round(time.Millisecond))
	b.waitFor(name+" gone from /pods", waitTimeout, func() (bool, string) {
		p, err := b.apiPod(name)
		if err != nil {
			return false, err.Error()
		}
		return p == nil, "still listed"
	})
}

// hasSandbox reports whether sbs holds the sandbox id.
func hasSandbox(sbs []*runtimeapi.PodSandbox, id string) bool {
	for _, s := range sbs {
		if s.Id == id {
			return true
		}
	}
	return false
}
