package testbed

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestNginx starts the private nginx and checks what the fleet tests rely
// on: a published file is served with an ETag and answers a conditional
// GET with 304, a status report PUT under /status/ is stored, and every
// request is in the access log with its bytes.
func TestNginx(t *testing.T) {
	if _, err := exec.LookPath("nginx"); err != nil {
		t.Skip("nginx is not installed: make testbed installs it")
	}
	n, err := StartNginx(t.TempDir(), NginxOptions{ServerDirectives: "add_header Cache-Control max-age=7;"})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := n.Stop(); err != nil {
			t.Error(err)
		}
	}()
	if err := n.Publish("groups/a/pods.yaml", []byte("kind: PodList\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(n.URL + "/groups/a/pods.yaml")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	etag := resp.Header.Get("ETag")
	if resp.StatusCode != http.StatusOK || string(body) != "kind: PodList\n" || etag == "" || resp.Header.Get("Cache-Control") != "max-age=7" {
		t.Fatalf("GET: %s %q, headers %v", resp.Status, body, resp.Header)
	}
	req, _ := http.NewRequest(http.MethodGet, n.URL+"/groups/a/pods.yaml", nil)
	req.Header.Set("If-None-Match", etag)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotModified {
		t.Errorf("conditional GET: %s, want 304", resp.Status)
	}
	req, _ = http.NewRequest(http.MethodPut, n.URL+"/status/edge-1.json", bytes.NewReader([]byte(`{"node":"edge-1"}`)))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("PUT: %s, want 201", resp.Status)
	}
	if got, err := os.ReadFile(filepath.Join(n.Root, "status", "edge-1.json")); err != nil || string(got) != `{"node":"edge-1"}` {
		t.Errorf("stored report %q, %v", got, err)
	}
	// nginx logs a request once it has answered it: the client may see
	// the answer first.
	var log []AccessEntry
	for deadline := time.Now().Add(10 * time.Second); len(log) < 3 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if log, err = n.AccessLog(); err != nil {
			t.Fatal(err)
		}
	}
	if len(log) != 3 || log[0].Status != 200 || log[1].Status != 304 || log[2].Method != http.MethodPut ||
		log[0].BytesOut <= log[1].BytesOut || log[2].BytesIn == 0 || log[0].URI != "/groups/a/pods.yaml" {
		t.Errorf("access log %+v", log)
	}
}
