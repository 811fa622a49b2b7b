//go:build e2e

package systemdbed

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// shutdownPod is a pod of that priority whose container, on SIGTERM,
// appends its name to /var/lib/shutdown-order/log on the host, then exits.
func shutdownPod(name, priority string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  %s
  terminationGracePeriodSeconds: 30
  containers:
  - name: main
    image: docker.io/library/busybox:1.36
    command: [sh, -c, "trap 'echo %s >> /order/log; exit 0' TERM; sleep 100000 & wait"]
    volumeMounts: [{name: order, mountPath: /order}]
  volumes:
  - {name: order, hostPath: {path: /var/lib/shutdown-order, type: DirectoryOrCreate}}
`, name, priority, name)
}

// TestGracefulShutdown: with shutdownGracePeriod set, berth holds a
// systemd-logind delay lock; `systemctl poweroff` (which asks logind)
// makes berth stop its pods lowest priority first, critical last, then
// release the lock so the shutdown goes on. The machine's real logind
// and journal are the witnesses: the pods' own log of their SIGTERMs,
// and berth's journal of the previous boot.
func TestGracefulShutdown(t *testing.T) {
	needBed(t)
	ensureInstalled(t)
	const config = "/etc/berth/berth.yaml"
	orig, err := os.ReadFile(filepath.Join(bed.Root, config))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = bed.WriteFile(config, orig, 0o600)
		for _, p := range []string{"low", "mid", "critical"} {
			removeManifest(t, p)
		}
		_, _ = bed.Exec("systemctl", "restart", "berth")
	})
	conf := string(orig) + "\nshutdownGracePeriod: 60s\nshutdownGracePeriodCriticalPods: 20s\n"
	if err := bed.WriteFile(config, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	sh(t, "rm -rf /var/lib/shutdown-order")
	writeManifest(t, "low", shutdownPod("low", "priority: -10"))
	writeManifest(t, "mid", shutdownPod("mid", "priority: 1000"))
	writeManifest(t, "critical", shutdownPod("critical", "priorityClassName: system-node-critical"))
	sh(t, "systemctl restart berth")
	waitRunning(t, "low", "mid", "critical")

	waitFor(t, "berth's delay lock in logind", 30*time.Second, func() (bool, string) {
		out, _ := bed.Exec("systemd-inhibit", "--list", "--no-pager")
		return strings.Contains(out, "berth") && strings.Contains(out, "delay"), out
	})
	if got := sh(t, "busctl get-property org.freedesktop.login1 /org/freedesktop/login1 org.freedesktop.login1.Manager InhibitDelayMaxUSec"); got != "t 60000000" {
		t.Errorf("logind's InhibitDelayMaxUSec = %q, want berth's 60s", got)
	}

	started := time.Now()
	// Without berth's lock released, logind would hold the shutdown for
	// the full 60 s: waiting 50 s tells the two apart.
	clean, err := bed.Reboot(50 * time.Second)
	if err != nil {
		t.Fatalf("reboot: %v", err)
	}
	t.Logf("shutdown clean: %v, after %s", clean, time.Since(started).Round(time.Second))

	order, err := os.ReadFile(filepath.Join(bed.Root, "var/lib/shutdown-order/log"))
	if err != nil {
		t.Fatalf("the pods' log of their SIGTERMs: %v", err)
	}
	if got := strings.Fields(string(order)); strings.Join(got, " ") != "low mid critical" {
		t.Errorf("pods stopped in the order %q, want low, mid, critical", got)
	}
	journal := sh(t, "journalctl -b -1 -u berth --no-pager -o cat")
	for _, want := range []string{"graceful node shutdown: holding a logind delay lock", "node shutdown: stopping pods", "node shutdown: pods stopped, releasing the logind lock"} {
		if !strings.Contains(journal, want) {
			t.Errorf("berth's journal of the shut-down boot lacks %q:\n%s", want, journal)
		}
	}
	if !clean {
		t.Errorf("the shutdown did not complete within 50 s: berth's lock held it")
	}
	waitRunning(t, "low", "mid", "critical")
}
