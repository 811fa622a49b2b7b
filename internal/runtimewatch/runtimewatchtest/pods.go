package runtimewatchtest

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/podplan"
)

// Container is one container of a Pod, running Script with sh -c.
type Container struct{ Name, Script string }

// Pod is a pod created through CRI directly, labelled as berth labels
// its pods, so observation and killing are tested without the pod-to-CRI
// translation.
type Pod struct {
	UID        types.UID
	Name       string
	SandboxID  string
	LogDir     string
	Containers map[string]string // name -> ID
}

// StartPod runs a sandbox with the given containers of image on a real
// runtime, with its logs under podLogsDir; it is removed when t ends.
func StartPod(ctx context.Context, t testing.TB, rs internalapi.RuntimeService, image, podLogsDir, name string, hostNetwork bool, containers ...Container) *Pod {
	t.Helper()
	p := &Pod{UID: types.UID(fmt.Sprintf("%s-%d", name, time.Now().UnixNano())), Name: name, Containers: map[string]string{}}
	p.LogDir = filepath.Join(podLogsDir, "default_"+name+"_"+string(p.UID))
	labels := map[string]string{criconfig.LabelPodName: name, criconfig.LabelPodNamespace: "default", criconfig.LabelPodUID: string(p.UID), criconfig.LabelManaged: "true"}
	netMode := runtimeapi.NamespaceMode_POD
	hostname := name
	if hostNetwork {
		netMode, hostname = runtimeapi.NamespaceMode_NODE, ""
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: string(p.UID)},
		Hostname:     hostname,
		LogDirectory: p.LogDir,
		Labels:       labels,
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: netMode, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD},
		}},
	}
	var err error
	if p.SandboxID, err = rs.RunPodSandbox(ctx, cfg, ""); err != nil {
		t.Fatalf("RunPodSandbox %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = rs.StopPodSandbox(ctx, p.SandboxID)
		_ = rs.RemovePodSandbox(ctx, p.SandboxID)
	})
	for _, c := range containers {
		cl := map[string]string{criconfig.LabelContainerName: c.Name}
		for k, v := range labels {
			cl[k] = v
		}
		id, err := rs.CreateContainer(ctx, p.SandboxID, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: c.Name},
			Image:    &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: image},
			// The sandbox's namespaces, as the kubelet passes them: CRI-O
			// refuses a container whose PID namespace differs.
			Linux:   &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: cfg.Linux.SecurityContext.NamespaceOptions}},
			Command: []string{"sh", "-c", c.Script},
			LogPath: c.Name + "/0.log",
			Labels:  cl,
			Annotations: map[string]string{
				criconfig.AnnotationContainerHash:         "abc123",
				criconfig.AnnotationContainerRestartCount: "2",
				criconfig.AnnotationContainerImage:        "busybox:1.36",
			},
		}, cfg)
		if err != nil {
			t.Fatalf("CreateContainer %s: %v", c.Name, err)
		}
		if err := rs.StartContainer(ctx, id); err != nil {
			t.Fatalf("StartContainer %s: %v", c.Name, err)
		}
		p.Containers[c.Name] = id
	}
	return p
}

// WaitPodStatus polls the pod's status, as read reads it, until ok
// accepts it, for at most 30 seconds.
func WaitPodStatus(ctx context.Context, t testing.TB, read func(context.Context, types.UID) (*podplan.PodStatus, error), uid types.UID, what string, ok func(*podplan.PodStatus) bool) *podplan.PodStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := read(ctx, uid)
		if err != nil {
			t.Fatal(err)
		}
		if ok(st) {
			return st
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: pod status after 30s: %+v", what, st)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
