package kuberuntime

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	fakeapi "k8s.io/cri-api/pkg/apis/testing"
	utilexec "k8s.io/utils/exec"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/handlers"
	"github.com/berth-agent/berth/internal/podplan"
	"github.com/berth-agent/berth/internal/runtimewatch/runtimewatchtest"
)

// execRecorder is the fake runtime plus the exec calls it forgets, each
// answered from a script (nil: exit 0); block makes ExecSync wait for its
// context.
type execRecorder struct {
	*fakeapi.FakeRuntimeService
	mu       sync.Mutex // guards cmds, timeouts
	cmds     [][]string
	timeouts []time.Duration
	answer   error
	block    bool
}

func (e *execRecorder) ExecSync(ctx context.Context, id string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	e.mu.Lock()
	e.cmds = append(e.cmds, cmd)
	e.timeouts = append(e.timeouts, timeout)
	e.mu.Unlock()
	if e.block {
		<-ctx.Done()
		return nil, nil, ctx.Err()
	}
	return nil, []byte("hook says no"), e.answer
}

// hookPod is a pod with one container "app" with the given lifecycle.
func hookPod(l *v1.Lifecycle, grace int64) *v1.Pod {
	pod, c := imagePod("busybox:1.36", "")
	c.Lifecycle = l
	pod.Spec.TerminationGracePeriodSeconds = &grace
	return pod
}

// TestPostStartFailureKillsTheContainer: a postStart hook that exits
// non-zero is a FailedPostStartHook event, the container is killed, and
// the start is a PostStartHookError.
func TestPostStartFailureKillsTheContainer(t *testing.T) {
	f := newSyncFixture(t)
	ex := &execRecorder{FakeRuntimeService: f.rt, answer: utilexec.CodeExitError{Err: errors.New("exit 3"), Code: 3}}
	f.m.runtime = ex
	pod := syncPod("app")
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"setup"}}}}
	res := syncPlanned(context.Background(), f.m, pod, nil)
	se := res.Waiting("app")
	if se == nil || se.Reason != ReasonPostStartHookError {
		t.Fatalf("waiting = %+v, want %s", se, ReasonPostStartHookError)
	}
	if !reflect.DeepEqual(ex.cmds, [][]string{{"setup"}}) || ex.timeouts[0] != 0 {
		t.Errorf("exec calls %v with timeouts %v, want setup without a timeout", ex.cmds, ex.timeouts)
	}
	if calls := f.calls(); !slices.Contains(calls, "StopContainer") {
		t.Errorf("calls = %v, want the container stopped", calls)
	}
	f.events.mu.Lock()
	reasons, msgs := slices.Clone(f.events.reasons), slices.Clone(f.events.msgs)
	f.events.mu.Unlock()
	want := []string{"Pulled", "Created", "Started", "FailedPostStartHook", "Killing"}
	if !slices.Equal(reasons, want) {
		t.Fatalf("events = %v, want %v", reasons, want)
	}
	if msgs[3] != `PostStartHook failed: command "setup" exited with 3: hook says no` {
		t.Errorf("FailedPostStartHook message = %q", msgs[3])
	}
	if msgs[4] != "Container app failed its postStart hook, will be killed" {
		t.Errorf("Killing message = %q", msgs[4])
	}
}

// TestPostStartHTTP: an httpGet hook goes to the pod's IP (here the test
// server's) with the named port; any answer is success, as in the kubelet.
func TestPostStartHTTP(t *testing.T) {
	var got string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.URL.Path + " " + r.UserAgent()
		w.WriteHeader(http.StatusInternalServerError)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	env := newCRITestEnv(t)
	c := &v1.Container{Name: "app", Ports: []v1.ContainerPort{{Name: "admin", ContainerPort: int32(port)}}, Lifecycle: &v1.Lifecycle{
		PostStart: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/warm", Port: intstr.FromString("admin")}},
	}}
	if err := env.m.runPostStart(context.Background(), c, "c1", []string{u.Hostname()}); err != nil {
		t.Fatal(err)
	}
	if got != "/warm "+handlers.LifecycleUserAgent {
		t.Errorf("server saw %q", got)
	}
	srv.Close()
	if err := env.m.runPostStart(context.Background(), c, "c1", []string{u.Hostname()}); err == nil {
		t.Error("a hook without an answer succeeded")
	}
}

