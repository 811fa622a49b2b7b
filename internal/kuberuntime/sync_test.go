package kuberuntime

import (
	"context"
	"errors"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeri "k8s.io/cri-api/pkg/apis/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/podplan"
)

// syncRecorder keeps event reasons in order.
type syncRecorder struct {
	mu      sync.Mutex
	reasons []string
	msgs    []string
}

func (r *syncRecorder) Event(_ types.UID, _, _ string, _ EventType, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reasons = append(r.reasons, reason)
	r.msgs = append(r.msgs, message)
}

func (r *syncRecorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.reasons
	r.reasons, r.msgs = nil, nil
	return out
}

// syncFixture is a Manager over the fakes with a fake clock and recorder.
type syncFixture struct {
	m      *Manager
	rt     *fakeri.FakeRuntimeService
	img    *fakeri.FakeImageService
	clock  *clocktesting.FakeClock
	events *syncRecorder
}

func newSyncFixture(t *testing.T) *syncFixture {
	t.Helper()
	f := &syncFixture{clock: clocktesting.NewFakeClock(time.Unix(1_000_000, 0)), events: &syncRecorder{}}
	f.m, f.rt, f.img = newCfgManager(t, Options{Clock: f.clock, Recorder: f.events})
	f.img.SetFakeImages([]string{"busybox:1.36"})
	return f
}

// calls returns and clears the runtime and image calls so far.
func (f *syncFixture) calls() []string {
	f.rt.Lock()
	rt := f.rt.Called
	f.rt.Called = nil
	f.rt.Unlock()
	f.img.Lock()
	img := f.img.Called
	f.img.Called = nil
	f.img.Unlock()
	return append(rt, img...)
}

func syncPod(containers ...string) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "prod", UID: "uid-s"},
		Spec:       v1.PodSpec{RestartPolicy: v1.RestartPolicyAlways},
	}
	for _, n := range containers {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{
			Name: n, Image: "busybox:1.36", Command: []string{"sleep", "3600"},
			Env: []v1.EnvVar{{Name: "IP", ValueFrom: field("status.podIP")}},
		})
	}
	return pod
}

// managed are the labels KillContainer and KillPod insist on.
var managed = map[string]string{criconfig.LabelManaged: "true"}

// runningSandbox registers a ready sandbox with the fake and returns its status.
func (f *syncFixture) runningSandbox(pod *v1.Pod) *podplan.SandboxStatus {
	f.rt.SetFakeSandboxes([]*fakeri.FakePodSandbox{{PodSandboxStatus: runtimeapi.PodSandboxStatus{
		Id: "sb1", State: runtimeapi.PodSandboxState_SANDBOX_READY,
		Metadata: &runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID)},
	}}})
	return &podplan.SandboxStatus{ID: "sb1", State: podplan.SandboxStateReady, IP: "10.88.0.3", Labels: managed}
}

// exitedStatus is the pod with its one container exited at finished.
func exitedStatus(pod *v1.Pod, sb *podplan.SandboxStatus, restarts int, finished time.Time) *podplan.PodStatus {
	c := &pod.Spec.Containers[0]
	return &podplan.PodStatus{UID: pod.UID, IPs: []string{sb.IP}, Sandboxes: []*podplan.SandboxStatus{sb}, Containers: []*podplan.ContainerStatus{{
		ID: "c-" + string(rune('0'+restarts)), SandboxID: sb.ID, Name: c.Name, State: podplan.ContainerStateExited, ExitCode: 1,
		FinishedAt: finished, Hash: criconfig.HashContainer(c), RestartCount: restarts, Labels: managed,
	}}}
}

// syncPlanned is one sync as a pod worker without probes makes it: the
// plan PlanPod computes from the status, handed to SyncPod.
func syncPlanned(ctx context.Context, m *Manager, pod *v1.Pod, status *podplan.PodStatus) SyncResult {
	plan := m.PlanPod(pod, status, nil)
	return m.SyncPod(ctx, pod, status, &plan, SyncOptions{})
}

