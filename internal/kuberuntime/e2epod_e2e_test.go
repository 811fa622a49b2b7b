//go:build e2e

package kuberuntime

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/podplan"
)

// e2eContainer is one busybox container of an e2ePod, running script.
type e2eContainer struct{ name, script string }

// e2ePod is a pod created through CRI directly, labelled as berth labels
// its pods, so observation and killing can be tested before the
// pod-to-config translation exists.
type e2ePod struct {
	uid        types.UID
	name       string
	sandboxID  string
	logDir     string
	containers map[string]string // name -> ID
}

// startE2EPod runs a sandbox with the given containers on the test bed via
// m's runtime, with its logs in m's PodLogsDir; it is removed when t ends.
func startE2EPod(ctx context.Context, t *testing.T, m *Manager, name string, hostNetwork bool, containers ...e2eContainer) *e2ePod {
	t.Helper()
	p := &e2ePod{uid: types.UID(fmt.Sprintf("%s-%d", name, time.Now().UnixNano())), name: name, containers: map[string]string{}}
	p.logDir = filepath.Join(m.opts.PodLogsDir, "default_"+name+"_"+string(p.uid))
	labels := map[string]string{criconfig.LabelPodName: name, criconfig.LabelPodNamespace: "default", criconfig.LabelPodUID: string(p.uid), criconfig.LabelManaged: "true"}
	netMode := runtimeapi.NamespaceMode_POD
	hostname := name
	if hostNetwork {
		netMode, hostname = runtimeapi.NamespaceMode_NODE, ""
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: string(p.uid)},
		Hostname:     hostname,
		LogDirectory: p.logDir,
		Labels:       labels,
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: netMode, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD},
		}},
	}
	var err error
	if p.sandboxID, err = m.runtime.RunPodSandbox(ctx, cfg, ""); err != nil {
		t.Fatalf("RunPodSandbox %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		_ = m.runtime.StopPodSandbox(ctx, p.sandboxID)
		_ = m.runtime.RemovePodSandbox(ctx, p.sandboxID)
	})
	for _, c := range containers {
		cl := map[string]string{criconfig.LabelContainerName: c.name}
		for k, v := range labels {
			cl[k] = v
		}
		id, err := m.runtime.CreateContainer(ctx, p.sandboxID, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: c.name},
			Image:    &runtimeapi.ImageSpec{Image: testBed.BusyboxImage, UserSpecifiedImage: testBed.BusyboxImage},
			// The sandbox's namespaces, as the kubelet passes them: CRI-O
			// refuses a container whose PID namespace differs.
			Linux:   &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: cfg.Linux.SecurityContext.NamespaceOptions}},
			Command: []string{"sh", "-c", c.script},
			LogPath: c.name + "/0.log",
			Labels:  cl,
			Annotations: map[string]string{
				criconfig.AnnotationContainerHash:         "abc123",
				criconfig.AnnotationContainerRestartCount: "2",
				criconfig.AnnotationContainerImage:        "busybox:1.36",
			},
		}, cfg)
		if err != nil {
			t.Fatalf("CreateContainer %s: %v", c.name, err)
		}
		if err := m.runtime.StartContainer(ctx, id); err != nil {
			t.Fatalf("StartContainer %s: %v", c.name, err)
		}
		p.containers[c.name] = id
	}
	return p
}

// waitPodStatus polls podplan.PodStatus until ok accepts it.
func waitPodStatus(ctx context.Context, t *testing.T, m *Manager, uid types.UID, what string, ok func(*podplan.PodStatus) bool) *podplan.PodStatus {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, err := m.PodStatus(ctx, uid)
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

// totalOps sums berth_runtime_operations_total over all operations.
func totalOps(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "berth_runtime_operations_total" {
			for _, m := range mf.Metric {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}
