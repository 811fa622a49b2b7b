package runtimewatch

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeapi "k8s.io/cri-api/pkg/apis/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/podplan"
	"github.com/berth-agent/berth/internal/runtimewatch/runtimewatchtest"
)

// criTestEnv is a Watcher over the cri-api fake runtime and a fake clock.
type criTestEnv struct {
	w     *Watcher
	rs    *fakeapi.FakeRuntimeService
	clock *clocktesting.FakeClock
}

func newCRITestEnv(t *testing.T) *criTestEnv {
	t.Helper()
	env := &criTestEnv{
		rs:    fakeapi.NewFakeRuntimeService(),
		clock: clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0)),
	}
	env.w = New(env.rs, Options{Clock: env.clock, PodLogsDir: t.TempDir()})
	return env
}

// calls returns the runtime calls made since the last calls.
func (e *criTestEnv) calls() []string {
	e.rs.Lock()
	defer e.rs.Unlock()
	c := e.rs.Called
	e.rs.Called = nil
	return c
}

func TestRelistIsOneCallAtIdle(t *testing.T) {
	env := newCRITestEnv(t)
	runtimewatchtest.SetPods(env.rs, 50)
	ctx := context.Background()

	pods, err := env.w.Relist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 50 {
		t.Fatalf("first relist: %d pods, want 50", len(pods))
	}
	first := env.calls()
	if runtimewatchtest.Count(first, "PodSandboxStatus") != 50 || runtimewatchtest.Count(first, "ContainerStatus") != 50 {
		t.Errorf("first relist reads each new object once: %d sandbox and %d container status calls, want 50 and 50",
			runtimewatchtest.Count(first, "PodSandboxStatus"), runtimewatchtest.Count(first, "ContainerStatus"))
	}

	for range 4 {
		env.clock.Step(time.Second)
		if _, err := env.w.Relist(ctx); err != nil {
			t.Fatal(err)
		}
		if got, want := env.calls(), []string{"ListContainers"}; !slices.Equal(got, want) {
			t.Fatalf("idle relist calls = %v, want %v", got, want)
		}
	}
	env.clock.Step(time.Second)
	if _, err := env.w.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := env.calls(), []string{"ListContainers", "ListPodSandbox"}; !slices.Equal(got, want) {
		t.Errorf("relist once sandboxRelistPeriod passed: calls = %v, want %v", got, want)
	}
}

func TestRelistListsSandboxesWhenContainersChange(t *testing.T) {
	env := newCRITestEnv(t)
	runtimewatchtest.SetPods(env.rs, 2)
	ctx := context.Background()
	if _, err := env.w.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	env.calls()
	// A sandbox stopped and removed by hand takes its containers with it.
	env.rs.Lock()
	delete(env.rs.Containers, "c-uid-0")
	delete(env.rs.Sandboxes, "s-uid-0")
	env.rs.Unlock()
	pods, err := env.w.Relist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := env.calls(), []string{"ListContainers", "ListPodSandbox"}; !slices.Equal(got, want) {
		t.Errorf("calls = %v, want %v", got, want)
	}
	if _, ok := pods["uid-0"]; ok || len(pods) != 1 {
		t.Errorf("pods after the removal = %v, want only uid-1", pods)
	}
}

func TestRelistFetchesStatusOnlyOnChange(t *testing.T) {
	env := newCRITestEnv(t)
	runtimewatchtest.SetPods(env.rs, 3)
	ctx := context.Background()
	if _, err := env.w.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	env.calls()

	// uid-1's container exits; nothing else changes.
	env.rs.Lock()
	c := env.rs.Containers["c-uid-1"]
	c.State = runtimeapi.ContainerState_CONTAINER_EXITED
	c.FinishedAt = runtimewatchtest.BaseTime.Add(time.Minute).UnixNano()
	c.ExitCode = 3
	c.Reason = "Error"
	c.Message = "disk full"
	env.rs.Unlock()

	pods, err := env.w.Relist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	calls := env.calls()
	if runtimewatchtest.Count(calls, "ContainerStatus") != 1 || runtimewatchtest.Count(calls, "PodSandboxStatus") != 0 || len(calls) != 3 {
		t.Errorf("relist after one exit made calls %v, want the 2 lists (the container listing changed) and 1 podplan.ContainerStatus", calls)
	}
	got := pods["uid-1"].FindContainer("app")
	if got.State != podplan.ContainerStateExited || got.ExitCode != 3 || got.Reason != "Error" || got.Message != "disk full" ||
		!got.FinishedAt.Equal(runtimewatchtest.BaseTime.Add(time.Minute)) {
		t.Errorf("exited container status = %+v", got)
	}

	// An exited container never changes: no more status calls.
	if _, err := env.w.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if calls := env.calls(); !slices.Equal(calls, []string{"ListContainers"}) {
		t.Errorf("relist after the exit was seen made calls %v, want only ListContainers", calls)
	}
}

