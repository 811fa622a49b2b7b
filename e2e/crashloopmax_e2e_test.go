//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestCrashLoopCeilings runs two crash-looping pods under a berth whose
// node-wide ceiling comes from a kubelet config file
// (crashLoopBackOff.maxContainerRestartPeriod: 2s, KEP-5593, which also
// lowers the first delay to 2s): one pod backs off 2s, the other, whose
// berth.io/crashloop-backoff-max says 1s, 1s; the kubelet fields berth does
// not use are logged with their lines.
func TestCrashLoopCeilings(t *testing.T) {
	kubelet := filepath.Join(t.TempDir(), "kubelet.yaml")
	err := os.WriteFile(kubelet, []byte(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
crashLoopBackOff:
  maxContainerRestartPeriod: 2s
evictionHard:
  memory.available: 100Mi
`), 0o600)
	if err != nil {
		t.Fatal(err)
	}
	crash := func(name string) *v1.Pod { return newPod(name, shContainer("main", "echo run; exit 1")) }
	own := crash("ceiling-own")
	own.Annotations = map[string]string{"berth.io/crashloop-backoff-max": "1s"}
	b := newBerth(t, berthOptions{
		args:      []string{"--kubelet-config", kubelet},
		manifests: map[string]string{"node.yaml": podManifest(crash("ceiling-node")), "own.yaml": podManifest(own)},
	})
	b.waitReady()
	for name, want := range map[string]string{"ceiling-node": "back-off 2s ", "ceiling-own": "back-off 1s "} {
		b.waitPod(podName(name), "waiting with "+want, func(p *v1.Pod) bool {
			cs := containerStatus(p, "main")
			return cs != nil && cs.RestartCount >= 2 && cs.State.Waiting != nil && strings.HasPrefix(cs.State.Waiting.Message, want)
		})
	}
	if !b.logContains("KubeletConfiguration fields berth does not use: evictionHard (line 5)") {
		t.Errorf("berth did not report the kubelet config field it ignores")
	}
}
