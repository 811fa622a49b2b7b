package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/podevents"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podstatus"
)

var apiT0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// apiBed is an API over pods the test sets, served on a real unix socket
// and a loopback TCP port.
type apiBed struct {
	api     *Server
	pods    *fakePods
	clock   *clocktesting.FakeClock
	logsDir string
	socket  string
	tcp     string
	unix    *http.Client
}

// fakePods stands in for the sync loop: the pods the test puts in its
// status store, typed as the sync loop serves them, its events, one
// manifest problem (bad-node1, shown as a refused pod) and the health the
// test sets.
type fakePods struct {
	status   *podstatus.Store
	events   *podevents.Log
	problems []podspec.Problem

	mu             sync.Mutex // guards healthy and ready
	healthy, ready error
}

func (f *fakePods) Healthy() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.healthy
}

func (f *fakePods) Ready() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ready
}

func (f *fakePods) setHealth(healthy, ready error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.healthy, f.ready = healthy, ready
}

func typed(p *v1.Pod) *v1.Pod {
	cp := *p
	cp.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	return &cp
}

func (f *fakePods) Pods() []*v1.Pod {
	pods := f.status.List()
	for i, p := range pods {
		pods[i] = typed(p)
	}
	return pods
}

func (f *fakePods) Pod(namespace, name string) *v1.Pod {
	pods := f.status.Named(namespace, name)
	if len(pods) == 0 {
		return nil
	}
	return typed(pods[0])
}

func (f *fakePods) Events(uid types.UID) []podevents.Event { return f.events.List(uid) }

func (f *fakePods) Problems() []podspec.Problem { return f.problems }

func (f *fakePods) Changed() <-chan struct{} { return f.status.Changed() }

func (f *fakePods) AllEvents() []podevents.Record { return f.events.All() }

func (f *fakePods) EventsChanged() <-chan struct{} { return f.events.Changed() }

func newAPIBed(t testing.TB, configure ...func(*Server)) *apiBed {
	t.Helper()
	clk := clocktesting.NewFakeClock(apiT0)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	prob := podspec.Problem{
		Source: podspec.SourceFile, Origin: "/etc/kubernetes/manifests/bad.yaml", Line: 7, Field: "spec.containers[0].image",
		Reason: podspec.ReasonInvalid, Message: "Required value", Name: "bad-node1", Namespace: "default",
	}
	pods := &fakePods{status: podstatus.NewStore(), events: podevents.New(clk, log), problems: []podspec.Problem{prob},
		healthy: errors.New("sync loop has not started"), ready: errors.New("not ready: waiting for every pod source to deliver")}
	pods.status.Set(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: prob.Name, Namespace: prob.Namespace}},
		v1.PodStatus{Phase: v1.PodFailed, Reason: prob.Reason, Message: prob.Error()})
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector())
	b := &apiBed{pods: pods, clock: clk, logsDir: t.TempDir(), socket: filepath.Join(t.TempDir(), "run", "berth.sock")}
	api := New(pods, Options{PodLogsDir: b.logsDir, Metrics: reg, Clock: clk, Logger: log, Version: "v1.2.3-test", Revision: "0123abcd"})
	b.api = api
	for _, f := range configure {
		f(api)
	}
	if err := api.Listen("127.0.0.1:0", b.socket); err != nil {
		t.Fatal(err)
	}
	b.tcp = api.listeners[0].Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- api.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	b.unix = &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", b.socket)
	}}}
	return b
}

// get fetches path over the socket (or TCP) and returns status and body.
func (b *apiBed) get(t *testing.T, path string, overTCP bool) (int, string) {
	t.Helper()
	client, base := b.unix, "http://berth"
	if overTCP {
		client, base = http.DefaultClient, "http://"+b.tcp
	}
	resp, err := client.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// webPod runs container web in its third attempt; the second one failed.
func webPod() (*v1.Pod, v1.PodStatus) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "default", UID: "uid-web"},
		Spec:       v1.PodSpec{NodeName: "node1", Containers: []v1.Container{{Name: "web", Image: "busybox:1.36"}}},
	}
	st := v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{
		Name: "web", ContainerID: "containerd://c3", RestartCount: 2,
		State:                v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(apiT0)}},
		LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", ContainerID: "containerd://c2"}},
	}}}
	return pod, st
}

