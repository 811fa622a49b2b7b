package kuberuntime

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeapi "k8s.io/cri-api/pkg/apis/testing"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/podplan"
	"github.com/berth-agent/berth/internal/runtimewatch/runtimewatchtest"
)

// stopRecorder is the fake runtime plus what the fake forgets: the timeout
// of each StopContainer. If barrier is set, each StopContainer waits until
// barrier many are in flight, which only parallel callers get past.
type stopRecorder struct {
	*fakeapi.FakeRuntimeService
	mu       sync.Mutex // guards timeouts and inFlight
	timeouts map[string]int64
	inFlight int
	barrier  int
	release  chan struct{}
}

func newStopRecorder(rs *fakeapi.FakeRuntimeService, barrier int) *stopRecorder {
	return &stopRecorder{FakeRuntimeService: rs, timeouts: map[string]int64{}, barrier: barrier, release: make(chan struct{})}
}

func (s *stopRecorder) StopContainer(ctx context.Context, id string, timeout int64) error {
	s.mu.Lock()
	s.timeouts[id] = timeout
	s.inFlight++
	if s.inFlight == s.barrier {
		close(s.release)
	}
	s.mu.Unlock()
	if s.barrier > 0 {
		select {
		case <-s.release:
		case <-time.After(5 * time.Second):
			return errors.New("containers were not stopped in parallel")
		}
	}
	return s.FakeRuntimeService.StopContainer(ctx, id, timeout)
}

func ptr[T any](v T) *T { return &v }

func TestKillContainerGracePeriod(t *testing.T) {
	tests := []struct {
		name          string
		podGrace      *int64 // nil pod when orphan
		orphan        bool
		deletionGrace *int64
		annotations   map[string]string
		override      *int64
		preStop       time.Duration
		want          int64
	}{
		{name: "pod's grace period", podGrace: ptr[int64](45), want: 45},
		{name: "unset means 30", want: 30},
		{name: "minimum 2", podGrace: ptr[int64](0), want: 2},
		{name: "override wins", podGrace: ptr[int64](45), override: ptr[int64](5), want: 5},
		{name: "override wins over the minimum", podGrace: ptr[int64](45), override: ptr[int64](0), want: 0},
		{name: "negative override is 0", override: ptr[int64](-3), want: 0},
		{name: "deletion grace first", podGrace: ptr[int64](45), deletionGrace: ptr[int64](7), want: 7},
		{name: "container's own", podGrace: ptr[int64](45), annotations: map[string]string{criconfig.AnnotationContainerGracePeriod: "12"}, want: 12},
		{name: "orphan reads the pod's from the container", orphan: true, annotations: map[string]string{criconfig.AnnotationPodGracePeriod: "9"}, want: 9},
		{name: "orphan without annotation gets 30", orphan: true, want: 30},
		{name: "orphan with garbage annotation gets 30", orphan: true, annotations: map[string]string{criconfig.AnnotationPodGracePeriod: "soon"}, want: 30},
		{name: "preStop time is taken off", podGrace: ptr[int64](30), preStop: 7 * time.Second, want: 23},
		{name: "preStop over the grace leaves the minimum", podGrace: ptr[int64](30), preStop: 40 * time.Second, want: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newCRITestEnv(t)
			rec := newStopRecorder(env.rs, 0)
			env.m.runtime = rec
			fc := runtimewatchtest.FakeContainer("c1", "s1", "uid-1", 0)
			for k, v := range tt.annotations {
				fc.Annotations[k] = v
			}
			env.rs.SetFakeContainers([]*fakeapi.FakeContainer{fc})
			var hookGrace time.Duration
			if tt.preStop > 0 {
				env.m.preStop = func(_ context.Context, _ *v1.Pod, _ *podplan.ContainerStatus, grace time.Duration) {
					hookGrace = grace
					env.clock.Step(tt.preStop)
				}
			}
			var pod *v1.Pod
			if !tt.orphan {
				pod, _ = imagePod("busybox:1.36", "")
				pod.Spec.TerminationGracePeriodSeconds = tt.podGrace
				pod.DeletionGracePeriodSeconds = tt.deletionGrace
			}
			c := &podplan.ContainerStatus{ID: "c1", Name: "app", State: podplan.ContainerStateRunning, Labels: fc.Labels, Annotations: fc.Annotations}
			if err := env.m.KillContainer(context.Background(), pod, c, "test", "", tt.override); err != nil {
				t.Fatal(err)
			}
			if got := rec.timeouts["c1"]; got != tt.want {
				t.Errorf("StopContainer timeout = %d, want %d", got, tt.want)
			}
			if tt.preStop > 0 && hookGrace != time.Duration(*tt.podGrace)*time.Second {
				t.Errorf("preStop got grace %v, want the full %ds", hookGrace, *tt.podGrace)
			}
		})
	}
}