// TestSyncPodWithoutPlan: a sync without a plan is refused, with no
// runtime call, rather than planned behind its caller's back.
func TestSyncPodWithoutPlan(t *testing.T) {
	f := newSyncFixture(t)
	res := f.m.SyncPod(context.Background(), syncPod("app"), nil, nil, SyncOptions{})
	if err := res.Error(); !errors.Is(err, ErrNoPlan) {
		t.Fatalf("SyncPod without a plan: error %v, want ErrNoPlan", err)
	}
	if len(res.Results) != 1 || res.Results[0].Action != ActionSyncPod || res.Results[0].Target != "web-node1" {
		t.Errorf("results = %+v, want one SyncPod result for web-node1", res.Results)
	}
	if got := f.calls(); len(got) != 0 {
		t.Errorf("CRI calls = %v, want none", got)
	}
}

// TestSyncPodTakesThePlanItIsGiven: SyncPod carries out the plan it is
// handed, not one of its own: an empty plan for a pod with no sandbox
// does nothing.
func TestSyncPodTakesThePlanItIsGiven(t *testing.T) {
	f := newSyncFixture(t)
	res := f.m.SyncPod(context.Background(), syncPod("app"), nil, &podplan.PodActions{}, SyncOptions{})
	if err := res.Error(); err != nil || len(res.Results) != 0 {
		t.Fatalf("SyncPod of an empty plan = %+v, %v; want nothing done", res.Results, err)
	}
	if got := f.calls(); len(got) != 0 {
		t.Errorf("CRI calls = %v, want none", got)
	}
}

func TestSyncPodNewPodCallsTheMinimum(t *testing.T) {
	f := newSyncFixture(t)
	pod := syncPod("app")
	pod.Spec.RuntimeClassName = new("runc")
	res := syncPlanned(context.Background(), f.m, pod, nil)
	if err := res.Error(); err != nil {
		t.Fatal(err)
	}
	want := []string{"RunPodSandbox", "PodSandboxStatus", "CreateContainer", "StartContainer", "ImageStatus"}
	if got := f.calls(); !reflect.DeepEqual(got, want) {
		t.Errorf("CRI calls = %v, want %v", got, want)
	}
	wantRes := []ActionResult{{Action: ActionCreatePodSandbox, Target: "web-node1"}, {Action: ActionStartContainer, Target: "app"}}
	if !reflect.DeepEqual(res.Results, wantRes) {
		t.Errorf("results = %+v, want %+v", res.Results, wantRes)
	}
	if res.Terminal || res.RetryAfter() != 0 || res.Waiting("app") != nil {
		t.Errorf("terminal %v, retry %v, waiting %v", res.Terminal, res.RetryAfter(), res.Waiting("app"))
	}
	if got, want := f.events.take(), []string{"Pulled", "Created", "Started"}; !reflect.DeepEqual(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}

	sb := f.rt.Sandboxes[fakeri.BuildSandboxName(&runtimeapi.PodSandboxMetadata{Name: pod.Name, Namespace: pod.Namespace, Uid: string(pod.UID)})]
	if sb == nil || sb.RuntimeHandler != "runc" {
		t.Fatalf("sandbox = %+v, want one with handler runc", sb)
	}
	if _, err := os.Stat(f.m.PodLogDir(&podplan.PodStatus{UID: pod.UID, Name: pod.Name, Namespace: pod.Namespace})); err != nil {
		t.Errorf("log directory not created: %v", err)
	}
	if _, err := os.Stat(mustPath(t)(f.m.PodDir(pod.UID))); err != nil {
		t.Errorf("pod directory not created: %v", err)
	}
	var ctr *fakeri.FakeContainer
	for _, c := range f.rt.Containers {
		ctr = c
	}
	if ctr == nil || ctr.SandboxID != sb.Id || ctr.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Fatalf("container = %+v", ctr)
	}
	if ctr.Metadata.Attempt != 0 || ctr.Annotations[criconfig.AnnotationContainerRestartCount] != "0" {
		t.Errorf("first start has attempt %d", ctr.Metadata.Attempt)
	}

	// The worker's re-read right after SyncPod needs the new container's
	// status, but not the sandbox's again: SyncPod already read it. The
	// runtime's name (the container ID's scheme) is read on this first
	// status of a container, and never again.
	st, err := f.m.PodStatus(context.Background(), pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := f.calls(), []string{"ListPodSandbox", "ListContainers", "ContainerStatus", "Version"}; !reflect.DeepEqual(got, want) {
		t.Errorf("re-read after SyncPod: CRI calls = %v, want %v", got, want)
	}
	if len(st.Sandboxes) != 1 || st.Sandboxes[0].ID != sb.Id || st.Sandboxes[0].State != podplan.SandboxStateReady {
		t.Errorf("re-read sandbox = %+v", st.Sandboxes)
	}
}

