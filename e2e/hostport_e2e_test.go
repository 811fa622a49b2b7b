//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestHostPorts: a pod asking for one host port twice is refused as the
// API server refuses it, its berth.io/ManifestValid condition False with
// the file, line and field of the second claim; two pods of separate
// files claiming one host port both run, and the later one's clash is a
// Warning event of it naming the earlier pod's file and line, logged
// once; so is a field berth ignores.
func TestHostPorts(t *testing.T) {
	port := freePort(t)
	dup := sleeper("dup")
	dup.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: int32(port)}}
	side := shContainer("side", sleepForever)
	side.Ports = []v1.ContainerPort{{ContainerPort: 81, HostPort: int32(port)}}
	dup.Spec.Containers = append(dup.Spec.Containers, side)
	// Host-network pods: their container ports are host ports. The
	// sleepers bind nothing, so both start.
	first, second := sleeper("net-a"), sleeper("net-b")
	for _, p := range []*v1.Pod{first, second} {
		p.Spec.HostNetwork = true
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: int32(port)}}
	}
	second.Spec.Tolerations = []v1.Toleration{{Operator: v1.TolerationOpExists}}
	b := newBerth(t, berthOptions{manifests: map[string]string{
		"dup.yaml":   podManifest(dup),
		"net-a.yaml": podManifest(first),
		"net-b.yaml": podManifest(second),
	}})
	b.waitReady()

	c := b.waitManifestValid(podName("dup"), v1.ConditionFalse, "Invalid")
	want := fmt.Sprintf(`%s:%d: spec.containers[1].ports[0].hostPort: Duplicate value: "TCP//%d"`, b.manifestPath("dup.yaml"), lineOf(t, podManifest(dup), fmt.Sprintf("hostPort: %d", port), 2), port)
	if c.Message != want {
		t.Errorf("dup: ManifestValid message %q, want %q", c.Message, want)
	}
	if sbs, err := sandboxesOf(podName("dup")); err != nil || len(sbs) != 0 {
		t.Errorf("dup got sandboxes (%v): %v", err, sbs)
	}

	b.waitRunning(podName("net-a"))
	b.waitRunning(podName("net-b"))
	clash := fmt.Sprintf(`hostPort TCP/0.0.0.0/%d clashes with TCP/0.0.0.0/%d of pod \"%s\" at %s:%d`, port, port, podName("net-a"),
		b.manifestPath("net-a.yaml"), lineOf(t, podManifest(first), fmt.Sprintf("containerPort: %d", port), 1))
	ignored := `spec.tolerations: ignored: berth runs the pod on this node without scheduling" event=IgnoredField pod=` + podName("net-b")
	for _, w := range []string{clash, ignored} {
		b.waitFor("the pod warning "+w, waitTimeout, func() (bool, string) { return b.logContains(w), "not logged" })
	}
	// The clash is a Warning event of the later pod, which berth
	// describe shows.
	b.waitFor("berth describe net-b to show the HostPortConflict event", waitTimeout, func() (bool, string) {
		out, err := exec.Command(berthBin, "describe", "net-b", "--socket", b.socket).CombinedOutput()
		return err == nil && regexp.MustCompile(`Warning\s+HostPortConflict\s`).Match(out), string(out)
	})
	// A rescan later, each is still logged once.
	b.writeManifest("other.yaml", podManifest(sleeper("other")))
	b.waitRunning(podName("other"))
	for _, w := range []string{clash, ignored} {
		if n := b.logCount(w); n != 1 {
			b.dumpLog()
			t.Errorf("%q logged %d times, want once", w, n)
		}
	}
}

// lineOf is the 1-based line of the nth line of manifest containing s.
func lineOf(t *testing.T, manifest, s string, nth int) int {
	t.Helper()
	for i, line := range strings.Split(manifest, "\n") {
		if strings.Contains(line, s) {
			if nth--; nth == 0 {
				return i + 1
			}
		}
	}
	t.Fatalf("manifest has no %d of %q:\n%s", nth, s, manifest)
	return 0
}

// logCount is how many times s occurs in berth's log.
func (b *berth) logCount(s string) int {
	data, _ := os.ReadFile(b.logFile)
	return strings.Count(string(data), s)
}

// TestHostPortClashAcrossSources: a host-network pod of --manifest-url
// claiming the port of a host-network file pod runs beside it, and the URL
// pod gets the HostPortConflict warning event naming the file pod's
// manifest, once.
func TestHostPortClashAcrossSources(t *testing.T) {
	port := freePort(t)
	file, web := sleeper("file-net"), sleeper("url-net")
	for _, p := range []*v1.Pod{file, web} {
		p.Spec.HostNetwork = true
		p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: int32(port)}}
	}
	src := &manifestServer{code: http.StatusOK, body: podManifest(web)}
	srv := httptest.NewServer(src)
	t.Cleanup(srv.Close)
	b := newBerth(t, berthOptions{manifests: map[string]string{"file-net.yaml": podManifest(file)},
		args: []string{"--manifest-url", srv.URL + "/pods", "--http-check-frequency", "1s"}})
	b.waitReady()
	b.waitRunning(podName("file-net"))
	b.waitRunning(podName("url-net"))
	want := fmt.Sprintf(`hostPort TCP/0.0.0.0/%d clashes with TCP/0.0.0.0/%d of pod \"%s\" from %s`, port, port, podName("file-net"), b.manifestPath("file-net.yaml"))
	b.waitFor("the cross-source clash "+want, waitTimeout, func() (bool, string) { return b.logContains(want), "not logged" })
	b.waitFor("berth describe url-net to show the HostPortConflict event", waitTimeout, func() (bool, string) {
		out, err := exec.Command(berthBin, "describe", "url-net", "--socket", b.socket).CombinedOutput()
		return err == nil && regexp.MustCompile(`Warning\s+HostPortConflict\s`).Match(out), string(out)
	})
	// Polls of the same body later, it is still logged once.
	b.writeManifest("other.yaml", podManifest(sleeper("other")))
	b.waitRunning(podName("other"))
	if n := b.logCount(want); n != 1 {
		b.dumpLog()
		t.Errorf("%q logged %d times, want once", want, n)
	}
}
