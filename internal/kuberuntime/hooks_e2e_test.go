//go:build e2e

package kuberuntime

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/berth-agent/berth/internal/handlers"
	"github.com/berth-agent/berth/internal/podplan"
	"github.com/berth-agent/berth/internal/runtimewatch/runtimewatchtest"
)

// TestE2EExecSync runs commands in a real container the way exec probes
// and hooks do: exit codes come back as results with their output, and a
// command that outlives its timeout is handlers.ErrExecTimeout (so a hung exec
// probe counts as failed, not as a broken probe) and returns soon after
// the timeout.
func TestE2EExecSync(t *testing.T) {
	m := newE2EManager(t)
	ctx := context.Background()
	p := startE2EPod(ctx, t, m, "exec", false, runtimewatchtest.Container{Name: "main", Script: "trap 'exit 0' TERM; while true; do sleep 1; done"})
	waitPodStatus(ctx, t, m, p.UID, "running", func(s *podplan.PodStatus) bool {
		c := s.FindContainer("main")
		return c != nil && c.State == podplan.ContainerStateRunning
	})
	id := p.Containers["main"]

	res, err := handlers.NewExecer(m.runtime).ExecSync(ctx, id, []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, 5*time.Second)
	if err != nil || res.ExitCode != 3 || string(res.Output) != "out\nerr\n" {
		t.Errorf("exit 3: %+v (%q), %v; want exit code 3 with stdout then stderr", res, res.Output, err)
	}
	if res, err := handlers.NewExecer(m.runtime).ExecSync(ctx, id, []string{"true"}, time.Second); err != nil || res.ExitCode != 0 {
		t.Errorf("true: %+v, %v", res, err)
	}
	start := time.Now()
	_, err = handlers.NewExecer(m.runtime).ExecSync(ctx, id, []string{"sleep", "30"}, time.Second)
	took := time.Since(start)
	if !errors.Is(err, handlers.ErrExecTimeout) {
		t.Errorf("sleep 30 with a 1s timeout: %v, want handlers.ErrExecTimeout", err)
	}
	if took > 10*time.Second {
		t.Errorf("a 1s exec timeout returned after %v", took)
	}
	t.Logf("exec timeout of 1s returned after %v: %v", took.Round(time.Millisecond), err)
	if _, err := handlers.NewExecer(m.runtime).ExecSync(ctx, "no-such-container", []string{"true"}, time.Second); err == nil || errors.Is(err, handlers.ErrExecTimeout) {
		t.Errorf("exec in a missing container: %v, want a plain error", err)
	}
}
