package prober

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/podplan"
)

var t0 = time.Unix(1_700_000_000, 0)

// scripted is a probe handler that answers from a script, one result per
// call, and counts its calls.
type scripted struct {
	mu      sync.Mutex // guards results and calls
	results []Result
	err     error
	calls   int
	called  chan time.Time // gets the fake time of each call, if set
	clock   *clocktesting.FakeClock
}

func (s *scripted) handle(context.Context, *worker, target) (Result, string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.called != nil {
		s.called <- s.clock.Now()
	}
	if s.err != nil {
		return Unknown, "", s.err
	}
	if len(s.results) == 0 {
		return Success, "ok", nil
	}
	r := s.results[0]
	s.results = s.results[1:]
	return r, fmt.Sprintf("scripted %s", r), nil
}

func (s *scripted) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// events is a Recorder keeping "Type Reason: message" lines.
type events struct {
	mu   sync.Mutex // guards list
	list []string
}

func (e *events) Event(_ types.UID, _, _ string, typ kuberuntime.EventType, reason, message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, fmt.Sprintf("%s %s: %s", typ, reason, message))
}

func (e *events) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.list
	e.list = nil
	return l
}

// testEnv is a Manager on a fake clock with a scripted handler, whose
// workers are driven by hand (doProbe) unless a test starts them.
type testEnv struct {
	m       *Manager
	clock   *clocktesting.FakeClock
	probe   *scripted
	events  *events
	mu      sync.Mutex // guards changes
	changes []types.UID
}

func newTestEnv(t *testing.T) *testEnv {
	t.Helper()
	env := &testEnv{clock: clocktesting.NewFakeClock(t0), events: &events{}}
	env.probe = &scripted{clock: env.clock}
	env.m = NewManager(Options{Clock: env.clock, Recorder: env.events, OnChange: func(uid types.UID) {
		env.mu.Lock()
		defer env.mu.Unlock()
		env.changes = append(env.changes, uid)
	}})
	env.m.handle = env.probe.handle
	t.Cleanup(env.m.Stop)
	return env
}

func (e *testEnv) takeChanges() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := len(e.changes)
	e.changes = nil
	return n
}

// probePod is a pod "web" with one container "app" and the given probes.
func probePod(liveness, readiness, startup *v1.Probe) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "uid-1", Name: "web-node", Namespace: "default"}}
	pod.Spec.RestartPolicy = v1.RestartPolicyAlways
	pod.Spec.Containers = []v1.Container{{Name: "app", Image: "busybox", LivenessProbe: liveness, ReadinessProbe: readiness, StartupProbe: startup}}
	return pod
}

// execProbe is an exec probe with the given thresholds, period 10s.
func execProbe(success, failure int32) *v1.Probe {
	return &v1.Probe{
		ProbeHandler:     v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}},
		PeriodSeconds:    10,
		TimeoutSeconds:   1,
		SuccessThreshold: success,
		FailureThreshold: failure,
	}
}

// running is a runtime status with container "app" running as run id.
func running(pod *v1.Pod, id string, startedAt time.Time) *podplan.PodStatus {
	return &podplan.PodStatus{UID: pod.UID, IPs: []string{"10.88.0.9"}, Containers: []*podplan.ContainerStatus{
		{ID: id, Name: "app", State: podplan.ContainerStateRunning, StartedAt: startedAt},
	}}
}

// handWorker registers a worker for pod's "app" container and kind k that
// no goroutine runs: the test calls doProbe itself.
func (e *testEnv) handWorker(pod *v1.Pod, k Kind) *worker {
	e.m.mu.Lock()
	defer e.m.mu.Unlock()
	pp := e.m.pods[pod.UID]
	if pp == nil {
		pp = &podProbes{pod: pod, workers: map[workerKey]*worker{}, killed: map[string]string{}}
		e.m.pods[pod.UID] = pp
	}
	ctx, cancel := context.WithCancel(e.m.ctx)
	w := &worker{m: e.m, uid: pod.UID, pod: "default/web-node", name: pod.Name, namespace: pod.Namespace,
		container: "app", kind: k, spec: probeOf(&pod.Spec.Containers[0], k), ctx: ctx, cancel: cancel, trigger: make(chan struct{}, 1)}
	pp.workers[workerKey{container: "app", kind: k}] = w
	return w
}

