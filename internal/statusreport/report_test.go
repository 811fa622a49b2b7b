package statusreport

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/podspec"
)

// statusServer answers PUTs with a status the test sets, keeping the
// bodies, in process.
type statusServer struct {
	mu     sync.Mutex // guards all fields
	status int
	puts   []*http.Request
	bodies []Report
}

func (s *statusServer) RoundTrip(r *http.Request) (*http.Response, error) {
	body, _ := io.ReadAll(r.Body)
	var rep Report
	if err := json.Unmarshal(body, &rep); err != nil {
		return nil, fmt.Errorf("body is not a report: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.puts = append(s.puts, r)
	s.bodies = append(s.bodies, rep)
	rec := httptest.NewRecorder()
	rec.WriteHeader(s.status)
	return rec.Result(), nil
}

func (s *statusServer) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.puts)
}

// TestStatusReporterSchedule drives the reporter's checks by hand on a
// fake clock with the jitter fixed (0.5: none), so every PUT and every
// absence of one is exact: the first report, nothing while nothing
// changes, the first periodic report spread over the period, a change
// debounced to 5 s after the last PUT, the periodic
// report, back-off while the server fails (logged once, counted), and the
// recovery.
func TestStatusReporterSchedule(t *testing.T) {
	srv := &statusServer{status: http.StatusCreated}
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	state := Report{Node: "edge-1", Pods: []PodReport{{Namespace: "default", Name: "web-edge-1", Phase: v1.PodPending}}}
	r := New(Config{
		URL: "https://fleet.example/status/edge-1.json?sig=t0ken", Header: http.Header{"Authorization": {"Bearer x"}},
		Client: &http.Client{Transport: srv}, Period: 5 * time.Minute, Rand: func() float64 { return 0.5 },
		Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil)), Metrics: reg,
	}, func() Report { return state })
	ctx := context.Background()
	// at steps the clock to offset since the start and runs one check; it
	// returns whether that check PUT a report.
	start := clk.Now()
	at := func(offset time.Duration) bool {
		t.Helper()
		clk.SetTime(start.Add(offset))
		before := srv.count()
		r.check(ctx)
		return srv.count() > before
	}
	const b = 150 * time.Second // the first periodic report
	for _, st := range []struct {
		offset time.Duration
		change func()
		put    bool
		why    string
	}{
		{0, nil, true, "the first report"},
		{2 * time.Second, nil, false, "nothing changed"},
		{b - time.Millisecond, nil, false, "the first periodic report is spread over the period: 0.5 of 5m"},
		{b, nil, true, "the first periodic report"},
		{b + 4*time.Second, func() { state.Pods[0].Phase = v1.PodRunning }, false, "a change within 5s of the last PUT waits"},
		{b + 5*time.Second, nil, true, "the change, 5s after the last PUT"},
		{b + 7*time.Second, func() { state.Pods[0].Restarts = 1 }, false, "debounced"},
		{b + 9*time.Second, func() { state.Pods[0].Restarts = 2 }, false, "debounced"},
		{b + 10*time.Second, nil, true, "the latest state"},
		{b + 5*time.Minute - time.Millisecond, nil, false, "the period is not over: reports of changes do not move it"},
		{b + 5*time.Minute, nil, true, "the periodic report"},
		{b + 5*time.Minute + 6*time.Second, func() { srv.status = http.StatusForbidden; state.Ready = true }, true, "a change; the server refuses it"},
		{b + 5*time.Minute + 12*time.Second, nil, false, "back-off after the 1st failure: 7.5s"},
		{b + 5*time.Minute + 14*time.Second, nil, true, "retry, refused again"},
		{b + 5*time.Minute + 25*time.Second, nil, false, "back-off after the 2nd failure: 15s"},
		{b + 5*time.Minute + 30*time.Second, func() { srv.status = http.StatusNoContent }, true, "retry, accepted"},
		{b + 5*time.Minute + 36*time.Second, nil, false, "delivered: nothing changed"},
		{b + 10*time.Minute - time.Millisecond, nil, false, "the next periodic report is a period after the last"},
		{b + 10*time.Minute, nil, true, "the next periodic report"},
	} {
		if st.change != nil {
			srv.mu.Lock()
			st.change()
			srv.mu.Unlock()
		}
		if got := at(st.offset); got != st.put {
			t.Fatalf("at +%s (%s): PUT %v, want %v", st.offset, st.why, got, st.put)
		}
	}

	last := srv.bodies[len(srv.bodies)-1]
	if last.Node != "edge-1" || !last.Ready || last.Pods[0].Restarts != 2 || last.Pods[0].Phase != v1.PodRunning ||
		!last.Time.Equal(start.Add(b+10*time.Minute)) {
		t.Errorf("last report %+v", last)
	}
	req := srv.puts[0]
	if req.Method != http.MethodPut || req.Header.Get("Authorization") != "Bearer x" || req.Header.Get("Content-Type") != "application/json" {
		t.Errorf("request %s with headers %v", req.Method, req.Header)
	}
	if got := testutil.ToFloat64(r.reports.WithLabelValues("error")); got != 2 {
		t.Errorf("errors counted: %v, want 2", got)
	}
	if got := testutil.ToFloat64(r.reports.WithLabelValues("ok")); got != 7 {
		t.Errorf("reports counted: %v, want 7", got)
	}
	out := logs.String()
	if n := strings.Count(out, "status report failed"); n != 1 {
		t.Errorf("the failure is logged %d times, want once:\n%s", n, out)
	}
	if !strings.Contains(out, "status report delivered again") {
		t.Errorf("the recovery is not logged:\n%s", out)
	}
	if strings.Contains(out, "t0ken") || !strings.Contains(out, "sig=REDACTED") {
		t.Errorf("the log does not redact the URL:\n%s", out)
	}
}

