package httpsource

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

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podspec/podspectest"
	"github.com/berth-agent/berth/internal/store"
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
	signal() // the request is counted
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

// RoundTrip serves r in process, as a fake transport: no network and no
// server goroutine decide when an answer arrives, and a hanging answer
// returns only once the request's context ends.
func (f *fakeServer) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	f.ServeHTTP(rec, r)
	if err := r.Context().Err(); err != nil {
		return nil, err
	}
	return rec.Result(), nil
}

// noUpdate checks the store emitted nothing. It does not wait: callers
// first wait for the store to have merged the snapshot in question
// (Store.applied), and Apply queues its updates before it returns.
func noUpdate(t *testing.T, s *store.Store) {
	t.Helper()
	select {
	case u := <-s.Updates():
		t.Fatalf("unexpected update %s %v", u.Op, u.Pods[0].Name)
	default:
	}
}

// TestHTTPSource walks one source through every kind of answer. Each poll
// is made by stepping the fake clock to the next tick and waits until the
// store has merged that poll's own snapshot, so every assertion is about
// the answer the case set up, not the one before. The slow server is given
// up on exactly at the timeout, on the fake clock.
func TestHTTPSource(t *testing.T) {
	const timeout = 10 * time.Second
	fake := &fakeServer{status: http.StatusInternalServerError}
	clk := newClock(time.Now())
	st := watchedSource(t, Config{
		URL: "http://manifests.example/pods", URLHeader: http.Header{"X-Token": {"secret"}},
		HTTPCheckFrequency: time.Minute, HTTPTimeout: timeout, MaxBytes: 4096,
		HTTPClient: &http.Client{Transport: fake}, Clock: clk,
	})
	polls := 0
	// start makes the source poll once more: the first poll runs at once,
	// the next ones when the schedule's timer fires (httppoll_test.go
	// checks when that is). The previous poll's snapshot is merged, so once
	// the source waits on the clock it waits on that timer and nothing
	// else; an hour is past any delay the schedule picks.
	start := func() {
		t.Helper()
		if polls > 0 {
			eventually(t, "the next poll's timer", clk.HasWaiters)
			clk.Step(time.Hour)
		}
		polls++
		eventually(t, "the poll's request", func() bool { return fake.count() == polls })
	}
	// merged waits until the store has merged the current poll's snapshot.
	merged := func() {
		t.Helper()
		eventually(t, "the poll's snapshot", func() bool { return st.Applied() == int64(polls) })
	}
	poll := func() {
		t.Helper()
		start()
		merged()
	}
	lastGood := func(what string) {
		t.Helper()
		noUpdate(t, st)
		var got []string
		for _, p := range st.Pods() {
			got = append(got, p.Name+" "+p.Spec.Containers[0].Image)
		}
		if strings.Join(got, ",") != "a-node1 img:1,b-node1 img:1" {
			t.Fatalf("%s: pods %v, want the last good a and b", what, got)
		}
	}

	poll()
	if got := problemsOf(st); got != "Unreachable pods " {
		t.Fatalf("problems = %q before the server ever answered", got)
	}
	if st.SourcesReady() {
		t.Fatal("ready before the server ever answered")
	}
	if got := fake.last().Header.Get("X-Token"); got != "secret" {
		t.Errorf("X-Token header = %q", got)
	}

	fake.set(http.StatusOK, `"v1"`, podspectest.List(podspectest.Manifest("a", "img:1"), podspectest.Manifest("b", "img:1")), false)
	poll()
	if got := next(t, st); got != "ADD a-node1 img:1\nADD b-node1 img:1" {
		t.Fatalf("first answer: %q", got)
	}
	if got := problemsOf(st); got != "" {
		t.Fatalf("problems = %q after the server answered", got)
	}
	if !st.SourcesReady() {
		t.Fatal("not ready after the server answered")
	}

	poll()
	if got := fake.last().Header.Get("If-None-Match"); got != `"v1"` {
		t.Errorf("If-None-Match = %q", got)
	}
	lastGood("304 to If-None-Match")

	// Servers without ETags are asked with If-Modified-Since.
	fake.set(http.StatusOK, "", podspectest.List(podspectest.Manifest("a", "img:1"), podspectest.Manifest("b", "img:1")), false)
	fake.mu.Lock()
	fake.modified = "Sat, 21 Nov 2026 10:00:00 GMT"
	fake.mu.Unlock()
	poll()
	poll()
	if got := fake.last().Header.Get("If-Modified-Since"); got != "Sat, 21 Nov 2026 10:00:00 GMT" {
		t.Errorf("If-Modified-Since = %q", got)
	}
	lastGood("304 to If-Modified-Since")
	fake.mu.Lock()
	fake.modified = ""
	fake.mu.Unlock()

	// Every failure keeps the last good pods. Each case's problem message
	// differs from the one before it, so seeing it proves this case's
	// answer was judged.
	for _, tt := range []struct {
		name   string
		status int
		body   string
		hang   bool
		reason string
		msg    string
	}{
		{"server error", http.StatusServiceUnavailable, "", false, ReasonUnreachable, "server answered 503"},
		{"slow", http.StatusOK, "", true, ReasonUnreachable, "no complete answer within 10s"},
		{"too large", http.StatusOK, strings.Repeat("#", 5000), false, podspec.ReasonTooLarge, "larger than the limit of 4096 bytes"},
		{"empty", http.StatusOK, "\n", false, podspec.ReasonEmpty, "empty body"},
		{"syntax error", http.StatusOK, "items: [", false, podspec.ReasonDecodeError, "invalid YAML"},
	} {
		fake.set(tt.status, "", tt.body, tt.hang)
		if tt.hang {
			start()
			// The request is in flight until the timeout, not a moment
			// less: nothing but the timeout can end it.
			clk.Step(timeout - time.Millisecond)
			if st.Applied() == int64(polls) {
				t.Fatalf("%s: gave up on the server before the timeout", tt.name)
			}
			clk.Step(time.Millisecond)
			merged()
		} else {
			poll()
		}
		ps := st.Problems()
		if len(ps) != 1 || ps[0].Reason != tt.reason || !strings.Contains(ps[0].Message, tt.msg) {
			t.Fatalf("%s: problems %+v, want one %s saying %q", tt.name, ps, tt.reason, tt.msg)
		}
		lastGood(tt.name)
	}

	// One item broken: it keeps its last good version, its sibling moves on.
	fake.set(http.StatusOK, `"v2"`, podspectest.List(podspectest.Manifest("a", "img:2"), podspectest.Manifest("b", "img:2")+"  restartPolicy: Sometimes\n"), false)
	poll()
	if got := next(t, st); got != "REMOVE a-node1 img:1" {
		t.Fatalf("partial: %q", got)
	}
	if got := next(t, st); got != "ADD a-node1 img:2" {
		t.Fatalf("partial: %q", got)
	}
	if got := problemsOf(st); got != "Invalid pods items[1].spec.restartPolicy" {
		t.Fatalf("partial: problems %q", got)
	}

	// An empty PodList is how a server says "no pods".
	fake.set(http.StatusOK, "", "apiVersion: v1\nkind: PodList\nitems: []\n", false)
	poll()
	if got := next(t, st); got != "REMOVE a-node1 img:2\nREMOVE b-node1 img:1" {
		t.Fatalf("empty list: %q", got)
	}
	if got := problemsOf(st); got != "" {
		t.Fatalf("empty list: problems %q", got)
	}
}

