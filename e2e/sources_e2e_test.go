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
)

// TestOrphansWaitForSources restarts berth while its --manifest-url fails:
// until that source has delivered, berth is not ready and removes nothing,
// so the pod the URL served before keeps running. When the URL answers
// with the same pod again, berth adopts it (same container); when it then
// answers with no pods, berth stops and removes it.
func TestOrphansWaitForSources(t *testing.T) {
	src := &manifestServer{code: http.StatusOK, body: podManifest(sleeper("remote"))}
	srv := httptest.NewServer(src)
	t.Cleanup(srv.Close)

	name := podName("remote")
	b := newBerth(t, berthOptions{args: []string{"--manifest-url", srv.URL + "/pods", "--http-check-frequency", "1s"}})
	b.waitReady()
	api := b.waitRunning(name)
	before := b.waitRuntime(name, "main", api.UID)

	b.stop()
	src.set(http.StatusInternalServerError, "down for maintenance")
	b.start()
	// Relists, housekeeping and HTTP polls go by without the source.
	time.Sleep(6 * time.Second)
	if code, body := b.status("/readyz"); code != http.StatusServiceUnavailable || body == "" {
		t.Errorf("/readyz while the URL source never delivered = %d %q, want 503 with a reason", code, body)
	} else {
		t.Logf("/readyz while the URL source fails: %d %q", code, body)
	}
	if code, body := b.status("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz while only a source fails = %d %q, want 200", code, body)
	}
	now, ok, detail := runtimeState(name, "main", api.UID)
	if !ok || now.container.Id != before.container.Id {
		t.Fatalf("before every source delivered, berth touched the pod: %s (container %s, was %s)", detail, shortID(now.container.GetId()), shortID(before.container.Id))
	}

	// The same pod again: adopted, not restarted.
	src.set(http.StatusOK, podManifest(sleeper("remote")))
	took := b.waitReady()
	t.Logf("URL back -> /readyz 200 after %s", took.Round(time.Millisecond))
	b.waitPod(name, "Running with the adopted container", func(p *v1.Pod) bool {
		cs := containerStatus(p, "main")
		return p.UID == api.UID && cs != nil && cs.State.Running != nil && shortID(cs.ContainerID) == shortID(before.container.Id)
	})
	time.Sleep(3 * time.Second)
	if now, ok, detail := runtimeState(name, "main", api.UID); !ok || now.container.Id != before.container.Id {
		t.Errorf("the URL's pod was not adopted as it ran: %s (container %s, was %s)", detail, shortID(now.container.GetId()), shortID(before.container.Id))
	}

	// The URL drops it: berth stops and removes it.
	src.set(http.StatusOK, "apiVersion: v1\nkind: PodList\nitems: []\n")
	took = b.waitGone(name)
	t.Logf("URL dropped the pod -> sandbox and container removed after %s", took.Round(time.Millisecond))
}

// manifestServer serves one manifest (or an error) for --manifest-url.
type manifestServer struct {
	mu   sync.Mutex
	code int
	body string
}

func (s *manifestServer) set(code int, body string) {
	s.mu.Lock()
	s.code, s.body = code, body
	s.mu.Unlock()
}

func (s *manifestServer) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	code, body := s.code, s.body
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/yaml")
	w.WriteHeader(code)
	fmt.Fprint(w, body)
}
