//go:build e2e

package e2e

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestManifestURLSecretsRedacted gives berth a --manifest-url with a
// password and a token: the pods it serves run, and neither secret shows
// in anything berth prints or stores for others to read: its log (the
// "starting berth" line included), /pods (the berth.io/config.origin
// annotation), /problems (a rejected item, a failed poll), and the
// sandbox annotations berth hands the runtime.
func TestManifestURLSecretsRedacted(t *testing.T) {
	bad := "apiVersion: v1\nkind: Pod\nmetadata:\n  name: bad\nspec:\n  containers:\n  - name: main\n    image: busybox:1.36\n    imagePullPolicy: Sometimes\n"
	src := &manifestServer{code: http.StatusOK, body: podManifest(sleeper("remote")) + "\n---\n" + bad}
	srv := httptest.NewServer(src)
	t.Cleanup(srv.Close)
	secrets := []string{"pa55word", "t0ken"}
	url := strings.Replace(srv.URL, "http://", "http://user:pa55word@", 1) + "/pods?token=t0ken"
	printed := strings.Replace(srv.URL, "http://", "http://user:REDACTED@", 1) + "/pods?token=REDACTED"

	b := newBerth(t, berthOptions{args: []string{"--manifest-url", url, "--http-check-frequency", "1s"}})
	b.waitReady()
	api := b.waitRunning(podName("remote"))
	if got := api.Annotations["berth.io/config.origin"]; got != printed {
		t.Errorf("berth.io/config.origin = %q, want %q", got, printed)
	}
	b.waitRuntime(podName("remote"), "main", api.UID)

	noSecret := func(what, s string) {
		t.Helper()
		for _, secret := range secrets {
			if strings.Contains(s, secret) {
				t.Errorf("%s shows the URL's secret %q:\n%.2000s", what, secret, s)
			}
		}
	}
	for _, path := range []string{"/pods", "/problems"} {
		code, body, err := b.getUnix(path)
		if err != nil || code != http.StatusOK {
			t.Fatalf("%s: %d %v", path, code, err)
		}
		noSecret(path, string(body))
		if path == "/problems" && !strings.Contains(string(body), printed) {
			t.Errorf("/problems does not name the URL as %s: %s", printed, body)
		}
	}
	sbs, err := sandboxesOf(podName("remote"))
	if err != nil || len(sbs) == 0 {
		t.Fatalf("sandboxes of the pod: %v %v", sbs, err)
	}
	for _, sb := range sbs {
		for k, v := range sb.Annotations {
			noSecret("sandbox annotation "+k, v)
		}
	}

	// A failed poll is reported and logged without the secrets either.
	src.set(http.StatusInternalServerError, "down")
	b.waitFor("/problems to report the failed poll", waitTimeout, func() (bool, string) {
		_, body, err := b.getUnix("/problems")
		return err == nil && strings.Contains(string(body), "server answered 500"), string(body)
	})
	_, body, _ := b.getUnix("/problems")
	noSecret("/problems after a failed poll", string(body))
	p := b.waitPod(podName("remote"), "still Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
	noSecret("the pod while its URL fails", describePod(p))

	log, err := os.ReadFile(b.logFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), `msg="starting berth"`) || !strings.Contains(string(log), printed) {
		t.Errorf("berth's log has no \"starting berth\" line naming %s", printed)
	}
	// The harness writes berth's own command line into the log file
	// first; only what berth wrote counts.
	var own []string
	for _, line := range strings.Split(string(log), "\n") {
		if !strings.HasPrefix(line, "=== e2e:") {
			own = append(own, line)
		}
	}
	noSecret("berth's log", strings.Join(own, "\n"))
}

// TestListenPodsRedacted runs a pod whose readiness probe and preStop hook
// call HTTP paths carrying a token in the query. With
// --listen-pods=redacted, /pods over TCP keeps the probe's path and its
// query key but neither token; the socket, root's, shows the pod whole.
func TestListenPodsRedacted(t *testing.T) {
	const probeToken, hookToken = "pr0be-t0ken", "h00k-t0ken"
	pod := sleeper("probed")
	pod.Spec.Containers[0].ReadinessProbe = &v1.Probe{
		ProbeHandler:  v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/healthz?token=" + probeToken, Port: intstr.FromInt32(8080)}},
		PeriodSeconds: 1,
	}
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{
		HTTPGet: &v1.HTTPGetAction{Path: "/stop?token=" + hookToken, Port: intstr.FromInt32(8080)},
	}}
	b := newBerth(t, berthOptions{args: []string{"--listen-pods", "redacted"}, manifests: map[string]string{"probed.yaml": podManifest(pod)}})
	b.waitReady()
	b.waitPod(podName("probed"), "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })

	code, body, err := getFrom(b.http, "http://"+b.addr+"/pods")
	if err != nil || code != http.StatusOK {
		t.Fatalf("/pods over TCP: %d %v %.200s", code, err, body)
	}
	for _, token := range []string{probeToken, hookToken} {
		if strings.Contains(string(body), token) {
			t.Errorf("/pods over TCP shows %q:\n%.3000s", token, body)
		}
	}
	if !strings.Contains(string(body), `"/healthz?token=`) {
		t.Errorf("/pods over TCP lost the probe's path:\n%.3000s", body)
	}
	code, body, err = b.getUnix("/pods")
	if err != nil || code != http.StatusOK || !strings.Contains(string(body), probeToken) {
		t.Errorf("/pods over the socket: %d %v, want the pod whole:\n%.3000s", code, err, body)
	}
}