// twoPod has an init container and two app containers; app "b" backs off
// after its first run.
func twoPod() (*v1.Pod, v1.PodStatus) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "two-node1", Namespace: "kube-system", UID: "uid-two"},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "setup"}},
			Containers:     []v1.Container{{Name: "a"}, {Name: "b"}, {Name: "c"}},
		},
	}
	st := v1.PodStatus{
		InitContainerStatuses: []v1.ContainerStatus{{Name: "setup", ContainerID: "containerd://s0",
			State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", ContainerID: "containerd://s0"}}}},
		ContainerStatuses: []v1.ContainerStatus{
			{Name: "a", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "Back-off pulling image \"nope:1\""}}},
			{Name: "b", ContainerID: "containerd://b0", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 2, ContainerID: "containerd://b0"}}},
			{Name: "c", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}},
		},
	}
	return pod, st
}

func (b *apiBed) writeLog(t *testing.T, pod *v1.Pod, container, file, content string) string {
	t.Helper()
	dir := filepath.Join(b.logsDir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID), container)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, file)
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestAPIPods(t *testing.T) {
	b := newAPIBed(t)
	pod, st := webPod()
	b.pods.status.Set(pod, st)

	code, body := b.get(t, "/pods", false)
	if code != http.StatusOK {
		t.Fatalf("/pods: %d %s", code, body)
	}
	var list v1.PodList
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	if list.APIVersion != "v1" || list.Kind != "PodList" {
		t.Errorf("list type = %s/%s, want v1/PodList", list.APIVersion, list.Kind)
	}
	if len(list.Items) != 2 || list.Items[0].Name != "bad-node1" || list.Items[1].Name != "web-node1" {
		t.Fatalf("items = %+v, want bad-node1 and web-node1", list.Items)
	}
	bad := list.Items[0]
	if bad.Status.Phase != v1.PodFailed || bad.Status.Reason != "Invalid" || !strings.Contains(bad.Status.Message, "bad.yaml:7: spec.containers[0].image: Required value") {
		t.Errorf("rejected pod status = %+v", bad.Status)
	}
	if list.Items[1].Kind != "Pod" || list.Items[1].Status.ContainerStatuses[0].RestartCount != 2 {
		t.Errorf("web pod = %+v", list.Items[1])
	}

	code, body = b.get(t, "/pods/default/web-node1", false)
	var one v1.Pod
	if code != http.StatusOK || json.Unmarshal([]byte(body), &one) != nil || one.Kind != "Pod" || one.UID != "uid-web" {
		t.Errorf("/pods/default/web-node1: %d %s", code, body)
	}
	if code, body := b.get(t, "/pods/default/nope", false); code != http.StatusNotFound || !strings.Contains(body, "pod default/nope not found") {
		t.Errorf("missing pod: %d %s", code, body)
	}
}

func TestAPIEvents(t *testing.T) {
	b := newAPIBed(t)
	pod, st := webPod()
	b.pods.status.Set(pod, st)
	ev := b.pods.events
	ev.Event(pod.UID, pod.Name, pod.Namespace, kuberuntime.EventNormal, "Pulled", `Container image "busybox:1.36" already present on machine`)
	b.clock.Step(time.Second)
	ev.Event(pod.UID, pod.Name, pod.Namespace, kuberuntime.EventWarning, "BackOff", "Back-off restarting failed container web")
	b.clock.Step(time.Second)
	ev.Event(pod.UID, pod.Name, pod.Namespace, kuberuntime.EventWarning, "BackOff", "Back-off restarting failed container web")
	ev.Event("other", "x", "default", kuberuntime.EventNormal, "Started", "not this pod's")

	code, body := b.get(t, "/pods/default/web-node1/events", false)
	if code != http.StatusOK {
		t.Fatalf("%d %s", code, body)
	}
	var list v1.EventList
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "EventList" || len(list.Items) != 2 {
		t.Fatalf("list = %+v", list)
	}
	e := list.Items[1]
	if e.Reason != "BackOff" || e.Type != "Warning" || e.Count != 2 || !e.FirstTimestamp.Time.Equal(apiT0.Add(time.Second)) ||
		!e.LastTimestamp.Time.Equal(apiT0.Add(2*time.Second)) || e.InvolvedObject.Name != "web-node1" || e.InvolvedObject.UID != "uid-web" ||
		e.Source.Component != "berth" || e.Source.Host != "node1" {
		t.Errorf("event = %+v", e)
	}

	// A rejected manifest has no events: an empty list, not null.
	if code, body := b.get(t, "/pods/default/bad-node1/events", false); code != http.StatusOK || !strings.Contains(body, `"items": []`) {
		t.Errorf("rejected pod events: %d %s", code, body)
	}
	if code, _ := b.get(t, "/pods/default/nope/events", false); code != http.StatusNotFound {
		t.Errorf("missing pod events: %d", code)
	}
}