func TestSyncPodCrashLoopBackoff(t *testing.T) {
	f := newSyncFixture(t)
	pod := syncPod("app")
	sb := f.runningSandbox(pod)
	ctx := context.Background()

	// First exit: restarted at once, and the back-off starts at 10s.
	res := syncPlanned(ctx, f.m, pod, exitedStatus(pod, sb, 0, f.clock.Now()))
	if err := res.Error(); err != nil {
		t.Fatal(err)
	}
	if got, want := f.calls(), []string{"CreateContainer", "StartContainer", "ImageStatus"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("calls = %v, want %v", got, want)
	}
	f.events.take()

	// It exits again right away: back-off 10s, no runtime call.
	f.clock.Step(time.Second)
	st := exitedStatus(pod, sb, 1, f.clock.Now())
	res = syncPlanned(ctx, f.m, pod, st)
	w := res.Waiting("app")
	if w == nil || w.Reason != ReasonCrashLoopBackOff {
		t.Fatalf("waiting = %v, want CrashLoopBackOff", w)
	}
	if want := "back-off 10s restarting failed container=app pod=web-node1_prod(uid-s)"; w.Message != want {
		t.Errorf("message = %q, want %q", w.Message, want)
	}
	if res.RetryAfter() != 10*time.Second {
		t.Errorf("retry after %v, want 10s", res.RetryAfter())
	}
	if got := f.calls(); len(got) != 0 {
		t.Errorf("calls during back-off: %v", got)
	}
	if got := f.events.take(); !reflect.DeepEqual(got, []string{"BackOff"}) {
		t.Errorf("events = %v, want BackOff", got)
	}

	f.clock.Step(4 * time.Second)
	if got := syncPlanned(ctx, f.m, pod, st).RetryAfter(); got != 6*time.Second {
		t.Errorf("4s later: retry after %v, want 6s", got)
	}

	// Back-off over: restarted with the next attempt, and the back-off doubles.
	f.clock.Step(6 * time.Second)
	f.calls()
	res = syncPlanned(ctx, f.m, pod, st)
	if err := res.Error(); err != nil {
		t.Fatalf("after the back-off: %v", err)
	}
	var attempts []uint32
	for _, c := range f.rt.Containers {
		attempts = append(attempts, c.Metadata.Attempt)
	}
	slices.Sort(attempts)
	if !reflect.DeepEqual(attempts, []uint32{1, 2}) {
		t.Errorf("attempts created = %v, want [1 2]", attempts)
	}
	f.clock.Step(time.Second)
	res = syncPlanned(ctx, f.m, pod, exitedStatus(pod, sb, 2, f.clock.Now()))
	if w := res.Waiting("app"); w == nil || !strings.HasPrefix(w.Message, "back-off 20s ") || res.RetryAfter() != 20*time.Second {
		t.Errorf("third exit: waiting %v, retry %v; want a 20s back-off", w, res.RetryAfter())
	}
}

