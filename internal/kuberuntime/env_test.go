package kuberuntime

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeapi "k8s.io/cri-api/pkg/apis/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/criconfig"
)

// criTestEnv is a Manager over the cri-api fakes, a fake clock and a
// recorder that keeps events, for the image, kill and removal tests.
type criTestEnv struct {
	m      *Manager
	rs     *fakeapi.FakeRuntimeService
	is     *fakeapi.FakeImageService
	clock  *clocktesting.FakeClock
	events *eventLog
}

func newCRITestEnv(t *testing.T) *criTestEnv {
	t.Helper()
	env := &criTestEnv{
		rs:     fakeapi.NewFakeRuntimeService(),
		is:     fakeapi.NewFakeImageService(),
		clock:  clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0)),
		events: &eventLog{},
	}
	env.is.SetFakeImageSize(1234)
	env.m = NewManager(env.rs, env.is, Options{Clock: env.clock, Recorder: env.events, PodLogsDir: t.TempDir()})
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

// eventLog is a Recorder keeping "Type Reason: message" lines.
type eventLog struct {
	mu     sync.Mutex // guards events
	events []string
}

func (l *eventLog) Event(_ types.UID, _, _ string, typ EventType, reason, message string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.events = append(l.events, fmt.Sprintf("%s %s: %s", typ, reason, message))
}

// take returns the events recorded since the last take.
func (l *eventLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.events
	l.events = nil
	return e
}

var baseTime = time.Unix(1_700_000_000, 0)

// podLabels are the labels berth puts on a pod's objects.
func podLabels(uid, name string) map[string]string {
	return map[string]string{
		criconfig.LabelPodUID: uid, criconfig.LabelPodName: name, criconfig.LabelPodNamespace: "default", criconfig.LabelManaged: "true",
	}
}

// fakeSandbox is a ready sandbox of pod uid on the pod network.
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

// fakeContainer is a running container "app" of pod uid in sandbox.
func fakeContainer(id, sandbox, uid string, created time.Duration) *fakeapi.FakeContainer {
	labels := podLabels(uid, "web-node")
	labels[criconfig.LabelContainerName] = "app"
	return &fakeapi.FakeContainer{
		SandboxID: sandbox,
		ContainerStatus: runtimeapi.ContainerStatus{
			Id:        id,
			Metadata:  &runtimeapi.ContainerMetadata{Name: "app"},
			State:     runtimeapi.ContainerState_CONTAINER_RUNNING,
			CreatedAt: baseTime.Add(created).UnixNano(),
			StartedAt: baseTime.Add(created + time.Second).UnixNano(),
			Image:     &runtimeapi.ImageSpec{Image: "docker.io/library/busybox:1.36"},
			ImageRef:  "docker.io/library/busybox@sha256:abc",
			Labels:    labels,
			Annotations: map[string]string{
				criconfig.AnnotationContainerHash:         "1f2e3d",
				criconfig.AnnotationContainerRestartCount: "0",
				criconfig.AnnotationContainerImage:        "busybox:1.36",
			},
		},
	}
}

// setPods fills the fake runtime with n pods of one sandbox and one running
// container each.
func (e *criTestEnv) setPods(n int) {
	var sandboxes []*fakeapi.FakePodSandbox
	var containers []*fakeapi.FakeContainer
	for i := range n {
		uid := fmt.Sprintf("uid-%d", i)
		sandboxes = append(sandboxes, fakeSandbox("s-"+uid, uid, 0))
		containers = append(containers, fakeContainer("c-"+uid, "s-"+uid, uid, time.Second))
	}
	e.rs.SetFakeSandboxes(sandboxes)
	e.rs.SetFakeContainers(containers)
}

func count(calls []string, name string) int {
	n := 0
	for _, c := range calls {
		if c == name {
			n++
		}
	}
	return n
}
