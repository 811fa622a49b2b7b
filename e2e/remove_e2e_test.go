//go:build e2e

package e2e

import (
	"fmt"
	"testing"
	"time"
)

// TestRemoveGone removes a running pod's manifest: its container stops,
// its sandbox is removed, and it leaves /pods. A pod next to it is not
// disturbed.
func TestRemoveGone(t *testing.T) {
	b := newBerth(t, berthOptions{manifests: map[string]string{
		"bystander.yaml": podManifest(sleeper("bystander")),
	}})
	b.waitReady()
	bystander := b.waitRuntime(podName("bystander"), "main", "")

	for _, tc := range []struct {
		name        string
		hostNetwork bool
	}{
		{name: "rm-podnet"},
		{name: "rm-hostnet", hostNetwork: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer b.use(t)()
			name := podName(tc.name)
			pod := sleeper(tc.name)
			pod.Spec.HostNetwork = tc.hostNetwork
			b.writeManifest(tc.name+".yaml", podManifest(pod))
			api := b.waitRunning(name)
			b.waitRuntime(name, "main", api.UID)

			removed := time.Now()
			b.removeManifest(tc.name + ".yaml")
			b.waitFor("no running container of "+name, waitTimeout, func() (bool, string) {
				cs, err := containersOf(name)
				if err != nil {
					return false, err.Error()
				}
				running := runningContainers(cs)
				return len(running) == 0, fmt.Sprintf("%d running: %s", len(running), describeContainers(running))
			})
			t.Logf("manifest removed -> no container running in %s", time.Since(removed).Round(time.Millisecond))
			b.waitGone(name)
			t.Logf("manifest removed -> sandbox and containers removed in %s", time.Since(removed).Round(time.Millisecond))
			b.waitFor(name+" gone from /pods", waitTimeout, func() (bool, string) {
				p, err := b.apiPod(name)
				if err != nil {
					return false, err.Error()
				}
				if p != nil {
					return false, describePod(p)
				}
				return true, ""
			})
			t.Logf("manifest removed -> gone from /pods in %s", time.Since(removed).Round(time.Millisecond))
		})
	}

	now, ok, detail := runtimeState(podName("bystander"), "main", "")
	if !ok || now.container.Id != bystander.container.Id || now.sandbox.Id != bystander.sandbox.Id {
		t.Errorf("the bystander pod was disturbed: %s (container %s, was %s)", detail, shortID(now.container.GetId()), shortID(bystander.container.Id))
	}
}