func TestSyncPodInitContainerFirst(t *testing.T) {
	f := newSyncFixture(t)
	pod := syncPod("app")
	pod.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox:1.36", Command: []string{"true"}}}
	res := syncPlanned(context.Background(), f.m, pod, nil)
	if err := res.Error(); err != nil {
		t.Fatal(err)
	}
	wantRes := []ActionResult{{Action: ActionCreatePodSandbox, Target: "web-node1"}, {Action: ActionInitContainer, Target: "init"}}
	if !reflect.DeepEqual(res.Results, wantRes) {
		t.Errorf("results = %+v, want %+v", res.Results, wantRes)
	}
	if n := len(f.rt.Containers); n != 1 {
		t.Errorf("%d containers created, want only the init container", n)
	}
}

func TestSyncPodFailures(t *testing.T) {
	errBoom := errors.New("boom")
	tests := []struct {
		name       string
		pod        func() *v1.Pod
		setup      func(f *syncFixture)
		wantAction string
		wantTarget string
		wantReason string
		wantEvent  string
		notCalled  string
	}{
		{
			name:       "sandbox fails to run",
			pod:        func() *v1.Pod { return syncPod("app") },
			setup:      func(f *syncFixture) { f.rt.InjectError("RunPodSandbox", errBoom) },
			wantAction: ActionCreatePodSandbox, wantTarget: "web-node1", wantReason: ReasonCreatePodSandboxError,
			wantEvent: "FailedCreatePodSandBox", notCalled: "CreateContainer",
		},
		{
			name:       "sandbox status fails",
			pod:        func() *v1.Pod { return syncPod("app") },
			setup:      func(f *syncFixture) { f.rt.InjectError("PodSandboxStatus", errBoom) },
			wantAction: ActionCreatePodSandbox, wantTarget: "web-node1", wantReason: ReasonCreatePodSandboxError,
			wantEvent: "FailedCreatePodSandBox", notCalled: "CreateContainer",
		},
		{
			name:       "sandbox config fails",
			pod:        func() *v1.Pod { p := syncPod("app"); p.Spec.DNSPolicy = v1.DNSNone; return p },
			wantAction: ActionCreatePodSandbox, wantTarget: "web-node1", wantReason: ReasonCreatePodSandboxError,
			wantEvent: "FailedCreatePodSandBox", notCalled: "RunPodSandbox",
		},
		{
			name:       "container fails to be created",
			pod:        func() *v1.Pod { return syncPod("app") },
			setup:      func(f *syncFixture) { f.rt.InjectError("CreateContainer", errBoom) },
			wantAction: ActionStartContainer, wantTarget: "app", wantReason: ReasonCreateContainerError,
			wantEvent: "Failed", notCalled: "StartContainer",
		},
		{
			name:       "container fails to start",
			pod:        func() *v1.Pod { return syncPod("app") },
			setup:      func(f *syncFixture) { f.rt.InjectError("StartContainer", errBoom) },
			wantAction: ActionStartContainer, wantTarget: "app", wantReason: ReasonRunContainerError,
			wantEvent: "Failed",
		},
		{
			name: "image absent under Never",
			pod: func() *v1.Pod {
				p := syncPod("app")
				p.Spec.Containers[0].Image, p.Spec.Containers[0].ImagePullPolicy = "absent:1", v1.PullNever
				return p
			},
			wantAction: ActionStartContainer, wantTarget: "app", wantReason: ReasonErrImageNeverPull,
			wantEvent: ReasonErrImageNeverPull, notCalled: "CreateContainer",
		},
		{
			name: "config error",
			pod: func() *v1.Pod {
				p := syncPod("app")
				p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "X", ValueFrom: field("spec.nope")}}
				return p
			},
			wantAction: ActionStartContainer, wantTarget: "app", wantReason: ReasonCreateContainerConfigError,
			wantEvent: "Failed", notCalled: "CreateContainer",
		},
		{
			name: "init container fails: no app container is started",
			pod: func() *v1.Pod {
				p := syncPod("app")
				p.Spec.InitContainers = []v1.Container{{Name: "init", Image: "busybox:1.36", Env: []v1.EnvVar{{Name: "X", ValueFrom: field("spec.nope")}}}}
				return p
			},
			wantAction: ActionInitContainer, wantTarget: "init", wantReason: ReasonCreateContainerConfigError,
			wantEvent: "Failed", notCalled: "CreateContainer",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newSyncFixture(t)
			if tt.setup != nil {
				tt.setup(f)
			}
			res := syncPlanned(context.Background(), f.m, tt.pod(), nil)
			last := res.Results[len(res.Results)-1]
			var se *SyncError
			if last.Action != tt.wantAction || last.Target != tt.wantTarget || !errors.As(last.Err, &se) || se.Reason != tt.wantReason {
				t.Fatalf("last result = %+v, want %s %s failing with %s", last, tt.wantAction, tt.wantTarget, tt.wantReason)
			}
			if res.Error() == nil {
				t.Errorf("Error() = nil with a failed step")
			}
			if tt.wantAction != ActionCreatePodSandbox {
				if w := res.Waiting(tt.wantTarget); w == nil || w.Reason != tt.wantReason {
					t.Errorf("Waiting(%s) = %v, want %s", tt.wantTarget, w, tt.wantReason)
				}
			}
			if events := f.events.take(); !slices.Contains(events, tt.wantEvent) {
				t.Errorf("events = %v, want %s", events, tt.wantEvent)
			}
			if tt.notCalled != "" && slices.Contains(f.calls(), tt.notCalled) {
				t.Errorf("%s was called after the failure", tt.notCalled)
			}
		})
	}
}

