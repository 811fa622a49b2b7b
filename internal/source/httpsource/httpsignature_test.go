package httpsource

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podspec/podspectest"
	"github.com/berth-agent/berth/internal/source/signature"
	"github.com/berth-agent/berth/internal/source/signature/signaturetest"
	"github.com/berth-agent/berth/internal/source/sourcemetrics"
	"github.com/berth-agent/berth/internal/store"
	"github.com/prometheus/client_golang/prometheus"
)

// pathServer serves a fixed answer per path, with ETags, remembering the
// requests; an unknown path is 404.
type pathServer struct {
	mu       sync.Mutex // guards all fields
	answers  map[string]pathAnswer
	requests []*http.Request
}

type pathAnswer struct {
	status int
	etag   string
	body   string
}

func (f *pathServer) set(path string, a pathAnswer) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.answers[path] = a
}

func (f *pathServer) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

// RoundTrip answers in process, as fakeServer does.
func (f *pathServer) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	f.requests = append(f.requests, r)
	a, ok := f.answers[r.URL.Path]
	f.mu.Unlock()
	signal() // the request is counted
	rec := httptest.NewRecorder()
	switch {
	case !ok:
		rec.WriteHeader(http.StatusNotFound)
	case a.etag != "" && r.Header.Get("If-None-Match") == a.etag:
		rec.WriteHeader(http.StatusNotModified)
	default:
		if a.etag != "" {
			rec.Header().Set("ETag", a.etag)
		}
		rec.WriteHeader(a.status)
		io.WriteString(rec, a.body)
	}
	return rec.Result(), nil
}

// signedBody is a PodList of pods at image img with a serial line.
func signedBody(serial int, img string, names ...string) string {
	var pods []string
	for _, n := range names {
		pods = append(pods, podspectest.Manifest(n, img))
	}
	return fmt.Sprintf("# berth.io/serial: %d\n", serial) + podspectest.List(pods...)
}