func TestThresholds(t *testing.T) {
	S, F := Success, Failure
	tests := []struct {
		name     string
		kind     Kind
		success  int32
		failure  int32
		script   []Result
		reported []Result // the worker's result after each probe
	}{
		{name: "readiness starts not ready and needs successThreshold successes", kind: Readiness, success: 2, failure: 3,
			script: []Result{S, S, F, F, F, S}, reported: []Result{F, S, S, S, F, F}},
		{name: "readiness with threshold 1 follows every probe", kind: Readiness, success: 1, failure: 1,
			script: []Result{S, F, S}, reported: []Result{S, F, S}},
		{name: "a broken streak starts over", kind: Readiness, success: 1, failure: 2,
			script: []Result{S, F, S, F, F}, reported: []Result{S, S, S, S, F}},
		{name: "liveness starts alive and fails at failureThreshold", kind: Liveness, success: 1, failure: 3,
			script: []Result{F, F, S, F, F, F}, reported: []Result{S, S, S, S, S, F}},
		{name: "startup starts unknown", kind: Startup, success: 1, failure: 2,
			script: []Result{F, F}, reported: []Result{Unknown, F}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newTestEnv(t)
			p := execProbe(tt.success, tt.failure)
			var pod *v1.Pod
			switch tt.kind {
			case Liveness:
				pod = probePod(p, nil, nil)
			case Readiness:
				pod = probePod(nil, p, nil)
			default:
				pod = probePod(nil, nil, p)
			}
			w := env.handWorker(pod, tt.kind)
			env.m.UpdatePod(pod, running(pod, "c1", t0), "")
			env.probe.results = slices.Clone(tt.script)
			var got []Result
			for range tt.script {
				if !w.doProbe() {
					t.Fatal("worker stopped")
				}
				got = append(got, env.m.result("c1", tt.kind))
			}
			if !slices.Equal(got, tt.reported) {
				t.Errorf("reported %v, want %v", got, tt.reported)
			}
		})
	}
}

// TestLivenessFailureHoldsUntilNewRun: a liveness failure is reported once,
// probing stops until the container's next run, which starts alive.
func TestLivenessFailureHoldsUntilNewRun(t *testing.T) {
	env := newTestEnv(t)
	pod := probePod(execProbe(1, 2), nil, nil)
	w := env.handWorker(pod, Liveness)
	env.m.UpdatePod(pod, running(pod, "c1", t0), "")
	env.probe.results = []Result{Failure, Failure, Failure, Failure}
	w.doProbe()
	w.doProbe()
	if !env.m.LivenessFailed("c1") {
		t.Fatal("LivenessFailed(c1) = false after 2 failures with threshold 2")
	}
	if n := env.takeChanges(); n != 1 {
		t.Errorf("%d change notifications, want 1", n)
	}
	w.doProbe()
	if env.probe.count() != 2 {
		t.Errorf("probed %d times, want 2: a failed container is not probed until it runs again", env.probe.count())
	}
	env.m.UpdatePod(pod, running(pod, "c2", t0.Add(time.Minute)), "")
	w.doProbe()
	if env.probe.count() != 3 {
		t.Errorf("probed %d times, want the new run probed", env.probe.count())
	}
	if env.m.LivenessFailed("c2") || env.m.LivenessFailed("c1") {
		t.Error("the new run inherited the failure, or the old run's result was kept")
	}
	if env.m.result("c2", Liveness) != Success {
		t.Errorf("new run's liveness = %v after one failure below threshold, want Success", env.m.result("c2", Liveness))
	}
}