func TestSyncPodAppContainersAreIndependent(t *testing.T) {
	f := newSyncFixture(t)
	pod := syncPod("bad", "good")
	pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "X", ValueFrom: field("spec.nope")}}
	res := syncPlanned(context.Background(), f.m, pod, nil)
	if w := res.Waiting("bad"); w == nil || w.Reason != ReasonCreateContainerConfigError {
		t.Errorf("bad: %v", w)
	}
	if w := res.Waiting("good"); w != nil {
		t.Errorf("good: %v, want started", w)
	}
	if n := len(f.rt.Containers); n != 1 {
		t.Errorf("%d containers created, want 1", n)
	}
}

func TestSyncPodKillsChangedContainerThenStarts(t *testing.T) {
	f := newSyncFixture(t)
	pod := syncPod("app")
	sb := f.runningSandbox(pod)
	f.rt.SetFakeContainers([]*fakeri.FakeContainer{{SandboxID: "sb1", ContainerStatus: runtimeapi.ContainerStatus{
		Id: "old", State: runtimeapi.ContainerState_CONTAINER_RUNNING, Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
	}}})
	st := &podplan.PodStatus{UID: pod.UID, IPs: []string{sb.IP}, Sandboxes: []*podplan.SandboxStatus{sb}, Containers: []*podplan.ContainerStatus{{
		ID: "old", SandboxID: "sb1", Name: "app", State: podplan.ContainerStateRunning, Hash: 12345, RestartCount: 2, Labels: managed,
	}}}
	f.calls()
	res := syncPlanned(context.Background(), f.m, pod, st)
	if err := res.Error(); err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, r := range res.Results {
		actions = append(actions, r.Action)
	}
	if want := []string{ActionKillContainer, ActionStartContainer}; !reflect.DeepEqual(actions, want) {
		t.Errorf("actions = %v, want %v", actions, want)
	}
	if got, want := f.calls(), []string{"StopContainer", "CreateContainer", "StartContainer", "ImageStatus"}; !reflect.DeepEqual(got, want) {
		t.Errorf("calls = %v, want %v", got, want)
	}
	for id, c := range f.rt.Containers {
		if id != "old" && c.Metadata.Attempt != 3 {
			t.Errorf("new container attempt %d, want 3", c.Metadata.Attempt)
		}
	}
}

func TestSyncPodTerminal(t *testing.T) {
	f := newSyncFixture(t)
	pod := syncPod("app")
	pod.Spec.RestartPolicy = v1.RestartPolicyNever
	sb := f.runningSandbox(pod)
	f.calls()
	res := syncPlanned(context.Background(), f.m, pod, exitedStatus(pod, sb, 0, f.clock.Now()))
	if !res.Terminal || !res.Failed || res.Error() != nil {
		t.Errorf("terminal %v failed %v err %v, want a failed terminal pod", res.Terminal, res.Failed, res.Error())
	}
	if got, want := f.calls(), []string{"StopPodSandbox"}; !reflect.DeepEqual(got, want) {
		t.Errorf("calls = %v, want %v", got, want)
	}
}

