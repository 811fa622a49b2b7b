package source

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/berth-agent/berth/internal/store"
)

// fakeServer serves the URL source of Run's tests whatever the test sets;
// package httpsource's tests have the full one (hangs, Last-Modified, the
// requests made).
type fakeServer struct {
	mu     sync.Mutex // guards all fields
	status int
	body   string
	etag   string
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	status, body, etag := f.status, f.body, f.etag
	f.mu.Unlock()
	if etag != "" {
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", etag)
	}
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// set changes the answer; hang is not served here and must be false.
func (f *fakeServer) set(status int, etag, body string, hang bool) {
	if hang {
		panic("fakeServer: hang is package httpsource's")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status, f.etag, f.body = status, etag, body
}

// RoundTrip serves r in process, as a fake transport.
func (f *fakeServer) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	f.ServeHTTP(rec, r)
	return rec.Result(), nil
}

// TestRunRejectsBadConfig checks Run starts nothing on a config it
// refuses: no node name, or a URL the HTTP source refuses.
func TestRunRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{ManifestPath: "/etc/kubernetes/manifests"},
		{NodeName: "n", URL: "ftp://example.com/pods"},
		{NodeName: "n", URL: "http://"},
		{NodeName: "n", URL: "http://127.0.0.1:1/pods", Permissions: "loose"},
	} {
		if err := Run(context.Background(), cfg, store.New()); err == nil {
			t.Errorf("Run(%+v) = nil, want an error", cfg)
		}
	}
}