// TestStartupGates: liveness and readiness wait for the startup probe;
// once it passed, the startup probe is not run again.
func TestStartupGates(t *testing.T) {
	env := newTestEnv(t)
	pod := probePod(execProbe(1, 1), execProbe(1, 1), execProbe(1, 3))
	startup := env.handWorker(pod, Startup)
	live := env.handWorker(pod, Liveness)
	ready := env.handWorker(pod, Readiness)
	env.m.UpdatePod(pod, running(pod, "c1", t0), "")

	env.probe.results = []Result{Failure}
	live.doProbe()
	ready.doProbe()
	startup.doProbe()
	if env.probe.count() != 1 {
		t.Fatalf("%d probes, want only the startup probe", env.probe.count())
	}
	if env.m.Ready("uid-1", "app") {
		t.Error("ready before startup passed")
	}
	env.probe.results = []Result{Success}
	startup.doProbe()
	if env.m.result("c1", Startup) != Success {
		t.Fatal("startup did not pass")
	}
	for _, w := range []*worker{live, ready} {
		select {
		case <-w.trigger:
		default:
			t.Errorf("%s worker not triggered when startup passed", w.kind)
		}
	}
	before := env.probe.count()
	startup.doProbe()
	if env.probe.count() != before {
		t.Error("startup probed after it passed")
	}
	env.probe.results = []Result{Success, Success}
	live.doProbe()
	ready.doProbe()
	if env.probe.count() != before+2 {
		t.Errorf("%d probes, want liveness and readiness probed after startup", env.probe.count()-before)
	}
	if !env.m.Ready("uid-1", "app") {
		t.Error("not ready after startup and readiness passed")
	}
}

func TestInitialDelay(t *testing.T) {
	env := newTestEnv(t)
	p := execProbe(1, 1)
	p.InitialDelaySeconds = 5
	pod := probePod(nil, p, nil)
	w := env.handWorker(pod, Readiness)
	env.m.UpdatePod(pod, running(pod, "c1", t0), "")
	env.clock.Step(4 * time.Second)
	w.doProbe()
	if env.probe.count() != 0 {
		t.Fatal("probed within the initial delay")
	}
	env.clock.Step(time.Second)
	w.doProbe()
	if env.probe.count() != 1 {
		t.Fatal("not probed once the initial delay was over")
	}
}

// TestBrokenProbe: a probe that could not run keeps the result and says so
// in an event; failures are Unhealthy events with the output.
func TestBrokenProbe(t *testing.T) {
	env := newTestEnv(t)
	pod := probePod(nil, execProbe(1, 1), nil)
	w := env.handWorker(pod, Readiness)
	env.m.UpdatePod(pod, running(pod, "c1", t0), "")
	env.probe.results = []Result{Success}
	w.doProbe()
	env.events.take()
	env.probe.err = errors.New("container is gone")
	w.doProbe()
	if env.m.result("c1", Readiness) != Success {
		t.Error("a broken probe changed the result")
	}
	env.probe.err = nil
	env.probe.results = []Result{Failure}
	w.doProbe()
	want := []string{"Warning Unhealthy: Readiness probe errored: container is gone", "Warning Unhealthy: Readiness probe failed: scripted Failure"}
	if got := env.events.take(); !slices.Equal(got, want) {
		t.Errorf("events = %q, want %q", got, want)
	}
}

// TestContainerExit: a readiness worker reports an exited container not
// ready, keeps going while the container will be restarted and stops when
// it will not.
func TestContainerExit(t *testing.T) {
	tests := []struct {
		policy v1.RestartPolicy
		exit   int32
		keep   bool
	}{
		{v1.RestartPolicyAlways, 0, true},
		{v1.RestartPolicyOnFailure, 1, true},
		{v1.RestartPolicyOnFailure, 0, false},
		{v1.RestartPolicyNever, 1, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s-%d", tt.policy, tt.exit), func(t *testing.T) {
			env := newTestEnv(t)
			pod := probePod(nil, execProbe(1, 1), nil)
			pod.Spec.RestartPolicy = tt.policy
			w := env.handWorker(pod, Readiness)
			env.m.UpdatePod(pod, running(pod, "c1", t0), "")
			w.doProbe()
			st := running(pod, "c1", t0)
			st.Containers[0].State, st.Containers[0].ExitCode = podplan.ContainerStateExited, tt.exit
			env.m.UpdatePod(pod, st, "")
			if keep := w.doProbe(); keep != tt.keep {
				t.Errorf("keep going = %v, want %v", keep, tt.keep)
			}
			if env.m.result("c1", Readiness) != Failure {
				t.Error("an exited container is still ready")
			}
		})
	}
}

