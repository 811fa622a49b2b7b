package runtimewatchtest

import (
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeapi "k8s.io/cri-api/pkg/apis/testing"

	"github.com/berth-agent/berth/internal/criconfig"
)

// BaseTime is when the fake objects were created, give or take the
// offsets their makers take.
var BaseTime = time.Unix(1_700_000_000, 0)

// PodLabels are the labels berth puts on a pod's objects.
func PodLabels(uid, name string) map[string]string {
	return map[string]string{
		criconfig.LabelPodUID: uid, criconfig.LabelPodName: name, criconfig.LabelPodNamespace: "default", criconfig.LabelManaged: "true",
	}
}

// FakeSandbox is a ready sandbox of pod uid on the pod network.
func FakeSandbox(id, uid string, created time.Duration) *fakeapi.FakePodSandbox {
	return &fakeapi.FakePodSandbox{PodSandboxStatus: runtimeapi.PodSandboxStatus{
		Id:        id,
		Metadata:  &runtimeapi.PodSandboxMetadata{Name: "web-node", Namespace: "default", Uid: uid},
		State:     runtimeapi.PodSandboxState_SANDBOX_READY,
		CreatedAt: BaseTime.Add(created).UnixNano(),
		Network:   &runtimeapi.PodSandboxNetworkStatus{Ip: "10.88.0.2"},
		Linux: &runtimeapi.LinuxPodSandboxStatus{Namespaces: &runtimeapi.Namespace{Options: &runtimeapi.NamespaceOption{
			Network: runtimeapi.NamespaceMode_POD,
		}}},
		Labels: PodLabels(uid, "web-node"),
	}}
}

// FakeContainer is a running container "app" of pod uid in sandbox.
func FakeContainer(id, sandbox, uid string, created time.Duration) *fakeapi.FakeContainer {
	labels := PodLabels(uid, "web-node")
	labels[criconfig.LabelContainerName] = "app"
	return &fakeapi.FakeContainer{
		SandboxID: sandbox,
		ContainerStatus: runtimeapi.ContainerStatus{
			Id:        id,
			Metadata:  &runtimeapi.ContainerMetadata{Name: "app"},
			State:     runtimeapi.ContainerState_CONTAINER_RUNNING,
			CreatedAt: BaseTime.Add(created).UnixNano(),
			StartedAt: BaseTime.Add(created + time.Second).UnixNano(),
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

// SetPods fills the fake runtime with n pods of one sandbox and one
// running container each: pod uid-<i> has sandbox s-uid-<i> and
// container c-uid-<i>.
func SetPods(rs *fakeapi.FakeRuntimeService, n int) {
	var sandboxes []*fakeapi.FakePodSandbox
	var containers []*fakeapi.FakeContainer
	for i := range n {
		uid := fmt.Sprintf("uid-%d", i)
		sandboxes = append(sandboxes, FakeSandbox("s-"+uid, uid, 0))
		containers = append(containers, FakeContainer("c-"+uid, "s-"+uid, uid, time.Second))
	}
	rs.SetFakeSandboxes(sandboxes)
	rs.SetFakeContainers(containers)
}

// Count counts the calls named name.
func Count(calls []string, name string) int {
	n := 0
	for _, c := range calls {
		if c == name {
			n++
		}
	}
	return n
}
