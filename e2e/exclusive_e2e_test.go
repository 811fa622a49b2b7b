//go:build e2e

package e2e

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestSameNameTwoSources gives berth the same pod name from the manifest
// directory and from --manifest-url (two different UIDs of one full name):
// polling CRI every 20 ms, there is never a moment with two ready sandboxes
// or two running containers of that name, exactly one of them runs and the
// other is shown waiting. Then either the running one's source drops it
// and the waiting one takes over, or the waiting one's source drops it and
// it never starts, not even once the running one is gone too.
func TestSameNameTwoSources(t *testing.T) {
	const emptyList = "apiVersion: v1\nkind: PodList\nitems: []\n"
	for _, tc := range []struct {
		name        string
		dropWaiting bool
	}{
		{name: "handover"},
		{name: "waiting-dropped", dropWaiting: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fromHTTP := sleeper("twin")
			fromHTTP.Spec.Containers[0].Env = []v1.EnvVar{{Name: "FROM", Value: "http"}}
			src := &manifestServer{code: http.StatusOK, body: podManifest(fromHTTP)}
			srv := httptest.NewServer(src)
			t.Cleanup(srv.Close)

			name := podName("twin")
			w := watchPod(name, 20*time.Millisecond)
			defer w.stop()
			b := newBerth(t, berthOptions{
				args:      []string{"--manifest-url", srv.URL + "/pods", "--http-check-frequency", "1s", "--sync-frequency", "2s"},
				manifests: map[string]string{"twin.yaml": podManifest(sleeper("twin"))},
			})
			b.waitReady()
			var running, waiting *v1.Pod
			b.waitFor("one "+name+" Running and the other waiting", waitTimeout, func() (bool, string) {
				list, err := b.pods()
				if err != nil {
					return false, err.Error()
				}
				running, waiting = nil, nil
				desc := ""
				for i := range list.Items {
					p := &list.Items[i]
					desc += describePod(p) + "; "
					switch {
					case p.Name != name:
					case p.Status.Phase == v1.PodRunning && podReady(p):
						running = p
					case p.Status.Phase == v1.PodPending:
						waiting = p
					}
				}
				return running != nil && waiting != nil, desc
			})
			b.waitRuntime(name, "main", running.UID)
			t.Logf("running: %s from %s; waiting: %s (%s: %s)", running.UID, running.Annotations["kubernetes.io/config.source"],
				waiting.UID, waiting.Status.Reason, waiting.Status.Message)

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
				t.Errorf("%s: %s", name, detail)
			}
			if p := podByUID(b, waiting.UID); p == nil || p.Status.Phase != v1.PodPending || podReady(p) {
				t.Errorf("the waiting twin %s: %v, want Pending", waiting.UID, p)
			}

			drop := func(p *v1.Pod) {
				if p.Annotations["kubernetes.io/config.source"] == "http" {
					src.set(http.StatusOK, emptyList)
				} else {
					b.removeManifest("twin.yaml")
				}
			}
			w = watchPod(name, 20*time.Millisecond)
			if !tc.dropWaiting {
				// The running one's source drops it: the waiting one takes
				// over, never together with the first.
				handover := time.Now()
				drop(running)
				b.waitRuntime(name, "main", waiting.UID)
				b.waitFor("the twin "+string(waiting.UID)+" Running in /pods", waitTimeout, func() (bool, string) {
					p := podByUID(b, waiting.UID)
					return p != nil && p.Status.Phase == v1.PodRunning, "not yet"
				})
				t.Logf("the waiting %s took over %s after its twin was dropped", waiting.UID, time.Since(handover).Round(time.Millisecond))
				r = w.stop()
				if r.maxReady > 1 || r.maxRunning > 1 {
					t.Errorf("during the handover both pods named %s ran at once: %s %s", name, r.worst, r.worstContainers)
				}
				return
			}
			// The waiting one's source drops it, then the running one's: the
			// waiting one never starts.
			drop(waiting)
			b.waitFor("the dropped waiting twin gone from /pods", waitTimeout, func() (bool, string) {
				return podByUID(b, waiting.UID) == nil, "still listed"
			})
			drop(running)
			b.waitGone(name)
			time.Sleep(3 * time.Second)
			r = w.stop()
			if r.readyUIDs[string(waiting.UID)] || r.maxReady > 1 {
				t.Errorf("the dropped waiting twin %s got a sandbox: %v %s", waiting.UID, r.readyUIDs, r.worst)
			}
			if n, err := objectsOfUID(name, waiting.UID); err != nil || n > 0 {
				t.Errorf("the dropped waiting twin has %d runtime objects (%v)", n, err)
			}
			for _, p := range b.mustPods().Items {
				t.Errorf("/pods still lists %s", describePod(&p))
			}
		})
	}
}

// podByUID returns the pod of uid from /pods, or nil.
func podByUID(b *berth, uid types.UID) *v1.Pod {
	list, err := b.pods()
	if err != nil {
		return nil
	}
	for i := range list.Items {
		if list.Items[i].UID == uid {
			return &list.Items[i]
		}
	}
	return nil
}
