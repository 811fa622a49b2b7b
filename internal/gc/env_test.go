package gc

import (
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeapi "k8s.io/cri-api/pkg/apis/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/kuberuntime"
)

// gcTestEnv is a Collector and the runtime manager whose relists feed it,
// over the cri-api fakes and a fake clock, with root and log directories
// of their own.
type gcTestEnv struct {
	m          *kuberuntime.Manager
	gc         *Collector
	rs         *fakeapi.FakeRuntimeService
	is         *fakeapi.FakeImageService
	clock      *clocktesting.FakeClock
	root, logs string
}

func newGCTestEnv(t *testing.T) *gcTestEnv {
	t.Helper()
	return newGCTestEnvIn(t, t.TempDir(), t.TempDir())
}

// newGCTestEnvIn is newGCTestEnv over the given root and log directories.
func newGCTestEnvIn(t *testing.T, root, logs string) *gcTestEnv {
	t.Helper()
	env := &gcTestEnv{
		rs:    fakeapi.NewFakeRuntimeService(),
		is:    fakeapi.NewFakeImageService(),
		clock: clocktesting.NewFakeClock(baseTime),
		root:  root,
		logs:  logs,
	}
	env.is.SetFakeImageSize(1234)
	env.m = kuberuntime.NewManager(env.rs, env.is, kuberuntime.Options{Clock: env.clock, RootDir: root, PodLogsDir: logs})
	env.gc = New(env.rs, env.is, env.m, Options{Clock: env.clock, RootDir: root, PodLogsDir: logs})
	return env
}

// calls returns the runtime calls made since the last calls.
func (e *gcTestEnv) calls() []string {
	e.rs.Lock()
	defer e.rs.Unlock()
	c := e.rs.Called
	e.rs.Called = nil
	return c
}

var baseTime = time.Unix(1_700_000_000, 0)

// podLabels are the labels berth puts on a pod's objects.
func podLabels(uid, name string) map[string]string {
	return map[string]string{
		criconfig.LabelPodUID: uid, criconfig.LabelPodName: name, criconfig.LabelPodNamespace: "default", criconfig.LabelManaged: "true",
	}
}

// fakeSandbox is a ready sandbox of pod uid, created at baseTime+created.
func fakeSandbox(id, uid string, created time.Duration) *fakeapi.FakePodSandbox {
	return &fakeapi.FakePodSandbox{PodSandboxStatus: runtimeapi.PodSandboxStatus{
		Id:        id,
		Metadata:  &runtimeapi.PodSandboxMetadata{Name: "web-node", Namespace: "default", Uid: uid},
		State:     runtimeapi.PodSandboxState_SANDBOX_READY,
		CreatedAt: baseTime.Add(created).UnixNano(),
		Network:   &runtimeapi.PodSandboxNetworkStatus{Ip: "10.88.0.2"},
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{
			Network: runtimeapi.NamespaceMode_POD,
		}}},
		Labels: podLabels(uid, "web-node"),
	}}
}

// mustPath unwraps a path helper's result, failing the test on error.
func mustPath(t *testing.T) func(string, error) string {
	return func(p string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
}
