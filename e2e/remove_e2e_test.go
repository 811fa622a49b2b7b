//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
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
		medium      v1.StorageMedium
	}{
		{name: "rm-podnet"},
		{name: "rm-hostnet-tmpfs", hostNetwork: true, medium: v1.StorageMediumMemory},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer b.use(t)()
			name := podName(tc.name)
			pod := newPod(tc.name, shContainer("main", "echo kept > /scratch/file; "+sleepForever))
			pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "scratch", MountPath: "/scratch"}}
			pod.Spec.Volumes = []v1.Volume{{Name: "scratch", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: tc.medium}}}}
			pod.Spec.HostNetwork = tc.hostNetwork
			b.writeManifest(tc.name+".yaml", podManifest(pod))
			api := b.waitRunning(name)
			b.waitRuntime(name, "main", api.UID)
			// The emptyDir lives in the pod's directory, the kubelet's layout.
			podDir := filepath.Join(b.root, "pods", string(api.UID))
			file := filepath.Join(podDir, "volumes", "kubernetes.io~empty-dir", "scratch", "file")
			b.waitFor("the container's file in its emptyDir "+file, waitTimeout, func() (bool, string) {
				data, err := os.ReadFile(file)
				if err != nil {
					return false, err.Error()
				}
				return string(data) == "kept\n", fmt.Sprintf("%q", data)
			})
			if tc.medium == v1.StorageMediumMemory && len(mountsUnder(t, podDir)) == 0 {
				t.Errorf("a medium: Memory emptyDir is not a mount under %s", podDir)
			}

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
			b.waitFor("the pod directory "+podDir+" removed", waitTimeout, func() (bool, string) {
				_, err := os.Stat(podDir)
				return os.IsNotExist(err), fmt.Sprintf("stat: %v", err)
			})
			if mounts := mountsUnder(t, podDir); len(mounts) > 0 {
				t.Errorf("mounts left under the removed pod's directory: %v", mounts)
			}
		})
	}

	now, ok, detail := runtimeState(podName("bystander"), "main", "")
	if !ok || now.container.Id != bystander.container.Id || now.sandbox.Id != bystander.sandbox.Id {
		t.Errorf("the bystander pod was disturbed: %s (container %s, was %s)", detail, shortID(now.container.GetId()), shortID(bystander.container.Id))
	}
}

// mountsUnder lists the mount points at or below dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		if p := fields[4]; p == dir || strings.HasPrefix(p, dir+"/") {
			out = append(out, p)
		}
	}
	return out
}