// TestAPIHealthAndReadiness: /healthz and /readyz answer 200 "ok" while
// the sync loop says so, else 503 with its reason; /metrics serves the
// registry.
func TestAPIHealthAndReadiness(t *testing.T) {
	b := newAPIBed(t)
	if code, body := b.get(t, "/healthz", true); code != http.StatusServiceUnavailable || !strings.Contains(body, "sync loop has not started") {
		t.Errorf("before start: %d %s", code, body)
	}
	if code, body := b.get(t, "/readyz", true); code != http.StatusServiceUnavailable || !strings.Contains(body, "not ready") {
		t.Errorf("not ready: %d %s", code, body)
	}
	b.pods.setHealth(errFake("container runtime unreachable: connection refused"), nil)
	if code, body := b.get(t, "/healthz", false); code != http.StatusServiceUnavailable || !strings.Contains(body, "runtime unreachable") {
		t.Errorf("runtime down: %d %s", code, body)
	}
	if code, body := b.get(t, "/readyz", true); code != http.StatusOK || body != "ok" {
		t.Errorf("ready: %d %s", code, body)
	}
	b.pods.setHealth(nil, nil)
	if code, body := b.get(t, "/healthz", true); code != http.StatusOK || body != "ok" {
		t.Errorf("healthy: %d %s", code, body)
	}

	if code, body := b.get(t, "/metrics", true); code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics: %d %.200s", code, body)
	}
}

type errFake string

func (e errFake) Error() string { return string(e) }