// TestStatusReporterRunStops checks Run reports on its ticker and returns,
// leaving no goroutine, when its context ends; a server that never answers
// does not keep it.
func TestStatusReporterRunStops(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	hang := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(hang)
	clk := &tickerClock{FakeClock: clocktesting.NewFakeClock(time.Now()), started: make(chan struct{}, 1)}
	snapshots := make(chan struct{}, 1)
	r := New(Config{URL: srv.URL, Client: srv.Client(), Clock: clk,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		func() Report {
			select {
			case snapshots <- struct{}{}:
			default:
			}
			return Report{}
		})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	<-clk.started
	clk.Step(statusCheckPeriod)
	<-snapshots // the check runs, its PUT hangs
	cancel()
	<-done
}

// TestReportContent checks what a report carries of a pod and a problem:
// summaries, never an environment value, a command or a problem's message,
// and a body bounded whatever the number of pods.
func TestReportContent(t *testing.T) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-edge-1", Namespace: "default", UID: "u1"},
		Spec: v1.PodSpec{Containers: []v1.Container{
			{Name: "a", Command: []string{"run", "--password=s3cret"}, Env: []v1.EnvVar{{Name: "PW", Value: "s3cret"}}},
			{Name: "b"},
		}},
		Status: v1.PodStatus{Phase: v1.PodRunning, Message: "s3cret", ContainerStatuses: []v1.ContainerStatus{
			{Name: "a", Ready: true, RestartCount: 1, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}},
			{Name: "b", RestartCount: 3, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "s3cret"}}},
		}},
	}
	prob := podspec.Problem{
		Source: podspec.SourceFile, Origin: "/etc/kubernetes/manifests/db.yaml", Line: 7, Field: "spec.containers[0].env[0].value",
		Reason: podspec.ReasonInvalid, Message: `Invalid value: "s3cret"`, Name: "db-edge-1", Namespace: "default",
	}
	rep := Report{Node: "edge-1", BerthVersion: "v1.2", Pods: []PodReport{PodOf(pod)}, Problems: []ProblemReport{ProblemOf(prob)}}
	body, dropped := boundReport(rep)
	if dropped || strings.Contains(string(body), "s3cret") {
		t.Fatalf("report %s (truncated %v)", body, dropped)
	}
	want := `{"node":"edge-1","berthVersion":"v1.2","time":"0001-01-01T00:00:00Z","ready":false,` +
		`"pods":[{"namespace":"default","name":"web-edge-1","uid":"u1","phase":"Running","ready":"1/2","restarts":4,"reason":"CrashLoopBackOff"}],` +
		`"problems":[{"source":"file","origin":"/etc/kubernetes/manifests/db.yaml","line":7,"field":"spec.containers[0].env[0].value","reason":"Invalid","pod":"default/db-edge-1"}]}`
	if string(body) != want {
		t.Errorf("report\n%s\nwant\n%s", body, want)
	}
	for i := range 3000 {
		rep.Pods = append(rep.Pods, PodReport{Namespace: "default", Name: fmt.Sprintf("pod-with-a-long-name-%04d-edge-1", i), UID: strings.Repeat("u", 36)})
		rep.Problems = append(rep.Problems, ProblemReport{Source: "file", Origin: fmt.Sprintf("/etc/kubernetes/manifests/%04d.yaml", i), Reason: "Invalid"})
	}
	body, dropped = boundReport(rep)
	var back Report
	if err := json.Unmarshal(body, &back); err != nil || !dropped || !back.Truncated || len(body) > maxStatusReportBytes || len(back.Pods) == 0 {
		t.Errorf("3000 pods: %d bytes, truncated %v/%v, %d pods kept, %v", len(body), dropped, back.Truncated, len(back.Pods), err)
	}
}

// tickerClock is a fake clock that says when Run has started its ticker,
// so the test steps the clock only once Run waits on it.
type tickerClock struct {
	*clocktesting.FakeClock
	started chan struct{}
}

func (c *tickerClock) NewTicker(d time.Duration) clock.Ticker {
	defer func() { c.started <- struct{}{} }()
	return c.FakeClock.NewTicker(d)
}