func TestRelistDropsVanishedObjectsFromCache(t *testing.T) {
	env := newCRITestEnv(t)
	runtimewatchtest.SetPods(env.rs, 2)
	ctx := context.Background()
	if _, err := env.w.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	env.rs.Lock()
	delete(env.rs.Containers, "c-uid-0")
	delete(env.rs.Sandboxes, "s-uid-0")
	env.rs.Unlock()
	pods, err := env.w.Relist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pods["uid-0"]; ok || len(pods) != 1 {
		t.Errorf("removed pod still listed: %v", pods)
	}
	c := &env.w.statusCache
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.containers) != 1 || len(c.sandboxes) != 1 {
		t.Errorf("cache holds %d containers and %d sandboxes, want 1 and 1", len(c.containers), len(c.sandboxes))
	}
	if _, ok := c.containers["c-uid-0"]; ok {
		t.Error("cache still holds the removed container")
	}
}

func TestRelistIgnoresForeignObjects(t *testing.T) {
	env := newCRITestEnv(t)
	runtimewatchtest.SetPods(env.rs, 1)
	foreignS := runtimewatchtest.FakeSandbox("s-foreign", "uid-foreign", 0)
	delete(foreignS.Labels, criconfig.LabelManaged)
	foreignC := runtimewatchtest.FakeContainer("c-foreign", "s-foreign", "uid-foreign", 0)
	foreignC.Labels[criconfig.LabelManaged] = "false"
	env.rs.Lock()
	env.rs.Sandboxes["s-foreign"] = foreignS
	env.rs.Containers["c-foreign"] = foreignC
	env.rs.Unlock()

	pods, err := env.w.Relist(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pods["uid-foreign"]; ok {
		t.Error("a pod without berth's label was listed")
	}
	if calls := env.calls(); runtimewatchtest.Count(calls, "ContainerStatus") != 1 || runtimewatchtest.Count(calls, "PodSandboxStatus") != 1 {
		t.Errorf("calls %v: foreign objects must not even be inspected", calls)
	}
}

func TestRelistStatusErrors(t *testing.T) {
	tests := []struct {
		name    string
		err     error
		wantErr bool
	}{
		{"container removed between list and status is left out", status.Error(codes.NotFound, "gone"), false},
		{"other failures fail the relist", status.Error(codes.Unavailable, "down"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newCRITestEnv(t)
			runtimewatchtest.SetPods(env.rs, 1)
			env.rs.InjectError("ContainerStatus", tt.err)
			pods, err := env.w.Relist(context.Background())
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				if !strings.Contains(err.Error(), `"c-uid-0"`) {
					t.Errorf("error %q does not name the container", err)
				}
				return
			}
			if len(pods["uid-0"].Containers) != 0 || len(pods["uid-0"].Sandboxes) != 1 {
				t.Errorf("pod = %+v, want its sandbox and no container", pods["uid-0"])
			}
		})
	}
}

func TestRelistListErrors(t *testing.T) {
	for _, call := range []string{"ListPodSandbox", "ListContainers"} {
		t.Run(call, func(t *testing.T) {
			env := newCRITestEnv(t)
			env.rs.InjectError(call, status.Error(codes.Unavailable, "down"))
			if _, err := env.w.Relist(context.Background()); err == nil {
				t.Fatal("Relist succeeded with a failing list")
			}
		})
	}
}

