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

// TestStopSignal removes a pod whose container asks for SIGUSR1 as its stop
// signal (KEP-4960) and has zero-second sleep hooks (KEP-4818): it starts
// (the postStart sleep of 0 s returns at once), and on removal its process
// gets SIGUSR1, not the runtime's SIGTERM, which it writes to a hostPath
// file before it exits. containerd 1.6 to 2.1 ignore CRI's StopSignal, so
// there this is berth's own delivery; 2.3 on send the same signal too.
func TestStopSignal(t *testing.T) {
	out := t.TempDir()
	c := shContainer("main", "trap 'echo USR1 > /out/signal; exit 0' USR1; trap 'echo TERM > /out/signal; exit 0' TERM; echo > /out/trapped; sleep 3600 & wait")
	usr1 := v1.SIGUSR1
	c.Lifecycle = &v1.Lifecycle{
		StopSignal: &usr1,
		PostStart:  &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 0}},
		PreStop:    &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 0}},
	}
	c.VolumeMounts = []v1.VolumeMount{{Name: "out", MountPath: "/out"}}
	p := newPod("stopsig", c)
	p.Spec.OS = &v1.PodOS{Name: v1.Linux}
	p.Spec.Volumes = []v1.Volume{{Name: "out", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: out}}}}
	grace := int64(20)
	p.Spec.TerminationGracePeriodSeconds = &grace

	b := newBerth(t, berthOptions{manifests: map[string]string{"stopsig.yaml": podManifest(p)}})
	b.waitReady()
	b.waitRunning(podName("stopsig"))
	// Running is the process started, not its traps set: the shell is
	// PID 1 of its namespace, so a signal it has no trap for yet is
	// ignored, and the pod would go only at its grace period's SIGKILL.
	b.waitFor("the container's traps set", 30*time.Second, func() (bool, string) {
		_, err := os.Stat(filepath.Join(out, "trapped"))
		return err == nil, fmt.Sprint(err)
	})
	b.removeManifest("stopsig.yaml")
	b.waitGone(podName("stopsig"))
	got, err := os.ReadFile(filepath.Join(out, "signal"))
	if err != nil {
		t.Fatalf("the container recorded no signal: %v", err)
	}
	if s := strings.TrimSpace(string(got)); s != "USR1" {
		t.Errorf("the container got %s, want USR1 (its stopSignal)", s)
	}
	if b.logContains("StopSignalFailed") {
		t.Errorf("berth could not deliver the stop signal")
	}
}