// TestHTTPSourceSigned walks a signed URL source through what a fleet
// sees: a signed body runs; a tampered, unsigned, replayed or serial-less
// body changes nothing, is a problem and a counted failure, logged once;
// a body published before its signature is taken one poll later; and
// after a restart the persisted serial still refuses a replay.
func TestHTTPSourceSigned(t *testing.T) {
	ops, intruder := signaturetest.NewKey(t, 1), signaturetest.NewKey(t, 2)
	signers := mustSigners(t, "ops@example.com "+ops.Pub+"\n")
	stateDir := t.TempDir()
	fake := &pathServer{answers: map[string]pathAnswer{}}
	clk := newClock(time.Now())
	reg := prometheus.NewRegistry()
	metrics := sourcemetrics.New(reg)
	var log syncBuffer
	cfg := Config{
		NodeName: podspectest.Node, URL: "https://m.example/fleet/pods.yaml?token=t1", HTTPCheckFrequency: time.Minute,
		// No jitter, and a refused body's back-off capped at the period:
		// every poll is due one step of the clock after the last.
		HTTPBackoffMax: time.Minute, Rand: func() float64 { return 0.5 },
		HTTPClient: &http.Client{Transport: fake}, Clock: clk, StateDir: stateDir,
		URLSigners: signers, Metrics: metrics, Logger: slog.New(slog.NewTextHandler(&log, nil)),
	}
	serve := func(etag, body string, sig []byte) {
		fake.set("/fleet/pods.yaml", pathAnswer{http.StatusOK, etag, body})
		if sig == nil {
			fake.set("/fleet/pods.yaml.sig", pathAnswer{status: http.StatusNotFound})
		} else {
			fake.set("/fleet/pods.yaml.sig", pathAnswer{http.StatusOK, "", string(sig)})
		}
	}
	failures := func(reason string) int {
		return int(signatureFailures(t, reg, podspec.SourceHTTP, reason))
	}
	const origin = "https://m.example/fleet/pods.yaml?token=REDACTED"
	// freshness checks the source's gauges: the serial it runs, when it
	// last succeeded and last tried.
	freshness := func(serial uint64, success, attempt time.Time) {
		t.Helper()
		if got := gauge(t, reg, "berth_source_accepted_serial", podspec.SourceHTTP, origin); got != float64(serial) {
			t.Errorf("accepted serial %v, want %d", got, serial)
		}
		if got := gauge(t, reg, "berth_source_last_success_timestamp_seconds", podspec.SourceHTTP, origin); got != unixSeconds(success) {
			t.Errorf("last success %v, want %v", got, unixSeconds(success))
		}
		if got := gauge(t, reg, "berth_source_last_attempt_timestamp_seconds", podspec.SourceHTTP, origin); got != unixSeconds(attempt) {
			t.Errorf("last attempt %v, want %v", got, unixSeconds(attempt))
		}
	}

	// run starts the source and returns a poll function: it steps the
	// fake clock (after the first poll), waits until the server answered
	// at least want requests and the store merged that poll's snapshot.
	run := func() (*store.Store, func(requests int), func()) {
		st := store.New(podspec.SourceHTTP)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		// The first poll starts at once: count the requests from before
		// the source runs, each poll's from the end of the previous one.
		seen := fake.count()
		go func() { _ = runSource(ctx, cfg, st); close(done) }()
		polls := 0
		poll := func(requests int) {
			t.Helper()
			if polls > 0 {
				// The source arms its next poll after the store took the
				// last one: a step before that would be missed.
				eventually(t, "the source waiting for its next poll", clk.HasWaiters)
				clk.Step(time.Minute)
			}
			polls++
			eventually(t, "the poll's requests", func() bool { return fake.count() >= seen+requests })
			eventually(t, "the poll's snapshot", func() bool { return st.Applied() == int64(polls) })
			seen = fake.count()
		}
		return st, poll, func() { cancel(); <-done }
	}
	// The source polls as soon as it runs: serve the body first.
	body2 := signedBody(2, "img:2", "a", "b")
	serve(`"2"`, body2, ops.Sign(t, []byte(body2), signature.Namespace))
	st, poll, stop := run()
	poll(2)
	if got := next(t, st); got != "ADD a-node1 img:2\nADD b-node1 img:2" {
		t.Fatalf("signed body: %q", got)
	}
	if got := problemsOf(st); got != "" {
		t.Fatalf("signed body: problems %q", got)
	}
	if !strings.Contains(log.String(), `msg="signed manifest accepted" source=http url="https://m.example/fleet/pods.yaml?token=REDACTED" origin="https://m.example/fleet/pods.yaml?token=REDACTED" serial=2 signer=ops@example.com`) {
		t.Fatalf("log lacks the accepted serial:\n%s", log.String())
	}
	freshness(2, clk.Now(), clk.Now())
	poll(1) // 304: the signature is not fetched again
	noUpdate(t, st)
	freshness(2, clk.Now(), clk.Now()) // a 304 is a success
	succeeded := clk.Now()

	body3 := signedBody(3, "img:3", "a", "b")
	sig3 := ops.Sign(t, []byte(body3), signature.Namespace)
	body1 := signedBody(1, "img:1", "a", "b")
	noSerial := podspectest.List(podspectest.Manifest("a", "img:9"))
	for _, tt := range []struct {
		name, body string
		sig        []byte
		sigStatus  int // instead of the signature
		reason     string
		msg        string
	}{
		{"tampered", strings.Replace(body3, "img:3", "evil:1", 1), sig3, 0, signature.ReasonBadSignature, "does not match the body"},
		{"unsigned", body3, nil, 0, signature.ReasonUnsigned, "no signature (.sig) beside the body"},
		{"intruder", body3, intruder.Sign(t, []byte(body3), signature.Namespace), 0, signature.ReasonBadSignature, "not in allowed_signers"},
		{"replayed", body1, ops.Sign(t, []byte(body1), signature.Namespace), 0, signature.ReasonReplayed, "serial 1 is older than 2"},
		{"no serial", noSerial, ops.Sign(t, []byte(noSerial), signature.Namespace), 0, signature.ReasonNoSerial, "first line of a signed manifest"},
		{"signature unreachable", body3, nil, http.StatusBadGateway, ReasonUnreachable, "(signature): server answered 502"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			before := failures(tt.reason)
			serve(`"x-`+tt.name+`"`, tt.body, tt.sig)
			if tt.sigStatus != 0 {
				fake.set("/fleet/pods.yaml.sig", pathAnswer{status: tt.sigStatus})
			}
			poll(2)
			poll(2) // refused bodies are fetched in full again, not 304
			noUpdate(t, st)
			ps := st.Problems()
			if len(ps) != 1 || ps[0].Reason != tt.reason || !strings.Contains(ps[0].Message, tt.msg) {
				t.Fatalf("problems %+v, want one %s saying %q", ps, tt.reason, tt.msg)
			}
			if got := len(st.Pods()); got != 2 {
				t.Fatalf("%d pods after a refused body, want the 2 running", got)
			}
			if want := before + 2; tt.reason != ReasonUnreachable && failures(tt.reason) != want {
				t.Fatalf("failures{%s} = %d, want %d", tt.reason, failures(tt.reason), want)
			}
			if n := strings.Count(log.String(), tt.msg); n != 1 {
				t.Fatalf("the problem is logged %d times, want once:\n%s", n, log.String())
			}
			freshness(2, succeeded, clk.Now()) // a refused body is no success
		})
	}
	if failures(ReasonUnreachable) != 0 {
		t.Fatal("a server error counted as a signature failure")
	}

	// Body published before its signature: refused, then taken at the
	// next poll although the body's ETag did not change.
	serve(`"3"`, body3, ops.Sign(t, []byte(body2), signature.Namespace))
	poll(2)
	noUpdate(t, st)
	serve(`"3"`, body3, sig3)
	poll(2)
	if got := next(t, st); got != "REMOVE a-node1 img:2\nREMOVE b-node1 img:2" {
		t.Fatalf("serial 3: %q", got)
	}
	if got := next(t, st); got != "ADD a-node1 img:3\nADD b-node1 img:3" {
		t.Fatalf("serial 3: %q", got)
	}
	if got := problemsOf(st); got != "" {
		t.Fatalf("serial 3: problems %q", got)
	}
	freshness(3, clk.Now(), clk.Now())
	stop()

	// A restart: the last good pods come back from the state dir, and
	// serial 2, validly signed, is still refused.
	serve(`"2"`, body2, ops.Sign(t, []byte(body2), signature.Namespace))
	st, poll, stop = run()
	defer stop()
	poll(2)
	if got := next(t, st); got != "ADD a-node1 img:3\nADD b-node1 img:3" {
		t.Fatalf("after restart: %q", got)
	}
	if got := problemsOf(st); got != "Replayed pods.yaml?token=REDACTED " {
		t.Fatalf("after restart: problems %q", got)
	}
}