func TestPodStatusFields(t *testing.T) {
	env := newCRITestEnv(t)
	const uid = "uid-1"
	old := runtimewatchtest.FakeSandbox("s-old", uid, 0)
	old.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	old.Network.Ip = "10.88.0.1"
	cur := runtimewatchtest.FakeSandbox("s-new", uid, time.Minute)
	cur.Metadata.Attempt = 1
	cur.Network.AdditionalIps = []*runtimeapi.PodIP{{Ip: "fd00::2"}}
	exited := runtimewatchtest.FakeContainer("c-old", "s-old", uid, time.Second)
	exited.State = runtimeapi.ContainerState_CONTAINER_EXITED
	exited.FinishedAt = runtimewatchtest.BaseTime.Add(30 * time.Second).UnixNano()
	exited.ExitCode = 137
	exited.Reason = "OOMKilled"
	exited.Message = "last words"
	running := runtimewatchtest.FakeContainer("c-new", "s-new", uid, time.Minute+time.Second)
	running.Annotations[criconfig.AnnotationContainerRestartCount] = "4"
	other := runtimewatchtest.FakeSandbox("s-other", "uid-2", 0)
	env.rs.SetFakeSandboxes([]*fakeapi.FakePodSandbox{old, cur, other})
	env.rs.SetFakeContainers([]*fakeapi.FakeContainer{exited, running})

	got, err := env.w.PodStatus(context.Background(), uid)
	if err != nil {
		t.Fatal(err)
	}
	if got.UID != uid || got.Name != "web-node" || got.Namespace != "default" {
		t.Errorf("identity = %q %q %q", got.UID, got.Name, got.Namespace)
	}
	if want := []string{"10.88.0.2", "fd00::2"}; !slices.Equal(got.IPs, want) {
		t.Errorf("IPs = %v, want %v (newest ready sandbox, primary first)", got.IPs, want)
	}
	if len(got.Sandboxes) != 2 || got.Sandboxes[0].ID != "s-new" || got.Sandboxes[1].ID != "s-old" {
		t.Fatalf("sandboxes not newest first: %+v", got.Sandboxes)
	}
	s := got.Sandboxes[0]
	if s.State != podplan.SandboxStateReady || s.Attempt != 1 || s.HostNetwork || !s.CreatedAt.Equal(runtimewatchtest.BaseTime.Add(time.Minute)) ||
		s.IP != "10.88.0.2" || got.Sandboxes[1].State != podplan.SandboxStateNotReady {
		t.Errorf("sandbox = %+v", s)
	}
	if len(got.Containers) != 2 || got.Containers[0].ID != "c-new" {
		t.Fatalf("containers not newest first: %+v", got.Containers)
	}
	c := got.Containers[0]
	want := podplan.ContainerStatus{
		ID: "c-new", Runtime: "fakeRuntime", SandboxID: "s-new", Name: "app", State: podplan.ContainerStateRunning,
		CreatedAt: runtimewatchtest.BaseTime.Add(time.Minute + time.Second), StartedAt: runtimewatchtest.BaseTime.Add(time.Minute + 2*time.Second),
		Image: "busybox:1.36", ImageRef: "docker.io/library/busybox@sha256:abc", Hash: 0x1f2e3d, RestartCount: 4,
	}
	c.Labels, c.Annotations = nil, nil
	if !reflect.DeepEqual(*c, want) {
		t.Errorf("running container =\n%+v\nwant\n%+v", *c, want)
	}
	e := got.Containers[1]
	if e.State != podplan.ContainerStateExited || e.ExitCode != 137 || e.Reason != "OOMKilled" || e.Message != "last words" ||
		!e.FinishedAt.Equal(runtimewatchtest.BaseTime.Add(30*time.Second)) || e.SandboxID != "s-old" {
		t.Errorf("exited container = %+v", e)
	}
	if calls := env.calls(); calls[0] != "ListPodSandbox" || calls[1] != "ListContainers" || len(calls) != 7 ||
		runtimewatchtest.Count(calls, "Version") != 1 {
		t.Errorf("calls = %v, want 2 lists filtered to the pod, 4 status calls and one Version for the runtime's name", calls)
	}
	// The runtime's name is asked once and kept.
	if _, err := env.w.PodStatus(context.Background(), uid); err != nil {
		t.Fatal(err)
	}
	if calls := env.calls(); slices.Contains(calls, "Version") {
		t.Errorf("second read: calls = %v, want no Version again", calls)
	}
}

