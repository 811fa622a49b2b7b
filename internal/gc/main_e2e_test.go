//go:build e2e

package gc

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/e2e/testbed"
	"github.com/berth-agent/berth/internal/criclient"
	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/podplan"
)

// testBed is the real containerd every e2e test of this package shares.
var testBed *testbed.Bed

func TestMain(m *testing.M) { os.Exit(testbed.Main(m, testbed.Options{}, &testBed)) }

// e2eEnv is a runtime manager and a collector dialed to the test bed, with
// their own root and log directories.
type e2eEnv struct {
	m    *kuberuntime.Manager
	gc   *Collector
	rs   internalapi.RuntimeService
	is   internalapi.ImageManagerService
	logs string
}

// newE2EEnv dials the test bed; the connection closes when t ends.
func newE2EEnv(t *testing.T) *e2eEnv {
	t.Helper()
	rs, is, err := criclient.Dial(testBed.Endpoint, "", 30*time.Second)
	if err != nil {
		t.Fatalf("dial the test bed: %v", err)
	}
	t.Cleanup(func() {
		if err := rs.Close(context.Background()); err != nil {
			t.Errorf("close runtime connection: %v", err)
		}
	})
	root, logs := t.TempDir(), t.TempDir()
	m := kuberuntime.NewManager(rs, is, kuberuntime.Options{NodeName: "e2e", RootDir: root, PodLogsDir: logs})
	return &e2eEnv{m: m, gc: New(rs, is, m, Options{RootDir: root, PodLogsDir: logs}), rs: rs, is: is, logs: logs}
}

// startE2EPod runs a host-network sandbox with one busybox container "app"
// running script, labelled as berth labels its pods; it is removed when t
// ends. It returns the pod's UID.
func startE2EPod(ctx context.Context, t *testing.T, env *e2eEnv, name, script string) types.UID {
	t.Helper()
	uid := types.UID(fmt.Sprintf("%s-%d", name, time.Now().UnixNano()))
	labels := map[string]string{criconfig.LabelPodName: name, criconfig.LabelPodNamespace: "default", criconfig.LabelPodUID: string(uid), criconfig.LabelManaged: "true"}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: string(uid)},
		LogDirectory: filepath.Join(env.logs, "default_"+name+"_"+string(uid)),
		Labels:       labels,
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_CONTAINER},
		}},
	}
	sandbox, err := env.rs.RunPodSandbox(ctx, cfg, "")
	if err != nil {
		t.Fatalf("RunPodSandbox %s: %v", name, err)
	}
	t.Cleanup(func() {
		_ = env.rs.StopPodSandbox(context.Background(), sandbox)
		_ = env.rs.RemovePodSandbox(context.Background(), sandbox)
	})
	cl := map[string]string{criconfig.LabelContainerName: "app"}
	for k, v := range labels {
		cl[k] = v
	}
	id, err := env.rs.CreateContainer(ctx, sandbox, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Image:    &runtimeapi.ImageSpec{Image: testBed.BusyboxImage, UserSpecifiedImage: testBed.BusyboxImage},
		// The sandbox's namespaces, as the kubelet passes them: CRI-O
		// refuses a container whose PID namespace differs.
		Linux:   &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: cfg.Linux.SecurityContext.NamespaceOptions}},
		Command: []string{"sh", "-c", script},
		LogPath: "app/0.log",
		Labels:  cl,
	}, cfg)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	if err := env.rs.StartContainer(ctx, id); err != nil {
		t.Fatalf("StartContainer: %v", err)
	}
	return uid
}

// waitPodStatus polls PodStatus until ok accepts it.
func waitPodStatus(ctx context.Context, t *testing.T, m *kuberuntime.Manager, uid types.UID, what string, ok func(*podplan.PodStatus) bool) *podplan.PodStatus {
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
