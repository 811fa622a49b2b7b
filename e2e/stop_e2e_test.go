//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestStopLeavesPodsRunning stops berth with SIGTERM and with SIGINT: it
// exits 0, removes its API socket, and leaves its pods running as they
// were; a berth started again adopts them.
func TestStopLeavesPodsRunning(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			b := newBerth(t, berthOptions{manifests: map[string]string{"stays.yaml": podManifest(sleeper("stays"))}})
			b.waitReady()
			api := b.waitRunning(podName("stays"))
			before := b.waitRuntime(podName("stays"), "main", api.UID)

			stopped := time.Now()
			st := b.signal(sig, 30*time.Second)
			if st == nil {
				b.kill()
				t.Fatalf("berth did not exit within 30s of %s", sig)
			}
			t.Logf("%s -> berth exited (%v) after %s", sig, st, time.Since(stopped).Round(time.Millisecond))
			if !st.Exited() || st.ExitCode() != 0 {
				t.Errorf("berth's exit on %s: %v, want exit status 0", sig, st)
			}
			if _, err := os.Stat(b.socket); !os.IsNotExist(err) {
				t.Errorf("API socket %s left behind after %s: %v", b.socket, sig, err)
			}
			time.Sleep(2 * time.Second)
			now, ok, detail := runtimeState(podName("stays"), "main", api.UID)
			if !ok || now.container.Id != before.container.Id {
				t.Fatalf("after %s the pod is not left running as it was: %s", sig, detail)
			}

			b.start()
			b.waitReady()
			b.waitRunning(podName("stays"))
			time.Sleep(2 * time.Second)
			if now, ok, detail := runtimeState(podName("stays"), "main", api.UID); !ok || now.container.Id != before.container.Id {
				t.Errorf("the restarted berth did not adopt the pod as it ran: %s (container %s, was %s)", detail, shortID(now.container.GetId()), shortID(before.container.Id))
			}
		})
	}
}

// TestKubeletConfigFile runs berth from a kubelet KubeletConfiguration
// file for the static-pod fields (staticPodPath, containerRuntimeEndpoint,
// syncFrequency, fileCheckFrequency) instead of flags: its pod runs.
func TestKubeletConfigFile(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "kubelet.yaml")
	b := newBerth(t, berthOptions{
		noStart:   true,
		omit:      []string{"pod-manifest-path", "container-runtime-endpoint"},
		manifests: map[string]string{"fromcfg.yaml": podManifest(sleeper("fromcfg"))},
	})
	content := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: %s
containerRuntimeEndpoint: %s
syncFrequency: 30s
fileCheckFrequency: 5s
cgroupDriver: systemd
authentication:
  anonymous:
    enabled: false
`, b.manifests, bed.Endpoint)
	if err := os.WriteFile(cfg, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	b.args = append(b.args, "--config", cfg)
	b.start()
	b.waitReady()
	api := b.waitRunning(podName("fromcfg"))
	b.waitRuntime(podName("fromcfg"), "main", api.UID)
	// A manifest dropped later is seen too.
	b.writeManifest("later.yaml", podManifest(sleeper("later")))
	b.waitRunning(podName("later"))
}