func TestAPILogs(t *testing.T) {
	b := newAPIBed(t)
	web, webSt := webPod()
	b.pods.status.Set(web, webSt)
	two, twoSt := twoPod()
	b.pods.status.Set(two, twoSt)
	b.writeLog(t, web, "web", "2.log", "2026-11-21T12:00:00Z stdout F current 1\n2026-11-21T12:00:01Z stderr P curr\n2026-11-21T12:00:02Z stderr F ent 2\n")
	b.writeLog(t, web, "web", "1.log", "2026-11-21T11:00:00Z stdout F previous\n")
	b.writeLog(t, web, "web", "0.log", "2026-11-21T10:00:00Z stdout F first\n")
	b.writeLog(t, two, "setup", "0.log", "2026-11-21T10:00:00Z stdout F prepared\n")
	b.writeLog(t, two, "b", "0.log", "2026-11-21T10:00:00Z stderr F crashed\n")

	tests := []struct {
		name     string
		path     string
		wantCode int
		want     string
	}{
		{"only container by default", "/pods/default/web-node1/log", 200, "current 1\ncurrent 2\n"},
		{"tail and timestamps", "/pods/default/web-node1/log?container=web&tailLines=1&timestamps=true", 200, "2026-11-21T12:00:01Z current 2\n"},
		{"previous is the newest earlier attempt", "/pods/default/web-node1/log?previous=true", 200, "previous\n"},
		{"terminated init container", "/pods/kube-system/two-node1/log?container=setup", 200, "prepared\n"},
		{"backing-off container shows its last run", "/pods/kube-system/two-node1/log?container=b", 200, "crashed\n"},
		{"backing-off container's previous is that run too", "/pods/kube-system/two-node1/log?container=b&previous=1", 200, "crashed\n"},
		{"several containers need a name", "/pods/kube-system/two-node1/log", 400, "a container name must be specified for pod two-node1, choose one of: [setup a b c]\n"},
		{"unknown container", "/pods/default/web-node1/log?container=db", 400, "container db is not valid for pod web-node1: choose one of: [web]\n"},
		{"image pull back-off", "/pods/kube-system/two-node1/log?container=a", 400, "container \"a\" in pod \"two-node1\" is waiting to start: trying and failing to pull image: Back-off pulling image \"nope:1\"\n"},
		{"creating", "/pods/kube-system/two-node1/log?container=c", 400, "container \"c\" in pod \"two-node1\" is waiting to start: ContainerCreating\n"},
		{"no previous", "/pods/kube-system/two-node1/log?container=setup&previous=true", 400, "previous terminated container \"setup\" in pod \"two-node1\" not found\n"},
		{"rejected manifest", "/pods/default/bad-node1/log", 400, "pod \"bad-node1\" has no containers: /etc/kubernetes/manifests/bad.yaml:7: spec.containers[0].image: Required value\n"},
		{"bad tail", "/pods/default/web-node1/log?tailLines=-3", 400, "tailLines=\"-3\": want a number of lines, 0 or more\n"},
		{"bad bool", "/pods/default/web-node1/log?follow=yes", 400, "follow=\"yes\": want true or false\n"},
		{"missing pod", "/pods/default/nope/log", 404, "pod default/nope not found\n"},
		{"sinceTime leaves out earlier records", "/pods/default/web-node1/log?sinceTime=2026-11-21T12:00:01Z&timestamps=true", 200, "2026-11-21T12:00:01Z current 2\n"},
		{"sinceTime with an offset", "/pods/default/web-node1/log?sinceTime=2026-11-21T13:00:00%2B01:00", 200, "current 1\ncurrent 2\n"},
		{"sinceSeconds counts back from now", "/pods/default/web-node1/log?previous=true&sinceSeconds=3600", 200, "previous\n"},
		{"sinceSeconds past every record", "/pods/default/web-node1/log?previous=true&sinceSeconds=1", 200, ""},
		{"since and tail", "/pods/default/web-node1/log?tailLines=1&sinceSeconds=10", 200, "current 2\n"},
		{"sinceSeconds and sinceTime", "/pods/default/web-node1/log?sinceSeconds=5&sinceTime=2026-11-21T12:00:00Z", 400,
			"sinceSeconds=\"5\" and sinceTime=\"2026-11-21T12:00:00Z\": at most one of them may be given\n"},
		{"sinceSeconds 0", "/pods/default/web-node1/log?sinceSeconds=0", 400, "sinceSeconds=\"0\": want a number of seconds, 1 or more\n"},
		{"sinceTime not RFC 3339", "/pods/default/web-node1/log?sinceTime=yesterday", 400, "sinceTime=\"yesterday\": want an RFC 3339 time such as YYYY-MM-DDThh:mm:ssZ\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := b.get(t, tt.path, false)
			if code != tt.wantCode || body != tt.want {
				t.Errorf("got %d %q, want %d %q", code, body, tt.wantCode, tt.want)
			}
		})
	}

	t.Run("not over TCP", func(t *testing.T) {
		code, body := b.get(t, "/pods/default/web-node1/log", true)
		if code != http.StatusForbidden || !strings.Contains(body, "unix socket only") {
			t.Errorf("got %d %q", code, body)
		}
	})
	t.Run("missing file says why", func(t *testing.T) {
		os.Remove(filepath.Join(b.logsDir, "default_web-node1_uid-web", "web", "2.log"))
		code, body := b.get(t, "/pods/default/web-node1/log", false)
		if code != http.StatusNotFound || !strings.Contains(body, "--pod-logs-dir") {
			t.Errorf("got %d %q", code, body)
		}
	})
}