func TestPodStatusHostNetworkAndUnknownPod(t *testing.T) {
	env := newCRITestEnv(t)
	s := runtimewatchtest.FakeSandbox("s-host", "uid-h", 0)
	s.Network.Ip = ""
	s.Linux.Namespaces.Options.Network = runtimeapi.NamespaceMode_NODE
	env.rs.SetFakeSandboxes([]*fakeapi.FakePodSandbox{s})
	ctx := context.Background()

	got, err := env.w.PodStatus(ctx, "uid-h")
	if err != nil {
		t.Fatal(err)
	}
	if !got.Sandboxes[0].HostNetwork || len(got.IPs) != 0 {
		t.Errorf("host network pod: HostNetwork %v, IPs %v; want true and none", got.Sandboxes[0].HostNetwork, got.IPs)
	}
	none, err := env.w.PodStatus(ctx, "uid-none")
	if err != nil {
		t.Fatal(err)
	}
	if none.UID != "uid-none" || len(none.Sandboxes)+len(none.Containers) != 0 {
		t.Errorf("unknown pod = %+v, want an empty status with its UID", none)
	}
}

func TestAnnotationParsing(t *testing.T) {
	tests := []struct {
		hash, restarts string
		wantHash       uint64
		wantRestarts   int
	}{
		{"ff", "2", 255, 2},
		{"", "", 0, 0},
		{"not-hex", "-1", 0, 0},
		{"ffffffffffffffff", "10", 1<<64 - 1, 10},
	}
	for _, tt := range tests {
		a := map[string]string{criconfig.AnnotationContainerHash: tt.hash, criconfig.AnnotationContainerRestartCount: tt.restarts}
		if got := specHash(a); got != tt.wantHash {
			t.Errorf("specHash(%q) = %x, want %x", tt.hash, got, tt.wantHash)
		}
		if got := restartCount(a); got != tt.wantRestarts {
			t.Errorf("restartCount(%q) = %d, want %d", tt.restarts, got, tt.wantRestarts)
		}
	}
}

func TestSpecImage(t *testing.T) {
	tests := []struct {
		name string
		st   *runtimeapi.ContainerStatus
		want string
	}{
		{"annotation wins", &runtimeapi.ContainerStatus{
			Annotations: map[string]string{criconfig.AnnotationContainerImage: "busybox:1.36"},
			Image:       &runtimeapi.ImageSpec{Image: "docker.io/library/busybox:1.36", UserSpecifiedImage: "other"},
		}, "busybox:1.36"},
		{"user specified image echoed", &runtimeapi.ContainerStatus{
			Image: &runtimeapi.ImageSpec{Image: "docker.io/library/busybox:1.36", UserSpecifiedImage: "busybox:1.36"},
		}, "busybox:1.36"},
		{"runtime's name", &runtimeapi.ContainerStatus{
			Image: &runtimeapi.ImageSpec{Image: "docker.io/library/busybox:1.36"},
		}, "docker.io/library/busybox:1.36"},
	}
	for _, tt := range tests {
		if got := specImage(tt.st); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestObservationConcurrentUse runs relists, single-pod reads and removals
// at once, as the PLEG and pod workers do, for the race detector.
func TestObservationConcurrentUse(t *testing.T) {
	env := newCRITestEnv(t)
	runtimewatchtest.SetPods(env.rs, 10)
	env.w.runtime = grpcNotFound{env.rs}
	ctx := context.Background()
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			for range 20 {
				if _, err := env.w.Relist(ctx); err != nil {
					t.Error(err)
				}
			}
		})
	}
	for i := range 10 {
		wg.Go(func() {
			uid := types.UID(fmt.Sprintf("uid-%d", i))
			st, err := env.w.PodStatus(ctx, uid)
			if err != nil {
				t.Error(err)
				return
			}
			if i%2 == 0 { // removed, as the runtime manager removes a pod
				var containers, sandboxes []string
				for _, c := range st.Containers {
					if err := env.rs.RemoveContainer(ctx, c.ID); err != nil {
						t.Error(err)
					}
					containers = append(containers, c.ID)
				}
				for _, s := range st.Sandboxes {
					if err := env.rs.RemovePodSandbox(ctx, s.ID); err != nil {
						t.Error(err)
					}
					sandboxes = append(sandboxes, s.ID)
				}
				env.w.Forget(containers, sandboxes)
			}
		})
	}
	wg.Wait()
	pods, err := env.w.Relist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 5 {
		t.Errorf("%d pods left, want the 5 not removed", len(pods))
	}
}

