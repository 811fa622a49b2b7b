//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestSameNameTwoSources gives berth the same pod name from the manifest
// directory and from --manifest-url (two different UIDs of one full name):
// polling CRI every 20 ms, there is never a moment with two ready sandboxes
// or two running containers of that name, and exactly one of them runs.
func TestSameNameTwoSources(t *testing.T) {
	fromHTTP := sleeper("twin")
	fromHTTP.Spec.Containers[0].Env = []v1.EnvVar{{Name: "FROM", Value: "http"}}
	var mu sync.Mutex
	body := podManifest(fromHTTP)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		w.Header().Set("Content-Type", "application/yaml")
		fmt.Fprint(w, body)
	}))
	t.Cleanup(srv.Close)

	name := podName("twin")
	w := watchPod(name, 20*time.Millisecond)
	defer w.stop()
	b := newBerth(t, berthOptions{
		args:      []string{"--manifest-url", srv.URL + "/pods", "--http-check-frequency", "1s", "--sync-frequency", "2s"},
		manifests: map[string]string{"twin.yaml": podManifest(sleeper("twin"))},
	})
	b.waitReady()
	var running *v1.Pod
	b.waitFor("one of the two "+name+" Running", waitTimeout, func() (bool, string) {
		list, err := b.pods()
		if err != nil {
			return false, err.Error()
		}
		running = nil
		desc := ""
		for i := range list.Items {
			p := &list.Items[i]
			desc += describePod(p) + "; "
			if p.Name == name && p.Status.Phase == v1.PodRunning && podReady(p) {
				running = p
			}
		}
		return running != nil, desc
	})
	b.waitRuntime(name, "main", running.UID)
	t.Logf("running: %s from %s", running.UID, running.Annotations["kubernetes.io/config.source"])

	time.Sleep(5 * time.Second) // relists, HTTP polls, resyncs
	r := w.stop()
	t.Logf("polled CRI %d times; ready sandboxes seen per uid: %v", r.samples, r.readyUIDs)
	if r.err != nil {
		t.Errorf("polling CRI: %v", r.err)
	}
	if r.maxReady > 1 || r.maxRunning > 1 {
		t.Errorf("both pods named %s ran at once: %s %s", name, r.worst, r.worstContainers)
	}
	if len(r.readyUIDs) != 1 || !r.readyUIDs[string(running.UID)] {
		t.Errorf("ready sandboxes were seen for uids %v, want only the running %s", r.readyUIDs, running.UID)
	}
	if _, ok, detail := runtimeState(name, "main", running.UID); !ok {
		t.Errorf("%s at the end: %s", name, detail)
	}
	var other types.UID
	for _, p := range b.mustPods().Items {
		t.Logf("/pods: %s %s", p.Name, describePod(&p))
		if p.Name != name || p.UID == running.UID {
			continue
		}
		other = p.UID
		if p.Status.Phase == v1.PodRunning || podReady(&p) {
			t.Errorf("the other %s (uid %s) is shown running: %s", name, p.UID, describePod(&p))
		}
	}
	if other == "" {
		t.Fatalf("/pods does not show the second %s at all", name)
	}

	// The running one's source drops it: the waiting one takes over, and
	// still never together with the first.
	w = watchPod(name, 20*time.Millisecond)
	handover := time.Now()
	if running.Annotations["kubernetes.io/config.source"] == "http" {
		mu.Lock()
		body = "apiVersion: v1\nkind: PodList\nitems: []\n"
		mu.Unlock()
	} else {
		b.removeManifest("twin.yaml")
	}
	b.waitRuntime(name, "main", other)
	b.waitPod(name, "the other uid Running", func(p *v1.Pod) bool { return p.UID == other && p.Status.Phase == v1.PodRunning })
	t.Logf("the waiting %s took over %s after its twin was dropped", other, time.Since(handover).Round(time.Millisecond))
	r = w.stop()
	if r.maxReady > 1 || r.maxRunning > 1 {
		t.Errorf("during the handover both pods named %s ran at once: %s %s", name, r.worst, r.worstContainers)
	}
}
