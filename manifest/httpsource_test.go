package manifest

import (
	"context"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// fakeServer serves whatever the test sets, remembering the requests.
type fakeServer struct {
	mu       sync.Mutex // guards all fields
	status   int
	body     string
	etag     string
	modified string // Last-Modified to send
	hang     bool   // answer only when the client gives up
	requests []*http.Request
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.requests = append(f.requests, r)
	status, body, etag, hang, modified := f.status, f.body, f.etag, f.hang, f.modified
	f.mu.Unlock()
	if hang {
		<-r.Context().Done()
		return
	}
	if etag != "" {
		if r.Header.Get("If-None-Match") == etag {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", etag)
	}
	if modified != "" {
		if r.Header.Get("If-Modified-Since") == modified {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("Last-Modified", modified)
	}
	w.WriteHeader(status)
	io.WriteString(w, body)
}

func (f *fakeServer) set(status int, etag, body string, hang bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status, f.etag, f.body, f.hang = status, etag, body, hang
}

func (f *fakeServer) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

func (f *fakeServer) last() *http.Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.requests[len(f.requests)-1]
}

func podList(pods ...string) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: PodList\nitems:\n")
	for _, p := range pods {
		for i, line := range strings.Split(strings.TrimSuffix(p, "\n"), "\n") {
			if i == 0 {
				b.WriteString("- " + line + "\n")
			} else {
				b.WriteString("  " + line + "\n")
			}
		}
	}
	return b.String()
}

func TestHTTPSource(t *testing.T) {
	fake := &fakeServer{status: http.StatusInternalServerError}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	clk := clocktesting.NewFakeClock(time.Now())
	store := watchedSource(t, SourceConfig{
		URL: srv.URL + "/pods", URLHeader: http.Header{"X-Token": {"secret"}},
		HTTPCheckFrequency: time.Minute, HTTPTimeout: 100 * time.Millisecond, MaxBytes: 4096,
		HTTPClient: srv.Client(), Clock: clk,
	})
	polls := 0
	poll := func() {
		t.Helper()
		if polls > 0 {
			eventually(t, "the poll ticker", clk.HasWaiters)
			clk.Step(time.Minute)
		}
		polls++
		eventually(t, "the poll", func() bool { return fake.count() == polls })
	}
	reported := func(want string) {
		t.Helper()
		eventually(t, "problem "+want, func() bool { return problemsOf(store) == want })
	}

	poll()
	reported("Unreachable pods ")
	if store.SourcesReady() {
		t.Fatal("ready before the server ever answered")
	}
	if got := fake.last().Header.Get("X-Token"); got != "secret" {
		t.Errorf("X-Token header = %q", got)
	}

	fake.set(http.StatusOK, `"v1"`, podList(podManifest("a", "img:1"), podManifest("b", "img:1")), false)
	poll()
	if got := next(t, store); got != "ADD a-node1 img:1\nADD b-node1 img:1" {
		t.Fatalf("first answer: %q", got)
	}
	reported("")
	if !store.SourcesReady() {
		t.Fatal("not ready after the server answered")
	}

	poll()
	if got := fake.last().Header.Get("If-None-Match"); got != `"v1"` {
		t.Errorf("If-None-Match = %q", got)
	}
	quiet(t, store)

	// Servers without ETags are asked with If-Modified-Since.
	fake.set(http.StatusOK, "", podList(podManifest("a", "img:1"), podManifest("b", "img:1")), false)
	fake.mu.Lock()
	fake.modified = "Sat, 21 Nov 2026 10:00:00 GMT"
	fake.mu.Unlock()
	poll()
	poll()
	if got := fake.last().Header.Get("If-Modified-Since"); got != "Sat, 21 Nov 2026 10:00:00 GMT" {
		t.Errorf("If-Modified-Since = %q", got)
	}
	quiet(t, store)
	fake.mu.Lock()
	fake.modified = ""
	fake.mu.Unlock()

	for _, tt := range []struct {
		name   string
		status int
		body   string
		hang   bool
		want   string
	}{
		{"server error", http.StatusServiceUnavailable, "", false, "Unreachable pods "},
		{"slow", http.StatusOK, "", true, "Unreachable pods "},
		{"too large", http.StatusOK, strings.Repeat("#", 5000), false, "TooLarge pods "},
		{"empty", http.StatusOK, "\n", false, "Empty pods "},
		{"syntax error", http.StatusOK, "items: [", false, "DecodeError pods "},
	} {
		fake.set(http.StatusOK, "", "", false)
		fake.set(tt.status, "", tt.body, tt.hang)
		poll()
		reported(tt.want)
		quiet(t, store)
		if n := len(store.Pods()); n != 2 {
			t.Fatalf("%s: %d pods left, want the last good 2", tt.name, n)
		}
	}

	// One item broken: it keeps its last good version, its sibling moves on.
	fake.set(http.StatusOK, `"v2"`, podList(podManifest("a", "img:2"), podManifest("b", "img:2")+"  restartPolicy: Sometimes\n"), false)
	poll()
	if got := next(t, store); got != "REMOVE a-node1 img:1" {
		t.Fatalf("partial: %q", got)
	}
	if got := next(t, store); got != "ADD a-node1 img:2" {
		t.Fatalf("partial: %q", got)
	}
	reported("Invalid pods items[1].spec.restartPolicy")

	// An empty PodList is how a server says "no pods".
	fake.set(http.StatusOK, "", "apiVersion: v1\nkind: PodList\nitems: []\n", false)
	poll()
	if got := next(t, store); got != "REMOVE a-node1 img:2\nREMOVE b-node1 img:1" {
		t.Fatalf("empty list: %q", got)
	}
	reported("")
}

// TestHTTPSourceVerifiesTLS checks https is verified by default: a server
// with an unknown certificate is unreachable, not trusted.
func TestHTTPSourceVerifiesTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(&fakeServer{status: http.StatusOK, body: podManifest("a", "img:1")})
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake failure is the point
	srv.StartTLS()
	defer srv.Close()
	store := NewStore(SourceHTTP)
	cfg := SourceConfig{NodeName: testNode, URL: srv.URL, Clock: clocktesting.NewFakeClock(time.Now()),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { Run(ctx, cfg, store); close(done) }()
	defer func() { cancel(); <-done }()
	eventually(t, "the certificate error", func() bool {
		ps := store.Problems()
		return len(ps) == 1 && strings.Contains(ps[0].Message, "certificate")
	})
	if store.SourcesReady() || len(store.Pods()) != 0 {
		t.Fatal("trusted a server with an unknown certificate")
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	for _, cfg := range []SourceConfig{
		{ManifestPath: "/etc/kubernetes/manifests"},
		{NodeName: "n", URL: "ftp://example.com/pods"},
		{NodeName: "n", URL: "http://"},
	} {
		if err := Run(context.Background(), cfg, NewStore()); err == nil {
			t.Errorf("Run(%+v) = nil, want an error", cfg)
		}
	}
}
