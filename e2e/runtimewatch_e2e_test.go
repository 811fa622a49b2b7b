//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Log lines of berth's runtime watch (internal/syncloop/runtimewatch.go).
const (
	logEventsUp     = "watching the container runtime through its event stream"
	logEventsNone   = "the container runtime streams no container events"
	logEventsBroken = "container event stream broke"
)

// TestRuntimeWatch checks how berth watches the bed's containerd: through
// its container events where it has them (1.7 and 2.x), by relisting where
// it does not (1.6, which answers Unimplemented), and that either way a
// container whose process dies is restarted, also when it died while
// containerd was down and the event stream with it: berth relists when the
// stream comes back rather than trusting it to replay what it missed.
func TestRuntimeWatch(t *testing.T) {
	b := newBerth(t, berthOptions{args: fastBackoff, manifests: map[string]string{"watch.yaml": podManifest(sleeper("watch"))}})
	b.waitReady()
	name := podName("watch")
	api := b.waitRunning(name)

	events := bed.ContainerdAtLeast(1, 7)
	want := logEventsNone
	if events {
		want = logEventsUp
	}
	b.waitFor(fmt.Sprintf("containerd %s: berth's log says %q", bed.ContainerdVersion, want), waitTimeout, func() (bool, string) {
		return b.logContains(want), ""
	})

	killed := b.waitRuntime(name, "main", api.UID)
	killContainerProcess(t, killed.container.Id)
	restarted := waitReplaced(b, name, killed.container.Id, 1)

	// The stream breaks with containerd; the container dies meanwhile.
	t.Cleanup(func() {
		if err := bed.StartContainerd(); err != nil {
			t.Errorf("StartContainerd in cleanup: %v", err)
		}
	})
	logFrom := logSize(b)
	pid := containerPID(t, restarted.container.Id)
	if err := bed.StopContainerd(); err != nil {
		t.Fatalf("StopContainerd: %v", err)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill container process %d: %v", pid, err)
	}
	if err := bed.StartContainerd(); err != nil {
		t.Fatalf("StartContainerd: %v", err)
	}
	waitReplaced(b, name, restarted.container.Id, 2)
	if events {
		b.waitFor("berth says the stream broke and is back", waitTimeout, func() (bool, string) {
			broke := logLinesSince(b, logFrom, logEventsBroken)
			up := logLinesSince(b, logFrom, logEventsUp)
			return len(broke) > 0 && len(up) > 0, fmt.Sprintf("%d broke, %d up", len(broke), len(up))
		})
	}
}

// waitReplaced waits until pod name runs a container other than old, with
// the restart count berth gives the container's restarts, and returns it.
func waitReplaced(b *berth, name string, old string, restarts int32) runtimePod {
	b.t.Helper()
	var rp runtimePod
	b.waitFor(fmt.Sprintf("%s: a container other than %s running", name, shortID(old)), waitTimeout, func() (bool, string) {
		cur, ok, detail := runtimeState(name, "main", "")
		if !ok {
			return false, detail
		}
		if cur.container.Id == old {
			return false, "the killed container is still listed as running"
		}
		rp = cur
		return true, detail
	})
	b.waitPod(name, fmt.Sprintf("restartCount %d and Running", restarts), func(p *v1.Pod) bool {
		cs := containerStatus(p, "main")
		return cs != nil && cs.RestartCount == restarts && cs.State.Running != nil
	})
	return rp
}

// killContainerProcess SIGKILLs a running container's process from the
// host, as the OOM killer would: containerd learns of it from its shim.
func killContainerProcess(t *testing.T, id string) {
	t.Helper()
	pid := containerPID(t, id)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill container process %d: %v", pid, err)
	}
}

// containerPID is a running container's host PID from containerd's
// verbose status.
func containerPID(t *testing.T, id string) int {
	t.Helper()
	ctx, cancel := criCtx()
	defer cancel()
	resp, err := bed.Runtime().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		t.Fatalf("container %s status: %v", shortID(id), err)
	}
	var info struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(resp.GetInfo()["info"]), &info); err != nil || info.PID <= 1 {
		t.Fatalf("container %s: no pid in the verbose status (%v)", shortID(id), err)
	}
	return info.PID
}