// TestAPILogsFollow streams a running container's log and ends the stream
// once the container has exited.
func TestAPILogsFollow(t *testing.T) {
	b := newAPIBed(t)
	pod, st := webPod()
	b.pods.status.Set(pod, st)
	path := b.writeLog(t, pod, "web", "2.log", "2026-11-21T12:00:00Z stdout F old\n2026-11-21T12:00:01Z stdout F hello\n")

	resp, err := b.unix.Get("http://berth/pods/default/web-node1/log?follow=true&tailLines=1")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("status %d, content type %q", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	lines := bufio.NewReader(resp.Body)
	expectLine := func(want string) {
		t.Helper()
		got, err := lines.ReadString('\n')
		if err != nil || got != want {
			t.Fatalf("line %q (%v), want %q", got, err, want)
		}
	}
	expectLine("hello\n")
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteString("2026-11-21T12:00:02Z stdout F world\n")
	expectLine("world\n")

	f.WriteString("2026-11-21T12:00:03Z stdout F bye\n")
	exited := st.DeepCopy()
	exited.ContainerStatuses[0].State = v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0, ContainerID: "containerd://c3"}}
	b.pods.status.Set(pod, *exited)
	expectLine("bye\n")
	done := make(chan error, 1)
	go func() { _, err := lines.ReadString('\n'); done <- err }()
	select {
	case err := <-done:
		if err != io.EOF {
			t.Errorf("after the container exited: %v, want EOF", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream did not end after the container exited")
	}
}

// TestAPISocket checks what Listen promises about the unix socket: its
// directory is created, a stale socket is replaced, the mode is 0660, and
// it is removed when the API stops.
func TestAPISocket(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run", "berth")
	socket := filepath.Join(dir, "berth.sock")
	// A socket left by a crashed run: bound, then abandoned.
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stale, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()

	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	pods := &fakePods{status: podstatus.NewStore()}
	api := New(pods, Options{Metrics: prometheus.NewRegistry(), Logger: log})
	if err := api.Listen("", socket); err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	info, err := os.Stat(socket)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode()&os.ModeSocket == 0 || info.Mode().Perm() != 0o660 {
		t.Errorf("socket mode = %v, want a socket with 0660", info.Mode())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- api.Serve(ctx) }()
	conn, err := net.Dial("unix", socket)
	if err != nil {
		t.Fatalf("dial the socket: %v", err)
	}
	conn.Close()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(socket); !os.IsNotExist(err) {
		t.Errorf("socket still there after Serve returned: %v", err)
	}

	// A directory in the socket's place is not something to delete.
	if err := os.MkdirAll(socket, 0o755); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(socket, "keep"), nil, 0o644)
	api2 := New(pods, Options{Metrics: prometheus.NewRegistry(), Logger: log})
	if err := api2.Listen("", socket); err == nil || !strings.Contains(err.Error(), socket) {
		t.Errorf("Listen over a directory: %v, want an error naming it", err)
	}
}

func TestAPIProblems(t *testing.T) {
	b := newAPIBed(t)
	code, body := b.get(t, "/problems", false)
	var list problemList
	if code != http.StatusOK || json.Unmarshal([]byte(body), &list) != nil || len(list.Items) != 1 {
		t.Fatalf("/problems: %d %s", code, body)
	}
	want := problem{Source: "file", Origin: "/etc/kubernetes/manifests/bad.yaml", Line: 7, Field: "spec.containers[0].image",
		Reason: "Invalid", Message: "Required value", Name: "bad-node1", Namespace: "default",
		Error: "/etc/kubernetes/manifests/bad.yaml:7: spec.containers[0].image: Required value"}
	if list.Items[0] != want {
		t.Errorf("problem = %+v, want %+v", list.Items[0], want)
	}
}

func TestAPIMetricsUncompressed(t *testing.T) {
	b := newAPIBed(t)
	req, err := http.NewRequest(http.MethodGet, "http://"+b.tcp+"/metrics", nil)
	if err != nil {
		t.Fatal(err)
	}
	// Asking explicitly turns off the transport's transparent decompression,
	// so the response shows what the server sent.
	req.Header.Set("Accept-Encoding", "gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if enc := resp.Header.Get("Content-Encoding"); enc != "" {
		t.Errorf("/metrics answered with Content-Encoding %q; a local endpoint must not pay for compression", enc)
	}
}

// TestAPIVersion: /version serves the version and revision berth was built
// with, as the API server's version.Info, on the socket and on TCP whatever
// --listen-pods says: it is not secret.
func TestAPIVersion(t *testing.T) {
	for _, exposure := range []Exposure{ExposeNone, ExposeFull} {
		b := newAPIBed(t, func(api *Server) { api.exposure = exposure })
		for _, overTCP := range []bool{false, true} {
			code, body := b.get(t, "/version", overTCP)
			var info version.Info
			if code != http.StatusOK || json.Unmarshal([]byte(body), &info) != nil {
				t.Fatalf("%s, TCP %v: /version: %d %s", exposure, overTCP, code, body)
			}
			want := version.Info{GitVersion: "v1.2.3-test", GitCommit: "0123abcd", GoVersion: runtime.Version(), Compiler: runtime.Compiler,
				Platform: runtime.GOOS + "/" + runtime.GOARCH, GitTreeState: info.GitTreeState}
			if info != want {
				t.Errorf("%s, TCP %v: /version = %+v, want %+v", exposure, overTCP, info, want)
			}
		}
	}
	if v := versionInfo("", ""); v.GitVersion != "dev" {
		t.Errorf("no version given: gitVersion %q, want dev", v.GitVersion)
	}
}