// grpcNotFound makes the fake's "not found" errors the gRPC NotFound a real
// runtime returns, for tests where objects vanish between list and status.
type grpcNotFound struct{ *fakeapi.FakeRuntimeService }

func (f grpcNotFound) ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	resp, err := f.FakeRuntimeService.ContainerStatus(ctx, id, verbose)
	return resp, asGRPCNotFound(err)
}

func (f grpcNotFound) PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	resp, err := f.FakeRuntimeService.PodSandboxStatus(ctx, id, verbose)
	return resp, asGRPCNotFound(err)
}

func asGRPCNotFound(err error) error {
	if err != nil && strings.Contains(err.Error(), "not found") {
		return status.Error(codes.NotFound, err.Error())
	}
	return err
}

func TestTerminationMessageHostPath(t *testing.T) {
	status := func(annotation string, mounts ...*runtimeapi.Mount) *runtimeapi.ContainerStatus {
		return &runtimeapi.ContainerStatus{
			Metadata:    &runtimeapi.ContainerMetadata{Name: "app"},
			Annotations: map[string]string{criconfig.AnnotationTerminationMessagePath: annotation},
			Mounts:      mounts,
		}
	}
	own := &runtimeapi.Mount{ContainerPath: "/dev/termination-log", HostPath: "/var/lib/berth/pods/u/containers/app/1a2b3c4d"}
	tests := []struct {
		name string
		st   *runtimeapi.ContainerStatus
		want string
	}{
		{"berth's file", status("/dev/termination-log", &runtimeapi.Mount{ContainerPath: "/data", HostPath: "/srv"}, own), own.HostPath},
		{"no termination message path", status("", own), ""},
		{"a hostPath the manifest mounts there", status("/dev/termination-log",
			&runtimeapi.Mount{ContainerPath: "/dev/termination-log", HostPath: "/srv/important"}), ""},
		{"another container's directory", status("/dev/termination-log",
			&runtimeapi.Mount{ContainerPath: "/dev/termination-log", HostPath: "/var/lib/berth/pods/u/containers/other/1a2b"}), ""},
	}
	for _, tc := range tests {
		if got := terminationMessageHostPath(tc.st); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// runBounded is how a listing reads the statuses of many new objects (a
// restart, a power cut): at most n at once, every one of them or an error.
func TestRunBounded(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	boom := errors.New("boom")
	tests := []struct {
		name    string
		fns     int
		fail    int // index of the failing fn, -1 for none
		cancel  bool
		wantErr error
	}{
		{"none", 0, -1, false, nil},
		{"one runs inline", 1, -1, false, nil},
		{"many all run", 20, -1, false, nil},
		{"a failure is returned", 20, 7, false, boom},
		{"a cancelled caller gets its error, not a partial success", 20, -1, true, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancel {
				cancel()
			}
			var ran atomic.Int32
			fns := make([]func(context.Context) error, tt.fns)
			for i := range fns {
				fns[i] = func(context.Context) error {
					ran.Add(1)
					if i == tt.fail {
						return boom
					}
					return nil
				}
			}
			err := runBounded(ctx, fns, 4)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if tt.wantErr == nil && int(ran.Load()) != tt.fns {
				t.Errorf("%d of %d ran", ran.Load(), tt.fns)
			}
		})
	}
}

// The reads overlap, n at a time and no more: each one waits until n are
// in flight, which it could never see if they ran one after the other.
func TestRunBoundedOverlaps(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const n = 4
	var inFlight, peak atomic.Int32
	full := make(chan struct{})
	var once sync.Once
	fns := make([]func(context.Context) error, 3*n)
	for i := range fns {
		fns[i] = func(ctx context.Context) error {
			cur := inFlight.Add(1)
			defer inFlight.Add(-1)
			for p := peak.Load(); cur > p && !peak.CompareAndSwap(p, cur); p = peak.Load() {
			}
			if cur == n {
				once.Do(func() { close(full) })
			}
			select {
			case <-full:
				return nil
			case <-time.After(time.Minute):
				return errors.New("never saw the reads overlap")
			}
		}
	}
	if err := runBounded(context.Background(), fns, n); err != nil {
		t.Fatal(err)
	}
	if p := peak.Load(); p != n {
		t.Errorf("peak in flight = %d, want %d", p, n)
	}
}