// TestHTTPSourceVerifiesTLS checks https is verified by default: a server
// with an unknown certificate is unreachable, not trusted.
func TestHTTPSourceVerifiesTLS(t *testing.T) {
	srv := httptest.NewUnstartedServer(&fakeServer{status: http.StatusOK, body: podspectest.Manifest("a", "img:1")})
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the handshake failure is the point
	srv.StartTLS()
	defer srv.Close()
	st := store.New(podspec.SourceHTTP)
	cfg := Config{NodeName: podspectest.Node, URL: srv.URL, Clock: newClock(time.Now()),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { runSource(ctx, cfg, st); close(done) }()
	defer func() { cancel(); <-done }()
	eventually(t, "the certificate error", func() bool {
		ps := st.Problems()
		return len(ps) == 1 && strings.Contains(ps[0].Message, "certificate")
	})
	if st.SourcesReady() || len(st.Pods()) != 0 {
		t.Fatal("trusted a server with an unknown certificate")
	}
}

func TestRunRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{
		{NodeName: "n", URL: "ftp://example.com/pods"},
		{NodeName: "n", URL: "http://"},
	} {
		if err := runSource(context.Background(), cfg, store.New()); err == nil {
			t.Errorf("runSource(%+v) = nil, want an error", cfg)
		}
	}
}