func TestKillContainerOutcomes(t *testing.T) {
	tests := []struct {
		name       string
		managed    bool
		stopErr    error
		wantErr    bool
		wantReason string
		wantStop   bool
	}{
		{name: "stopped", managed: true, wantStop: true},
		{name: "already gone is success", managed: true, stopErr: status.Error(codes.NotFound, "no such container"), wantStop: true},
		{name: "runtime failure", managed: true, stopErr: status.Error(codes.Unavailable, "down"), wantErr: true, wantReason: ReasonKillContainerError, wantStop: true},
		{name: "foreign container refused", managed: false, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newCRITestEnv(t)
			fc := runtimewatchtest.FakeContainer("c1", "s1", "uid-1", 0)
			if !tt.managed {
				delete(fc.Labels, criconfig.LabelManaged)
			}
			env.rs.SetFakeContainers([]*fakeapi.FakeContainer{fc})
			if tt.stopErr != nil {
				env.rs.InjectError("StopContainer", tt.stopErr)
			}
			c := &podplan.ContainerStatus{ID: "c1", Name: "app", Labels: fc.Labels, Annotations: fc.Annotations}
			err := env.m.KillContainer(context.Background(), nil, c, "test", "Container app failed liveness probe", nil)
			if (err != nil) != tt.wantErr || syncReason(err) != tt.wantReason {
				t.Fatalf("err = %v, want error %v with reason %q", err, tt.wantErr, tt.wantReason)
			}
			if stopped := slices.Contains(env.calls(), "StopContainer"); stopped != tt.wantStop {
				t.Errorf("StopContainer called = %v, want %v", stopped, tt.wantStop)
			}
			events := env.events.take()
			if tt.managed && !slices.Equal(events, []string{"Normal Killing: Container app failed liveness probe"}) {
				t.Errorf("events = %q", events)
			}
		})
	}
}

func TestKillPod(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent()) // the e2e build shares a test bed with its own goroutines
	env := newCRITestEnv(t)
	s1 := runtimewatchtest.FakeSandbox("s1", "uid-1", 0)
	s0 := runtimewatchtest.FakeSandbox("s0", "uid-1", -time.Hour)
	s0.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	a := runtimewatchtest.FakeContainer("c-a", "s1", "uid-1", time.Second)
	b := runtimewatchtest.FakeContainer("c-b", "s1", "uid-1", 2*time.Second)
	b.Metadata.Name = "sidecar"
	exited := runtimewatchtest.FakeContainer("c-old", "s0", "uid-1", -time.Hour)
	exited.State = runtimeapi.ContainerState_CONTAINER_EXITED
	env.rs.SetFakeSandboxes([]*fakeapi.FakePodSandbox{s1, s0})
	env.rs.SetFakeContainers([]*fakeapi.FakeContainer{a, b, exited})
	ctx := context.Background()
	st, err := env.m.PodStatus(ctx, "uid-1")
	if err != nil {
		t.Fatal(err)
	}
	// A foreign container that somehow sits in the status is never touched.
	st.Containers = append(st.Containers, &podplan.ContainerStatus{ID: "c-foreign", State: podplan.ContainerStateRunning, Labels: map[string]string{}})
	st.Sandboxes = append(st.Sandboxes, &podplan.SandboxStatus{ID: "s-foreign", State: podplan.SandboxStateReady})
	env.calls()

	// Both running containers must be in StopContainer at once to pass.
	rec := newStopRecorder(env.rs, 2)
	env.m.runtime = rec
	pod, _ := imagePod("busybox:1.36", "")
	pod.Spec.TerminationGracePeriodSeconds = ptr[int64](5)
	if err := env.m.KillPod(ctx, pod, st, nil); err != nil {
		t.Fatal(err)
	}
	calls := env.calls()
	want := []string{"StopContainer", "StopContainer", "StopPodSandbox", "StopPodSandbox"}
	if !slices.Equal(calls, want) {
		t.Errorf("calls = %v, want %v (running containers, then every sandbox)", calls, want)
	}
	if rec.timeouts["c-a"] != 5 || rec.timeouts["c-b"] != 5 || len(rec.timeouts) != 2 {
		t.Errorf("stop timeouts = %v, want c-a and c-b with 5", rec.timeouts)
	}
	if len(env.events.take()) != 2 {
		t.Error("want one Killing event per running container")
	}
}

