//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestForeignSandboxUntouched runs pods through CRI that berth does not
// own (no io.berth.managed=true), some dressed as berth's own pods, next to
// a running berth: over several relist, housekeeping and resync periods
// berth neither stops nor removes them, nor lists them in /pods.
func TestForeignSandboxUntouched(t *testing.T) {
	foreign := []struct {
		name   string
		labels map[string]string
	}{
		// A kubelet's pod, or crictl's.
		{name: "kubelet-pod", labels: map[string]string{labelPodName: "kubelet-pod", labelPodNamespace: "default", labelPodUID: "foreign-uid-1"}},
		// The very name of berth's pod below, without the ownership label.
		{name: podName("mine"), labels: map[string]string{labelPodName: podName("mine"), labelPodNamespace: "default", labelPodUID: "foreign-uid-2"}},
		// The ownership label, but not "true".
		{name: "not-managed", labels: map[string]string{labelPodName: "not-managed", labelPodNamespace: "default", labelPodUID: "foreign-uid-3", labelManaged: "false"}},
	}
	var pods []runtimePod
	for _, f := range foreign {
		pods = append(pods, runForeignPod(t, f.name, f.labels))
	}

	b := newBerth(t, berthOptions{
		args:      []string{"--sync-frequency", "2s"},
		manifests: map[string]string{"mine.yaml": podManifest(sleeper("mine"))},
	})
	b.waitReady()
	mine := b.waitRunning(podName("mine"))
	b.waitRuntime(podName("mine"), "main", mine.UID)

	// Relist every 1s, housekeeping every 2s, resync every 2s.
	time.Sleep(7 * time.Second)

	ctx, cancel := criCtx()
	defer cancel()
	for i, f := range foreign {
		sb, err := bed.Runtime().PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: pods[i].sandbox.Id})
		if err != nil {
			t.Errorf("foreign pod %s: sandbox %s: %v", f.name, shortID(pods[i].sandbox.Id), err)
			continue
		}
		if st := sb.GetStatus().GetState(); st != runtimeapi.PodSandboxState_SANDBOX_READY {
			t.Errorf("foreign pod %s: sandbox %s is %s, want it left READY", f.name, shortID(pods[i].sandbox.Id), st)
		}
		c, err := bed.Runtime().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: pods[i].container.Id})
		if err != nil {
			t.Errorf("foreign pod %s: container %s: %v", f.name, shortID(pods[i].container.Id), err)
			continue
		}
		if st := c.GetStatus().GetState(); st != runtimeapi.ContainerState_CONTAINER_RUNNING {
			t.Errorf("foreign pod %s: container %s is %s, want it left RUNNING", f.name, shortID(pods[i].container.Id), st)
		}
	}
	list := b.mustPods()
	if len(list.Items) != 1 || list.Items[0].UID != mine.UID {
		var got []string
		for _, p := range list.Items {
			got = append(got, fmt.Sprintf("%s(%s)", p.Name, p.UID))
		}
		t.Errorf("/pods lists %v, want only berth's own %s(%s)", got, mine.Name, mine.UID)
	}
	if _, ok, detail := runtimeState(podName("mine"), "main", mine.UID); !ok {
		t.Errorf("berth's own pod next to the foreign ones: %s", detail)
	}
}

// runForeignPod runs a sandbox with one busybox container through CRI,
// labelled with labels only, and removes it when the test ends.
func runForeignPod(t *testing.T, name string, labels map[string]string) runtimePod {
	t.Helper()
	logDir, err := os.MkdirTemp("", "berth-e2e-foreign-")
	if err != nil {
		t.Fatal(err)
	}
	pod := runCRIPod(t, name, "foreign", logDir, labels)
	t.Cleanup(func() {
		ctx, cancel := criCtx()
		defer cancel()
		rt := bed.Runtime()
		id := pod.sandbox.Id
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
			t.Errorf("clean up foreign sandbox %s: %v", name, err)
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
			t.Errorf("clean up foreign sandbox %s: %v", name, err)
		}
		os.RemoveAll(logDir)
	})
	return pod
}

// runCRIPod runs, straight through CRI and not through berth, a sandbox
// named name in namespace default with one busybox container "main",
// both labelled with labels (the container with its name label too), the
// sandbox's pod UID being labels' and its logs under logDir. A pod that
// berth did not make, or made to look like berth's.
func runCRIPod(t *testing.T, name, hostname, logDir string, labels map[string]string) runtimePod {
	t.Helper()
	ctx, cancel := criCtx()
	defer cancel()
	rt := bed.Runtime()
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: labels[labelPodUID]},
		Hostname:     hostname,
		LogDirectory: logDir,
		Labels:       labels,
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD},
		}},
	}
	// As the kubelet does: CRI-O does not create the log file's directory.
	if err := os.MkdirAll(filepath.Join(logDir, "main"), 0o755); err != nil {
		t.Fatal(err)
	}
	sb, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		t.Fatalf("RunPodSandbox %s: %v", name, err)
	}
	cLabels := map[string]string{labelContainerName: "main"}
	for k, v := range labels {
		cLabels[k] = v
	}
	c, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: sb.PodSandboxId,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "main"},
			Image:    &runtimeapi.ImageSpec{Image: bed.BusyboxImage, UserSpecifiedImage: bed.BusyboxImage},
			// The sandbox's namespaces, as the kubelet passes them: CRI-O
			// refuses a container whose PID namespace differs.
			Linux:   &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: cfg.Linux.SecurityContext.NamespaceOptions}},
			Command: []string{"sh", "-c", sleepForever},
			Labels:  cLabels,
			LogPath: "main/0.log",
		},
		SandboxConfig: cfg,
	})
	if err != nil {
		t.Fatalf("CreateContainer in %s: %v", name, err)
	}
	if _, err := rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		t.Fatalf("StartContainer in %s: %v", name, err)
	}
	return runtimePod{
		sandbox:   &runtimeapi.PodSandbox{Id: sb.PodSandboxId, Labels: labels},
		container: &runtimeapi.Container{Id: c.ContainerId, Labels: cLabels},
	}
}
