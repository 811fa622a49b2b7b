//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// TestContainerdRestart stops containerd under a running berth and starts
// it again: berth stays up, /healthz turns 503 with the reason while the
// runtime is away (logged once, not every relist), /healthz is 200 again
// afterwards, and the pods are still right: each exactly one ready sandbox
// and one running container, the same ones as before; a manifest added
// during the outage runs once, one removed during it is gone.
func TestContainerdRestart(t *testing.T) {
	names := []string{"outage-a", "outage-b", "outage-host"}
	manifests := map[string]string{}
	for _, m := range names {
		p := sleeper(m)
		p.Spec.HostNetwork = strings.HasSuffix(m, "-host")
		manifests[m+".yaml"] = podManifest(p)
	}
	var full []string
	for _, m := range names {
		full = append(full, podName(m))
	}
	b := newBerth(t, berthOptions{manifests: manifests})
	b.waitReady()
	b.waitFor("all pods running", waitTimeout, func() (bool, string) { return allRunning(b, full) })
	before := managedSnapshot(t)
	t.Cleanup(func() {
		// Never leave the shared bed without its containerd.
		if err := bed.StartContainerd(); err != nil {
			t.Errorf("StartContainerd in cleanup: %v", err)
		}
	})

	logBefore := logSize(b)
	stopped := time.Now()
	if err := bed.StopContainerd(); err != nil {
		t.Fatalf("StopContainerd: %v", err)
	}
	var reason string
	took := b.waitFor("/healthz 503 while containerd is down", waitTimeout, func() (bool, string) {
		code, body := b.status("/healthz")
		reason = body
		return code == http.StatusServiceUnavailable, fmt.Sprintf("%d %s", code, body)
	})
	t.Logf("containerd stopped -> /healthz 503 after %s: %q", took.Round(time.Millisecond), reason)
	if reason == "" || reason == "ok" {
		t.Errorf("/healthz 503 without a reason: %q", reason)
	}
	// Changes during the outage: a pod added, a pod removed. berth can act
	// on neither until the runtime is back.
	b.writeManifest("outage-new.yaml", podManifest(sleeper("outage-new")))
	b.removeManifest("outage-b.yaml")
	// Several relist periods of outage.
	time.Sleep(5 * time.Second)
	if !b.running() {
		t.Fatalf("berth exited while containerd was down")
	}
	if _, err := b.pods(); err != nil {
		t.Errorf("/pods during the outage: %v", err)
	}
	if code, body := b.status("/healthz"); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz during the outage = %d %s, want 503", code, body)
	}
	outage := time.Since(stopped)
	complaints := logLinesSince(b, logBefore, "level=ERROR", "level=WARN")
	t.Logf("berth logged %d ERROR/WARN lines during a %s outage", len(complaints), outage.Round(time.Second))
	if len(complaints) >= int(outage.Seconds()) {
		t.Errorf("berth logs the outage about every second (%d ERROR/WARN lines in %s), want it logged once:\n%s",
			len(complaints), outage.Round(time.Second), strings.Join(complaints, "\n"))
	}

	started := time.Now()
	if err := bed.StartContainerd(); err != nil {
		t.Fatalf("StartContainerd: %v", err)
	}
	took = b.waitFor("/healthz 200 after containerd is back", waitTimeout, func() (bool, string) {
		code, body := b.status("/healthz")
		return code == http.StatusOK && body == "ok", fmt.Sprintf("%d %s", code, body)
	})
	t.Logf("containerd started -> /healthz 200 after %s", took.Round(time.Millisecond))
	kept := []string{podName("outage-a"), podName("outage-host")}
	b.waitFor("the pods running after the outage", waitTimeout, func() (bool, string) {
		return allRunning(b, append([]string{podName("outage-new")}, kept...))
	})
	t.Logf("containerd started -> the kept pods and the one added meanwhile Running after %s", time.Since(started).Round(time.Millisecond))
	b.waitGone(podName("outage-b"))
	t.Logf("containerd started -> the pod removed meanwhile gone after %s", time.Since(started).Round(time.Millisecond))

	// A resync after the outage must neither duplicate nor restart pods:
	// give it a few relist periods, then compare with before.
	time.Sleep(4 * time.Second)
	for _, name := range append([]string{podName("outage-new")}, kept...) {
		if _, ok, detail := runtimeState(name, "main", ""); !ok {
			t.Errorf("%s after the outage: %s", name, detail)
		}
	}
	// The kept pods were neither restarted nor duplicated.
	after := managedSnapshot(t)
	for _, name := range kept {
		if after.byPod[name] != before.byPod[name] {
			t.Errorf("%s: running container %s after the outage, %s before", name, shortID(after.byPod[name]), shortID(before.byPod[name]))
		}
	}
	if want := len(kept) + 1; len(after.running) != want || len(after.sandboxes) != want {
		t.Errorf("after the outage: %s, want exactly %d sandboxes and running containers", after, want)
	}
	for _, p := range b.mustPods().Items {
		if cs := containerStatus(&p, "main"); cs == nil || cs.RestartCount != 0 || cs.State.Running == nil {
			t.Errorf("%s after the outage: %s", p.Name, describePod(&p))
		}
	}
}

// logSize is the current size of berth's log file.
func logSize(b *berth) int64 {
	fi, err := os.Stat(b.logFile)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logLinesSince returns the lines berth logged after offset that contain
// any of subs.
func logLinesSince(b *berth, offset int64, subs ...string) []string {
	data, err := os.ReadFile(b.logFile)
	if err != nil || int64(len(data)) < offset {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(data[offset:]), "\n") {
		for _, s := range subs {
			if strings.Contains(line, s) {
				out = append(out, line)
				break
			}
		}
	}
	return out
}