func TestKillPodJoinsErrors(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	env := newCRITestEnv(t)
	runtimewatchtest.SetPods(env.rs, 1)
	ctx := context.Background()
	st, err := env.m.PodStatus(ctx, "uid-0")
	if err != nil {
		t.Fatal(err)
	}
	env.rs.InjectError("StopContainer", status.Error(codes.DeadlineExceeded, "stuck"))
	env.rs.InjectError("StopPodSandbox", status.Error(codes.Internal, "cni teardown failed"))
	err = env.m.KillPod(ctx, nil, st, ptr[int64](1))
	if err == nil {
		t.Fatal("KillPod succeeded despite failures")
	}
	var reasons []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		reasons = append(reasons, syncReason(e))
	}
	if want := []string{ReasonKillContainerError, ReasonKillPodSandboxError}; !slices.Equal(reasons, want) {
		t.Errorf("joined reasons = %v, want %v", reasons, want)
	}
	if calls := env.calls(); runtimewatchtest.Count(calls, "StopPodSandbox") != 1 {
		t.Errorf("calls %v: the sandbox must be stopped even though a container failed to stop", calls)
	}
}

// TestKillPodRemovesNeverStarted: a container created but never started
// (berth killed between CreateContainer and StartContainer) is removed with
// the pod, not left CREATED for a start still in flight to run it; when the
// runtime refuses because that start is in flight, the failure is reported
// and the sandbox is stopped anyway.
func TestKillPodRemovesNeverStarted(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	for _, tc := range []struct {
		name      string
		removeErr error
	}{
		{name: "removed"},
		{name: "start in flight", removeErr: status.Error(codes.Unknown, `container "c-new" is in starting state, can't be removed`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newCRITestEnv(t)
			s1 := runtimewatchtest.FakeSandbox("s1", "uid-1", 0)
			created := runtimewatchtest.FakeContainer("c-new", "s1", "uid-1", time.Second)
			created.State = runtimeapi.ContainerState_CONTAINER_CREATED
			env.rs.SetFakeSandboxes([]*fakeapi.FakePodSandbox{s1})
			env.rs.SetFakeContainers([]*fakeapi.FakeContainer{created})
			ctx := context.Background()
			st, err := env.m.PodStatus(ctx, "uid-1")
			if err != nil {
				t.Fatal(err)
			}
			env.calls()
			if tc.removeErr != nil {
				env.rs.InjectError("RemoveContainer", tc.removeErr)
			}
			err = env.m.KillPod(ctx, nil, st, nil)
			calls := env.calls()
			if want := []string{"RemoveContainer", "StopPodSandbox"}; !slices.Equal(calls, want) {
				t.Errorf("calls = %v, want %v", calls, want)
			}
			if tc.removeErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := env.rs.Containers["c-new"]; ok {
					t.Error("the never-started container is still there")
				}
				return
			}
			if err == nil || syncReason(err) != ReasonKillContainerError || !strings.Contains(err.Error(), "starting state") {
				t.Errorf("KillPod = %v, want a KillContainerError carrying the runtime's refusal", err)
			}
		})
	}
}
