//go:build e2e

package e2e

import (
	"testing"
	"time"
)

// TestDeleteStopsBeforeReading: a pod whose manifest is removed is stopped
// from what berth last observed of it: between the removal and the pod's
// StopContainer, berth reads nothing of that pod from the runtime, as the
// kubelet kills from its pod cache. The pod is then removed as ever.
func TestDeleteStopsBeforeReading(t *testing.T) {
	proxy := startCRIProxy(t, t.TempDir())
	b := newBerth(t, berthOptions{
		args:      []string{"--container-runtime-endpoint", proxy.endpoint()},
		omit:      []string{"container-runtime-endpoint"},
		manifests: map[string]string{"dsr.yaml": podManifest(sleeper("dsr"))},
	})
	b.waitReady()
	api := b.waitRunning(podName("dsr"))
	b.waitRuntime(api.Name, "main", api.UID)

	uid := string(api.UID)
	var atStop int // the pod's reads when its StopContainer came, set by fire
	hook := &proxyHook{methods: []string{"StopContainer"}, phase: requestSent, pod: fullName(api.Name, "default"), fired: make(chan struct{}),
		fire: func() { atStop = proxy.readsOf(uid) }}
	proxy.arm(hook)
	before := proxy.readsOf(uid)
	b.removeManifest("dsr.yaml")
	select {
	case <-hook.fired:
	case <-time.After(waitTimeout):
		t.Fatalf("berth never stopped the removed pod's container; calls: %s", proxy.callCounts())
	}
	if atStop != before {
		t.Errorf("berth read the removed pod %d times before stopping it, want none", atStop-before)
	}
	waitCond(t, "the removed pod gone from the runtime", waitTimeout, func() (bool, string) {
		sbs, err := sandboxesOf(api.Name)
		if err != nil {
			return false, err.Error()
		}
		return len(sbs) == 0, describeSandboxes(sbs)
	})
}