func TestSyncPodReplacesDeadSandbox(t *testing.T) {
	f := newSyncFixture(t)
	pod := syncPod("app")
	sb := f.runningSandbox(pod)
	sb.State, sb.Attempt = podplan.SandboxStateNotReady, 2
	f.calls()
	res := syncPlanned(context.Background(), f.m, pod, exitedStatus(pod, sb, 0, f.clock.Now()))
	if err := res.Error(); err != nil {
		t.Fatal(err)
	}
	want := []string{"StopPodSandbox", "RunPodSandbox", "PodSandboxStatus", "CreateContainer", "StartContainer", "ImageStatus"}
	if got := f.calls(); !reflect.DeepEqual(got, want) {
		t.Errorf("calls = %v, want %v", got, want)
	}
	if ev := f.events.take(); len(ev) == 0 || ev[0] != "SandboxChanged" {
		t.Errorf("events = %v, want SandboxChanged first", ev)
	}
	for _, s := range f.rt.Sandboxes {
		if s.Id != "sb1" && s.Metadata.Attempt != 3 {
			t.Errorf("new sandbox attempt %d, want 3", s.Metadata.Attempt)
		}
	}
}

// TestSyncPodSandboxThatCannotBeStopped: a runtime that fails to stop a
// sandbox (containerd 1.6 fails forever on a CNI cache it left half
// written) holds the pod's new sandbox back only while something of the
// old one may still run: a dead sandbox whose containers all stopped does
// not, and the failure is reported as an event instead.
func TestSyncPodSandboxThatCannotBeStopped(t *testing.T) {
	stopFails := status.Error(codes.Unknown, "failed to destroy network for sandbox: failed to get network cached result: unexpected end of JSON input")
	tests := []struct {
		name string
		// The pod's one container runs in sandbox sb1: dead (NOTREADY)
		// or ready without an address; its container RUNNING or exited.
		deadSandbox      bool
		runningContainer bool
		injectStop       bool // the running container's stop fails too
		wantCreate       bool
		wantEvent        string
	}{
		{name: "dead sandbox, containers exited: a new sandbox anyway", deadSandbox: true, wantCreate: true, wantEvent: "FailedKillPod"},
		{name: "dead sandbox, a container that stops: a new sandbox anyway", deadSandbox: true, runningContainer: true, wantCreate: true, wantEvent: "FailedKillPod"},
		{name: "dead sandbox, a container that does not stop: no new sandbox", deadSandbox: true, runningContainer: true, injectStop: true},
		{name: "ready sandbox without an address: no new sandbox"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newSyncFixture(t)
			pod := syncPod("app")
			sb := f.runningSandbox(pod)
			if tt.deadSandbox {
				sb.State = podplan.SandboxStateNotReady
			} else {
				sb.IP = ""
			}
			st := exitedStatus(pod, sb, 0, f.clock.Now())
			if !tt.deadSandbox {
				st.IPs = nil
			}
			if tt.runningContainer {
				st.Containers[0].State = podplan.ContainerStateRunning
				f.rt.SetFakeContainers([]*fakeri.FakeContainer{{SandboxID: "sb1", ContainerStatus: runtimeapi.ContainerStatus{
					Id: st.Containers[0].ID, State: runtimeapi.ContainerState_CONTAINER_RUNNING, Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
				}}})
			}
			f.rt.InjectError("StopPodSandbox", stopFails)
			if tt.injectStop {
				f.rt.InjectError("StopContainer", status.Error(codes.DeadlineExceeded, "stop timed out"))
			}
			f.calls()
			res := syncPlanned(context.Background(), f.m, pod, st)
			if err := res.Error(); err == nil || !strings.Contains(err.Error(), ReasonKillPodSandboxError+": stop sandbox \"sb1\"") {
				t.Fatalf("Error() = %v, want the failed stop as %s", err, ReasonKillPodSandboxError)
			}
			calls := f.calls()
			if got := slices.Contains(calls, "RunPodSandbox"); got != tt.wantCreate {
				t.Errorf("RunPodSandbox called: %v, want %v (calls %v)", got, tt.wantCreate, calls)
			}
			if tt.wantCreate && !slices.Contains(calls, "StartContainer") {
				t.Errorf("the container was not started in the new sandbox: calls %v", calls)
			}
			events := f.events.take()
			if got := slices.Contains(events, "FailedKillPod"); got != (tt.wantEvent != "") {
				t.Errorf("events = %v, want FailedKillPod: %v", events, tt.wantEvent != "")
			}
			if got := res.UnrecordedError() == nil; got != (tt.wantEvent != "") {
				t.Errorf("UnrecordedError() = %v: a failure is either an event or left to the agent to log", res.UnrecordedError())
			}
		})
	}
}

