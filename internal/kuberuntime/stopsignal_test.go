package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeri "k8s.io/cri-api/pkg/apis/testing"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/podplan"
)

func TestSignalNumber(t *testing.T) {
	tests := []struct {
		name string
		want unix.Signal
		ok   bool
	}{
		{"SIGTERM", unix.SIGTERM, true},
		{"SIGUSR1", unix.SIGUSR1, true},
		{"SIGQUIT", unix.SIGQUIT, true},
		{"SIGCLD", unix.SIGCHLD, true},
		{"SIGPOLL", unix.SIGIO, true},
		{"SIGRTMIN", 34, true},
		{"SIGRTMIN+3", 37, true},
		{"SIGRTMAX-1", 63, true},
		{"SIGRTMAX", 64, true},
		{"SIGRTMIN+40", 0, false},
		{"SIGRTMAX-x", 0, false},
		{"SIGNOPE", 0, false},
		{"", 0, false},
	}
	for _, tt := range tests {
		got, ok := signalNumber(tt.name)
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("signalNumber(%q) = %d, %v, want %d, %v", tt.name, got, ok, tt.want, tt.ok)
		}
	}
}

// pidRuntime is the fake runtime, answering verbose statuses with a pid as
// containerd does.
type pidRuntime struct {
	*fakeri.FakeRuntimeService
	pid int
}

func (r *pidRuntime) ContainerStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	resp, err := r.FakeRuntimeService.ContainerStatus(ctx, id, verbose)
	if err == nil && verbose && r.pid != 0 {
		resp.Info = map[string]string{"info": fmt.Sprintf(`{"pid":%d}`, r.pid)}
	}
	return resp, err
}

// stopSignalFixture is a Manager over pidRuntime with one running
// container "c1" that records the stop signal sig.
func stopSignalFixture(t *testing.T, pid int, sig string) (*Manager, *pidRuntime, *syncRecorder, *podplan.ContainerStatus) {
	t.Helper()
	events := &syncRecorder{}
	_, rt, img := newCfgManager(t, Options{})
	prt := &pidRuntime{FakeRuntimeService: rt, pid: pid}
	m := NewManager(prt, img, Options{Recorder: events, RootDir: t.TempDir(), PodLogsDir: t.TempDir()})
	m.preStop = nil
	rt.SetFakeContainers([]*fakeri.FakeContainer{{SandboxID: "sb1", ContainerStatus: runtimeapi.ContainerStatus{
		Id: "c1", State: runtimeapi.ContainerState_CONTAINER_RUNNING, Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
	}}})
	c := &podplan.ContainerStatus{ID: "c1", Name: "app", State: podplan.ContainerStateRunning, Labels: managed,
		Annotations: map[string]string{criconfig.AnnotationStopSignal: sig}}
	return m, prt, events, c
}

// TestKillContainerDeliversStopSignal: berth sends the stop signal to the
// container's process itself, sees it exit, and lets the runtime finish
// with no further grace.
func TestKillContainerDeliversStopSignal(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep binary:", err)
	}
	m, rt, events, c := stopSignalFixture(t, cmd.Process.Pid, "SIGUSR1")
	pod := syncPod("app")
	grace := int64(30)
	if err := m.KillContainer(context.Background(), pod, c, "test", "", &grace); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("sleep ended with %v, want killed by a signal", err)
	}
	if ws := exit.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != syscall.SIGUSR1 {
		t.Errorf("sleep ended with %v, want killed by SIGUSR1", ws)
	}
	if got := events.take(); slices.Contains(got, "StopSignalFailed") {
		t.Errorf("events %v: the signal was delivered", got)
	}
	rt.Lock()
	calls := rt.Called
	rt.Unlock()
	if !slices.Contains(calls, "StopContainer") {
		t.Errorf("calls %v: the runtime must finish the stop", calls)
	}
}

// TestKillContainerStopSignalFallback: without a pid from the runtime the
// stop still happens, through the runtime with the grace period, and a
// Warning event says the signal was not delivered.
func TestKillContainerStopSignalFallback(t *testing.T) {
	m, rt, events, c := stopSignalFixture(t, 0, "SIGUSR1")
	grace := int64(5)
	if err := m.KillContainer(context.Background(), syncPod("app"), c, "test", "", &grace); err != nil {
		t.Fatal(err)
	}
	if got := events.take(); !slices.Contains(got, "StopSignalFailed") {
		t.Errorf("events %v, want StopSignalFailed", got)
	}
	rt.Lock()
	defer rt.Unlock()
	if st := rt.Containers["c1"].State; st != runtimeapi.ContainerState_CONTAINER_EXITED {
		t.Errorf("container state %v, want stopped by the runtime", st)
	}
}

// TestContainerConfigStopSignal: the signal goes to the runtime in CRI's
// field and onto the container, for berth's own kill path.
func TestContainerConfigStopSignal(t *testing.T) {
	m, _, _ := newCfgManager(t, Options{})
	pod := syncPod("app")
	sig := v1.SIGRTMINPLUS3
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{StopSignal: &sig}
	cfg, err := m.containerConfig(context.Background(), pod, &pod.Spec.Containers[0], 0, []string{"10.88.0.9"}, "sha256:abc")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.StopSignal != runtimeapi.Signal_SIGNAL_SIGRTMINPLUS3 || cfg.Annotations[criconfig.AnnotationStopSignal] != "SIGRTMIN+3" {
		t.Errorf("stop signal %v, annotation %q", cfg.StopSignal, cfg.Annotations[criconfig.AnnotationStopSignal])
	}
	pod.Spec.Containers[0].Lifecycle = nil
	cfg, err = m.containerConfig(context.Background(), pod, &pod.Spec.Containers[0], 0, []string{"10.88.0.9"}, "sha256:abc")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.Annotations[criconfig.AnnotationStopSignal]; ok || cfg.StopSignal != runtimeapi.Signal_SIGNAL_RUNTIME_DEFAULT {
		t.Errorf("without a stop signal: %v, %v", cfg.StopSignal, cfg.Annotations)
	}
}
