package bench

import (
	"context"
	"fmt"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// restartTarget is the bar for an agent that watches the runtime's
// container events; with a 1 s relist the reaction is bounded by the
// period instead.
var restartTarget = &Target{Text: "< 100 ms (events)", Limit: 100}

// figRestart times a container's death (SIGKILL to its process, as the OOM
// killer would) to its restart starting: the created_at containerd
// records for the replacement container, so the bench's polling adds no
// bias. Each pod dies once: a second death would wait out the crash-loop
// back-off.
func (r *runner) figRestart(ctx context.Context) error {
	if err := r.ensureAgent(ctx, fileAgent); err != nil {
		return err
	}
	ss := specs("restart", r.plan.latencyRuns, true)
	if err := r.ensurePods(ctx, ss); err != nil {
		return err
	}
	ctrs, err := r.waitRunning(ctx, names(ss), nil, 100*time.Millisecond, time.Minute)
	if err != nil {
		return err
	}
	var samples []float64
	for _, s := range ss {
		d, err := r.killAndWaitRestart(ctx, s.Name, ctrs[s.Name])
		if err != nil {
			return fmt.Errorf("restart %s: %w", s.Name, err)
		}
		samples = append(samples, ms(d))
	}
	var target *Target
	if r.bed.ContainerdAtLeast(1, 7) {
		target = restartTarget
	}
	r.res.add("restart: container killed -> replacement created", "ms", samples, target, "")
	return r.clear(ctx)
}

// killAndWaitRestart kills c's process and returns how long the agent took
// to create its replacement.
func (r *runner) killAndWaitRestart(ctx context.Context, name string, c *runtimeapi.Container) (time.Duration, error) {
	pid, err := r.containerPID(ctx, c.GetId())
	if err != nil {
		return 0, err
	}
	killed := time.Now()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return 0, fmt.Errorf("kill pid %d: %w", pid, err)
	}
	var created time.Time
	pod := r.runtimePodName(name)
	err = r.poll(ctx, 5*time.Millisecond, 30*time.Second, "replacement of "+name, func() (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, criTimeout)
		defer cancel()
		resp, err := r.rt.ListContainers(cctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
			LabelSelector: map[string]string{labelPodName: pod},
		}})
		if err != nil {
			return false, fmt.Errorf("list containers: %w", err)
		}
		for _, n := range resp.GetContainers() {
			if n.GetId() != c.GetId() {
				created = time.Unix(0, n.GetCreatedAt())
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return 0, err
	}
	return created.Sub(killed), nil
}