func TestSyncPodImagePullBackoffRetryAfter(t *testing.T) {
	f := newSyncFixture(t)
	pod := syncPod("app")
	pod.Spec.Containers[0].ImagePullPolicy = v1.PullAlways
	f.img.InjectError("PullImage", errors.New("registry down"))
	res := syncPlanned(context.Background(), f.m, pod, nil)
	if w := res.Waiting("app"); w == nil || w.Reason != ReasonErrImagePull {
		t.Fatalf("waiting = %v, want ErrImagePull", w)
	}
	if got := res.RetryAfter(); got != 10*time.Second {
		t.Errorf("retry after %v, want the 10s pull back-off", got)
	}
}

func TestSyncResultHelpers(t *testing.T) {
	crash := &SyncError{Reason: ReasonCrashLoopBackOff, Message: "m"}
	r := SyncResult{Results: []ActionResult{
		{Action: ActionCreatePodSandbox, Target: "p"},
		{Action: ActionKillContainer, Target: "a", Err: &SyncError{Reason: ReasonKillContainerError}},
		{Action: ActionStartContainer, Target: "a", Err: crash, RetryAfter: 30 * time.Second},
		{Action: ActionStartContainer, Target: "b", Err: &SyncError{Reason: ReasonImagePullBackOff}, RetryAfter: 7 * time.Second},
		{Action: ActionStartContainer, Target: "c"},
	}}
	if got := r.RetryAfter(); got != 7*time.Second {
		t.Errorf("RetryAfter = %v, want the shortest, 7s", got)
	}
	if got := r.Waiting("a"); got != crash {
		t.Errorf("Waiting(a) = %v, want the start's error, not the kill's", got)
	}
	if r.Waiting("c") != nil || r.Waiting("zzz") != nil {
		t.Errorf("Waiting of a started or unknown container is not nil")
	}
	err := r.Error()
	if err == nil || !errors.Is(err, crash) || !strings.Contains(err.Error(), ReasonKillContainerError) {
		t.Errorf("Error() = %v, want all failures joined", err)
	}
	if (SyncResult{Results: []ActionResult{{Action: ActionStartContainer}}}).Error() != nil {
		t.Errorf("Error() of a clean result is not nil")
	}
}

