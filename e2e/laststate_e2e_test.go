//go:build e2e

package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestLastGoodAcrossRestart: a running pod whose manifest is broken keeps
// running across a SIGKILL and restart of berth (same UID, same container:
// adopted, not restarted nor removed as an orphan), with the problem still
// in /problems; fixing the file then replaces the pod, and removing it
// removes the pod and its persisted last good version.
func TestLastGoodAcrossRestart(t *testing.T) {
	const good = `apiVersion: v1
kind: Pod
metadata:
  name: keep
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: busybox:1.36
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
`
	b := newBerth(t, berthOptions{manifests: map[string]string{"keep.yaml": good}})
	b.waitReady()
	name := podName("keep")
	api := b.waitRunning(name)
	before := b.waitRuntime(name, "main", api.UID)
	sum := sha256.Sum256([]byte(b.manifestPath("keep.yaml")))
	state := filepath.Join(b.root, "manifests", "file", hex.EncodeToString(sum[:])+".json")
	b.waitFor("the last good version persisted", waitTimeout, func() (bool, string) {
		_, err := os.Stat(state)
		return err == nil, fmt.Sprint(err)
	})

	// Line 11 is the fault.
	b.writeManifest("keep.yaml", good+"    imagePullPolicy: Sometimes\n")
	b.waitFor("the broken edit reported", waitTimeout, func() (bool, string) {
		n, err := b.manifestProblems()
		return n == 1, fmt.Sprintf("%d problems (%v)", n, err)
	})
	b.kill()
	b.start()
	b.waitReady()
	// Orphans are cleaned up by the relists and housekeeping passes after
	// the sources are ready: two housekeeping passes since the restart
	// would have removed the pod had berth not known it.
	b.waitFor("two housekeeping passes", waitTimeout, func() (bool, string) {
		n, err := b.housekeepingPasses()
		return n >= 2, fmt.Sprintf("%d passes (%v)", n, err)
	})
	now, ok, detail := runtimeState(name, "main", api.UID)
	if !ok || now.container.Id != before.container.Id {
		t.Fatalf("after a restart with a broken manifest the last good pod does not keep running: %s (container %s, was %s)",
			detail, shortID(now.container.GetId()), shortID(before.container.Id))
	}
	if b.logContains("orphaned pod") {
		t.Errorf("berth removed a pod as an orphan")
	}
	p, err := b.apiPod(name)
	if err != nil || p == nil || p.UID != api.UID || p.Status.Phase != v1.PodRunning {
		t.Errorf("/pods after the restart: %v %v", err, p)
	}
	code, raw, err := b.getUnix("/problems")
	body := string(raw)
	if want := b.manifestPath("keep.yaml") + ":11"; code != 200 || !strings.Contains(body, want) || !strings.Contains(body, "keeps running") {
		t.Errorf("/problems after the restart: %d %v %s; want %s and what keeps running", code, err, body, want)
	}

	// Fixing the file replaces the pod.
	b.writeManifest("keep.yaml", strings.Replace(good, "sleep 3600", "sleep 3601", 1))
	fixed := b.waitPod(name, "a new UID running", func(p *v1.Pod) bool {
		return p.UID != api.UID && p.Status.Phase == v1.PodRunning
	})
	b.waitRuntime(name, "main", fixed.UID)

	// Removing it removes the pod and its state.
	b.removeManifest("keep.yaml")
	b.waitGone(name)
	b.waitFor("the persisted state removed", waitTimeout, func() (bool, string) {
		_, err := os.Stat(state)
		return os.IsNotExist(err), fmt.Sprint(err)
	})
}

// housekeepingPasses reads berth_sync_loop_iterations_total{trigger="housekeeping"}.
func (b *berth) housekeepingPasses() (int, error) {
	code, body := b.status("/metrics")
	if code != 200 {
		return 0, fmt.Errorf("/metrics: %d %.200s", code, body)
	}
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, `berth_sync_loop_iterations_total{trigger="housekeeping"} `) {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v); err != nil {
			return 0, fmt.Errorf("%q: %w", line, err)
		}
		return int(v), nil
	}
	return 0, nil
}