// TestHTTPSourceSignedSerialPerPod checks that a signed URL body's serial
// is bound to the pods it defines, not to the URL alone: when the URL
// changes (a URL template whose label changed), an older signed version of
// a pod served at the new URL is refused, an equal one accepted.
func TestHTTPSourceSignedSerialPerPod(t *testing.T) {
	ops := signaturetest.NewKey(t, 1)
	fake := &pathServer{answers: map[string]pathAnswer{}}
	serve := func(path, body string) {
		fake.set(path, pathAnswer{http.StatusOK, "", body})
		fake.set(path+".sig", pathAnswer{http.StatusOK, "", string(ops.Sign(t, []byte(body), signature.Namespace))})
	}
	stateDir := t.TempDir()
	serve("/site-a/pods.yaml", signedBody(2, "img:2", "web"))
	serve("/site-b/pods.yaml", signedBody(1, "img:1", "web", "db"))
	serve("/site-c/pods.yaml", signedBody(2, "img:2c", "web"))
	for _, tt := range []struct {
		path, pods, problem string
	}{
		{"/site-a/pods.yaml", "web-node1 img:2", ""},
		{"/site-b/pods.yaml", "", `Replayed pods.yaml : signed manifest refused: serial 1 is older than 2, the last one accepted for pod "web-node1" in namespace "default"`},
		{"/site-c/pods.yaml", "web-node1 img:2c", ""},
	} {
		src := startSources(t, Config{URL: "https://m.example" + tt.path, HTTPClient: &http.Client{Transport: fake},
			StateDir: stateDir, URLSigners: mustSigners(t, ops.Pub)})
		eventually(t, tt.path+" answered", func() bool { return src.store.SourcesReady() || len(src.store.Problems()) > 0 })
		var problems []string
		for _, p := range src.store.Problems() {
			problems = append(problems, p.Reason+" "+path.Base(p.Origin)+" "+p.Field+": "+p.Message)
		}
		if got := strings.Join(problems, "\n"); tt.problem == "" && got != "" || !strings.HasPrefix(got, tt.problem) {
			t.Fatalf("%s: problems %q, want %q", tt.path, got, tt.problem)
		}
		if got := podLines(src.store); got != tt.pods {
			t.Fatalf("%s: pods %q, want %q", tt.path, got, tt.pods)
		}
		src.stop()
	}
}