func TestSyncPodRestartsSidecarBesideApps(t *testing.T) {
	f := newSyncFixture(t)
	pod := syncPod("app")
	always := v1.ContainerRestartPolicyAlways
	pod.Spec.InitContainers = []v1.Container{{Name: "proxy", Image: "busybox:1.36", RestartPolicy: &always}}
	sb := f.runningSandbox(pod)
	st := &podplan.PodStatus{UID: pod.UID, IPs: []string{sb.IP}, Sandboxes: []*podplan.SandboxStatus{sb}, Containers: []*podplan.ContainerStatus{
		{ID: "p", SandboxID: "sb1", Name: "proxy", State: podplan.ContainerStateExited, ExitCode: 1, FinishedAt: f.clock.Now(),
			Hash: criconfig.HashContainer(&pod.Spec.InitContainers[0]), Labels: managed},
		{ID: "a", SandboxID: "sb1", Name: "app", State: podplan.ContainerStateExited, ExitCode: 2, FinishedAt: f.clock.Now(),
			Hash: criconfig.HashContainer(&pod.Spec.Containers[0]), Labels: managed},
	}}
	res := syncPlanned(context.Background(), f.m, pod, st)
	if err := res.Error(); err != nil {
		t.Fatal(err)
	}
	want := []ActionResult{{Action: ActionInitContainer, Target: "proxy"}, {Action: ActionStartContainer, Target: "app"}}
	if !reflect.DeepEqual(res.Results, want) {
		t.Errorf("results = %+v, want %+v", res.Results, want)
	}
}

// TestSyncPodNeverStartedIsNoRestart: a container a killed berth created
// but never started is removed, and the container started in its place is
// the same attempt (restart count 0 for a pod that never crashed). While
// the runtime refuses the removal (its start is in flight), nothing is
// started beside it.
func TestSyncPodNeverStartedIsNoRestart(t *testing.T) {
	for _, tc := range []struct {
		name      string
		removeErr error
	}{
		{name: "removed, then started as attempt 0"},
		{name: "start in flight: nothing started", removeErr: errors.New(`container "c-created" is in starting state, can't be removed`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newSyncFixture(t)
			pod := syncPod("app")
			sb := f.runningSandbox(pod)
			c := &pod.Spec.Containers[0]
			f.rt.SetFakeContainers([]*fakeri.FakeContainer{{SandboxID: sb.ID, ContainerStatus: runtimeapi.ContainerStatus{
				Id: "c-created", Metadata: &runtimeapi.ContainerMetadata{Name: c.Name}, State: runtimeapi.ContainerState_CONTAINER_CREATED,
				Labels: map[string]string{criconfig.LabelManaged: "true", criconfig.LabelPodUID: string(pod.UID), criconfig.LabelContainerName: c.Name},
			}}})
			st := &podplan.PodStatus{UID: pod.UID, IPs: []string{sb.IP}, Sandboxes: []*podplan.SandboxStatus{sb}, Containers: []*podplan.ContainerStatus{{
				ID: "c-created", SandboxID: sb.ID, Name: c.Name, State: podplan.ContainerStateCreated, Hash: criconfig.HashContainer(c), Labels: managed,
			}}}
			f.calls()
			if tc.removeErr != nil {
				f.rt.InjectError("RemoveContainer", tc.removeErr)
			}
			res := syncPlanned(context.Background(), f.m, pod, st)
			calls := f.calls()
			if tc.removeErr != nil {
				if err := res.Error(); err == nil || !strings.Contains(err.Error(), "starting state") {
					t.Errorf("SyncPod error = %v, want the refused removal", err)
				}
				if slices.Contains(calls, "CreateContainer") || slices.Contains(calls, "StartContainer") {
					t.Errorf("calls %v: a container was started beside one whose start is in flight", calls)
				}
				return
			}
			if err := res.Error(); err != nil {
				t.Fatal(err)
			}
			rm, create := slices.Index(calls, "RemoveContainer"), slices.Index(calls, "CreateContainer")
			if rm < 0 || create < rm {
				t.Errorf("calls %v: the never-started container must be removed before its replacement is created", calls)
			}
			if _, ok := f.rt.Containers["c-created"]; ok || len(f.rt.Containers) != 1 {
				t.Fatalf("containers %v: want only the replacement", f.rt.Containers)
			}
			for _, nc := range f.rt.Containers {
				if nc.Metadata.Attempt != 0 || nc.Annotations[criconfig.AnnotationContainerRestartCount] != "0" {
					t.Errorf("replacement attempt %d, restartCount annotation %q; a container that never started is no restart (want 0)",
						nc.Metadata.Attempt, nc.Annotations[criconfig.AnnotationContainerRestartCount])
				}
			}
		})
	}
}
