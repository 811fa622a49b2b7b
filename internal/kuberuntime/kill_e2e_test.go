//go:build e2e

package kuberuntime

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/podplan"
	"github.com/berth-agent/berth/internal/runtimewatch/runtimewatchtest"
)

// TestE2EKillPodGracePeriod kills a pod whose one container handles TERM
// (taking 2 s to finish) and whose other ignores it: the first exits 0 on
// its own, the second is killed when the grace period runs out, both in
// one grace period since containers are stopped in parallel. Then the pod
// is removed with its logs.
func TestE2EKillPodGracePeriod(t *testing.T) {
	m := newE2EManager(t)
	events := &eventLog{}
	m.opts.Recorder = events
	ctx := context.Background()
	p := startE2EPod(ctx, t, m, "graceful", false,
		runtimewatchtest.Container{Name: "trap", Script: `trap "echo got TERM; sleep 2; exit 0" TERM; echo ready; while true; do sleep 0.1; done`},
		runtimewatchtest.Container{Name: "ignore", Script: `trap "" TERM; echo ready; while true; do sleep 0.1; done`})
	st := waitPodStatus(ctx, t, m, p.UID, "both running", func(s *podplan.PodStatus) bool {
		for _, c := range s.Containers {
			if c.State != podplan.ContainerStateRunning {
				return false
			}
		}
		return len(s.Containers) == 2
	})
	// Running is the process started, not its trap set: until the shell
	// has run its first line a TERM finds runc's init or a shell without
	// the trap, and the container ends by it (exit code 2 from runc's
	// init) instead of handling or ignoring it. Each shell echoes once its
	// trap is in place; wait for both.
	trapLog := filepath.Join(p.LogDir, "trap", "0.log")
	waitLog(t, trapLog, "ready")
	waitLog(t, filepath.Join(p.LogDir, "ignore", "0.log"), "ready")

	const grace = 4
	pod := &v1.Pod{}
	pod.UID, pod.Name, pod.Namespace = p.UID, p.Name, "default"
	pod.Spec.TerminationGracePeriodSeconds = ptr[int64](grace)
	start := time.Now()
	if err := m.KillPod(ctx, pod, st, nil); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)

	st, err := m.PodStatus(ctx, p.UID)
	if err != nil {
		t.Fatal(err)
	}
	trap, ignore := st.FindContainer("trap"), st.FindContainer("ignore")
	if trap.State != podplan.ContainerStateExited || trap.ExitCode != 0 {
		t.Errorf("trap: state %s exit code %d, want exited 0", trap.State, trap.ExitCode)
	}
	if ignore.State != podplan.ContainerStateExited || ignore.ExitCode != 137 {
		// The shell's own complaint, if any, says why it ended early.
		out, err := os.ReadFile(filepath.Join(p.LogDir, "ignore", "0.log"))
		t.Errorf("ignore: state %s exit code %d, want exited 137 (SIGKILL); its log (%v):\n%s", ignore.State, ignore.ExitCode, err, out)
	}
	if !trap.FinishedAt.Before(ignore.FinishedAt) {
		t.Errorf("trap finished at %v, not before ignore at %v", trap.FinishedAt, ignore.FinishedAt)
	}
	if took < (grace-1)*time.Second || took > 2*grace*time.Second {
		t.Errorf("KillPod took %v; want about the %ds grace period once, not per container", took, grace)
	}
	if st.Sandboxes[0].State != podplan.SandboxStateNotReady {
		t.Errorf("sandbox is %s after KillPod", st.Sandboxes[0].State)
	}
	log, err := os.ReadFile(trapLog)
	if err != nil || !strings.Contains(string(log), "got TERM") {
		t.Errorf("trap log %q (%v) lacks the TERM handler's output", log, err)
	}
	t.Logf("KillPod took %v; trap exited 0 after %v, ignore killed after %v; events %q", took,
		trap.FinishedAt.Sub(start).Round(time.Millisecond), ignore.FinishedAt.Sub(start).Round(time.Millisecond), events.take())

	if err := m.RemovePod(ctx, st); err != nil {
		t.Fatal(err)
	}
	pods, err := m.Relist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pods[p.UID]; ok {
		t.Error("pod still on the runtime after RemovePod")
	}
	if _, err := os.Stat(p.LogDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pod log directory %s left behind: %v", p.LogDir, err)
	}
	if err := m.RemovePod(ctx, st); err != nil {
		t.Errorf("RemovePod of a removed pod: %v", err)
	}
}