// TestAnnotateStatus: started follows the startup probe, and a container a
// liveness failure killed says so in its terminated state.
func TestAnnotateStatus(t *testing.T) {
	env := newTestEnv(t)
	pod := probePod(execProbe(1, 1), nil, execProbe(1, 1))
	startup := env.handWorker(pod, Startup)
	live := env.handWorker(pod, Liveness)
	env.m.UpdatePod(pod, running(pod, "c1", t0), "")
	yes := true
	st := v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "app", Started: &yes,
		State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}}
	env.m.AnnotateStatus("uid-1", &st)
	if *st.ContainerStatuses[0].Started {
		t.Error("started before the startup probe passed")
	}
	env.probe.results = []Result{Success, Failure}
	startup.doProbe()
	live.doProbe()
	if !env.m.LivenessFailed("c1") || env.m.StartupFailed("c1") {
		t.Fatal("want c1 failed liveness, not startup")
	}
	// The next status: c1 was killed, c2 runs.
	rs := running(pod, "c2", t0.Add(time.Minute))
	rs.Containers = append(rs.Containers, &podplan.ContainerStatus{ID: "c1", Name: "app", State: podplan.ContainerStateExited, ExitCode: 137})
	env.m.UpdatePod(pod, rs, "")
	st = v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "app", Started: &yes,
		State:                v1.ContainerState{Running: &v1.ContainerStateRunning{}},
		LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 137, ContainerID: "containerd://c1"}}}}}
	env.m.AnnotateStatus("uid-1", &st)
	if msg := st.ContainerStatuses[0].LastTerminationState.Terminated.Message; msg != "Container app failed liveness probe" {
		t.Errorf("lastState message = %q", msg)
	}
	// Once the runtime forgot c1, so does the manager.
	env.m.UpdatePod(pod, running(pod, "c2", t0.Add(time.Minute)), "")
	env.m.mu.Lock()
	n := len(env.m.pods["uid-1"].killed)
	env.m.mu.Unlock()
	if n != 0 {
		t.Errorf("%d kill records kept for containers the runtime no longer has", n)
	}
}

// TestKillReasonBeforeKill: the lane told of a failed liveness probe kills
// the container and may build the pod's status at once, so the reason for
// the kill must be recorded by the time the lane is told.
func TestKillReasonBeforeKill(t *testing.T) {
	for _, k := range []Kind{Liveness, Startup} {
		t.Run(k.String(), func(t *testing.T) {
			env := newTestEnv(t)
			pod := probePod(nil, nil, nil)
			spec := execProbe(1, 1)
			if k == Liveness {
				pod.Spec.Containers[0].LivenessProbe = spec
			} else {
				pod.Spec.Containers[0].StartupProbe = spec
			}
			w := env.handWorker(pod, k)
			env.m.UpdatePod(pod, running(pod, "c1", t0), "")
			var msgs []string
			env.m.onChange = func(uid types.UID) {
				st := v1.PodStatus{ContainerStatuses: []v1.ContainerStatus{{Name: "app",
					State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ContainerID: "containerd://c1"}}}}}
				env.m.AnnotateStatus(uid, &st)
				msgs = append(msgs, st.ContainerStatuses[0].State.Terminated.Message)
			}
			env.probe.results = []Result{Failure}
			w.doProbe()
			want := fmt.Sprintf("Container app failed %s probe", strings.ToLower(k.String()))
			if len(msgs) != 1 || msgs[0] != want {
				t.Errorf("terminated messages seen by the lane = %q, want [%q]", msgs, want)
			}
		})
	}
}

func TestReadyWithoutProbes(t *testing.T) {
	env := newTestEnv(t)
	pod := probePod(execProbe(1, 1), nil, nil)
	if !env.m.Ready("unknown", "app") {
		t.Error("a pod without probes is not ready")
	}
	env.handWorker(pod, Liveness)
	env.m.UpdatePod(pod, running(pod, "c1", t0), "")
	if !env.m.Ready("uid-1", "app") {
		t.Error("a container without readiness or startup probe is not ready once running")
	}
}