// TestPreStop runs KillContainer with preStop hooks: the hook gets the
// whole grace period, its time comes off StopContainer's, one that outlives
// the grace period is abandoned, failures are FailedPreStopHook events,
// and an orphan's hook comes from its annotation.
func TestPreStop(t *testing.T) {
	exitErr := utilexec.CodeExitError{Err: errors.New("exit 1"), Code: 1}
	sleep := func(s int64) *v1.LifecycleHandler { return &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: s}} }
	exec := &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"drain"}}}
	tests := []struct {
		name       string
		hook       *v1.LifecycleHandler
		orphan     bool
		grace      int64
		answer     error
		block      bool
		step       time.Duration // fake time the hook takes
		waiters    int           // fake-clock timers to wait for before stepping
		wantStop   int64
		wantExec   bool
		wantEvents []string
	}{
		{name: "exec", hook: exec, grace: 30, wantStop: 30, wantExec: true, wantEvents: []string{"Killing"}},
		{name: "exec fails", hook: exec, grace: 30, answer: exitErr, wantStop: 30, wantExec: true, wantEvents: []string{"Killing", "FailedPreStopHook"}},
		{name: "exec outlives the grace period", hook: exec, grace: 5, block: true, step: 5 * time.Second, waiters: 1, wantStop: 2, wantExec: true,
			wantEvents: []string{"Killing", "FailedPreStopHook"}},
		{name: "sleep within grace", hook: sleep(7), grace: 30, step: 7 * time.Second, waiters: 2, wantStop: 23, wantEvents: []string{"Killing"}},
		{name: "sleep abandoned at grace", hook: sleep(60), grace: 10, step: 10 * time.Second, waiters: 2, wantStop: 2, wantEvents: []string{"Killing", "FailedPreStopHook"}},
		{name: "orphan's hook from its annotation", hook: exec, orphan: true, grace: 30, wantStop: 30, wantExec: true, wantEvents: []string{"Killing"}},
		{name: "no hook", grace: 30, wantStop: 30, wantEvents: []string{"Killing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent()) // the e2e build shares a test bed with its own goroutines
			synctest.Test(t, func(t *testing.T) {
				env := newCRITestEnv(t)
				stops := newStopRecorder(env.rs, 0)
				ex := &execRecorder{FakeRuntimeService: env.rs, answer: tt.answer, block: tt.block}
				env.m.runtime = struct {
					*execRecorder
					stopper
				}{ex, stops}
				fc := runtimewatchtest.FakeContainer("c1", "s1", "uid-1", 0)
				fc.Annotations[criconfig.AnnotationPodGracePeriod] = strconv.FormatInt(tt.grace, 10)
				var pod *v1.Pod
				if tt.orphan {
					b, _ := json.Marshal(tt.hook)
					fc.Annotations[criconfig.AnnotationPreStopHook] = string(b)
				} else {
					var l *v1.Lifecycle
					if tt.hook != nil {
						l = &v1.Lifecycle{PreStop: tt.hook}
					}
					pod = hookPod(l, tt.grace)
				}
				env.rs.SetFakeContainers([]*fakeapi.FakeContainer{fc})
				c := &podplan.ContainerStatus{ID: "c1", SandboxID: "s1", Name: "app", State: podplan.ContainerStateRunning, Labels: fc.Labels, Annotations: fc.Annotations}
				done := make(chan error, 1)
				go func() { done <- env.m.KillContainer(context.Background(), pod, c, "test", "", nil) }()
				if tt.step > 0 {
					waitForWaiters(t, env, tt.waiters)
					env.clock.Step(tt.step)
				}
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				if got := stops.timeouts["c1"]; got != tt.wantStop {
					t.Errorf("StopContainer timeout = %d, want %d", got, tt.wantStop)
				}
				if ran := len(ex.cmds) > 0; ran != tt.wantExec {
					t.Errorf("exec ran = %v, want %v", ran, tt.wantExec)
				}
				if tt.wantExec && ex.timeouts[0] != time.Duration(tt.grace)*time.Second {
					t.Errorf("exec timeout = %v, want the grace period", ex.timeouts[0])
				}
				var reasons []string
				for _, e := range env.events.take() {
					reasons = append(reasons, strings.SplitN(strings.SplitN(e, ": ", 2)[0], " ", 2)[1])
				}
				if !slices.Equal(reasons, tt.wantEvents) {
					t.Errorf("events = %v, want %v", reasons, tt.wantEvents)
				}
			})
		})
	}
}

// stopper is the part of the runtime stopRecorder answers.
type stopper interface {
	StopContainer(ctx context.Context, id string, timeout int64) error
}

// waitForWaiters waits until every goroutine of the test's synctest bubble
// is parked and checks that the preStop path waits on n fake-clock timers
// (the grace deadline, and a sleep hook's own): stepping earlier would leave
// a timer made after the step waiting forever.
func waitForWaiters(t *testing.T, env *criTestEnv, n int) {
	t.Helper()
	synctest.Wait()
	if got := env.clock.Waiters(); got < n {
		t.Fatalf("the preStop hook waits on %d fake-clock timers, want %d", got, n)
	}
}

// TestKillContainerProbeGrace: a liveness kill uses the probe's own grace
// period.
func TestKillContainerProbeGrace(t *testing.T) {
	env := newCRITestEnv(t)
	stops := newStopRecorder(env.rs, 0)
	env.m.runtime = stops
	fc := runtimewatchtest.FakeContainer("c1", "s1", "uid-1", 0)
	env.rs.SetFakeContainers([]*fakeapi.FakeContainer{fc})
	pod := hookPod(nil, 30)
	g := int64(4)
	pod.Spec.Containers[0].LivenessProbe = &v1.Probe{TerminationGracePeriodSeconds: &g}
	c := &podplan.ContainerStatus{ID: "c1", Name: "app", State: podplan.ContainerStateRunning, Labels: fc.Labels, Annotations: fc.Annotations}
	if err := env.m.KillContainer(context.Background(), pod, c, podplan.KillReasonLivenessProbe, "Container app failed liveness probe, will be restarted", nil); err != nil {
		t.Fatal(err)
	}
	if got := stops.timeouts["c1"]; got != 4 {
		t.Errorf("StopContainer timeout = %d, want the probe's 4", got)
	}
}
