package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criTimeout bounds one CRI call of the bench.
const criTimeout = 10 * time.Second

// runtimePodName is the pod name an agent gives a static pod's manifest
// (metadata.name + "-" + node), as found in the runtime's labels.
func (r *runner) runtimePodName(name string) string { return name + "-" + r.node }

// running lists the bed's RUNNING containers by runtime pod name: one
// ListContainers call per look, however many pods are awaited.
func (r *runner) running(ctx context.Context) (map[string][]*runtimeapi.Container, error) {
	cctx, cancel := context.WithTimeout(ctx, criTimeout)
	defer cancel()
	resp, err := r.rt.ListContainers(cctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	}})
	if err != nil {
		return nil, fmt.Errorf("list running containers: %w", err)
	}
	out := map[string][]*runtimeapi.Container{}
	for _, c := range resp.GetContainers() {
		pod := c.GetLabels()[labelPodName]
		out[pod] = append(out[pod], c)
	}
	return out, nil
}

// poll calls cond every interval until it reports done, failing on
// timeout, on ctx's end, on cond's error, or as soon as the agent exits.
func (r *runner) poll(ctx context.Context, every, timeout time.Duration, what string, cond func() (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		if r.agent != nil {
			if err := r.agent.alive(); err != nil {
				return fmt.Errorf("waiting for %s: %w", what, err)
			}
		}
		done, err := cond()
		if err != nil {
			return fmt.Errorf("waiting for %s: %w", what, err)
		}
		if done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("waiting for %s: timed out after %s", what, timeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(every):
		}
	}
}

// waitRunning waits until every named pod has a RUNNING container whose
// ID is not in old (the containers of a pod an edit replaces), and returns
// those containers by manifest name once their shells are ready for TERM
// (see waitTrapped).
func (r *runner) waitRunning(ctx context.Context, manifestNames []string, old map[string]bool, every, timeout time.Duration) (map[string]*runtimeapi.Container, error) {
	found := map[string]*runtimeapi.Container{}
	err := r.poll(ctx, every, timeout, fmt.Sprintf("%d pods running", len(manifestNames)), func() (bool, error) {
		snap, err := r.running(ctx)
		if err != nil {
			return false, err
		}
		for _, n := range manifestNames {
			if found[n] != nil {
				continue
			}
			for _, c := range snap[r.runtimePodName(n)] {
				if !old[c.GetId()] {
					found[n] = c
					break
				}
			}
		}
		return len(found) == len(manifestNames), nil
	})
	if err != nil {
		return nil, err
	}
	return found, r.waitTrapped(ctx, found)
}

// lastStart is the latest started_at containerd recorded for the
// containers: the moment the last of them was RUNNING, free of the bias
// of the bench's polling period.
func (r *runner) lastStart(ctx context.Context, ctrs map[string]*runtimeapi.Container) (time.Time, error) {
	starts, err := r.startTimes(ctx, ctrs)
	if err != nil {
		return time.Time{}, err
	}
	return starts[len(starts)-1], nil
}

// startTimes are the containers' started_at, in order.
func (r *runner) startTimes(ctx context.Context, ctrs map[string]*runtimeapi.Container) ([]time.Time, error) {
	if len(ctrs) == 0 {
		return nil, fmt.Errorf("no containers")
	}
	var starts []time.Time
	for _, c := range ctrs {
		st, err := r.containerStatus(ctx, c.GetId())
		if err != nil {
			return nil, err
		}
		if st == nil || st.GetStartedAt() == 0 {
			return nil, fmt.Errorf("container %s: no started_at", c.GetId())
		}
		starts = append(starts, time.Unix(0, st.GetStartedAt()))
	}
	slices.SortFunc(starts, func(a, b time.Time) int { return a.Compare(b) })
	return starts, nil
}

// containerStatus is one container's CRI status, or nil when the runtime
// no longer knows it (an agent may remove a stopped pod's containers).
func (r *runner) containerStatus(ctx context.Context, id string) (*runtimeapi.ContainerStatus, error) {
	cctx, cancel := context.WithTimeout(ctx, criTimeout)
	defer cancel()
	resp, err := r.rt.ContainerStatus(cctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if status.Code(err) == codes.NotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("container %s status: %w", id, err)
	}
	return resp.GetStatus(), nil
}

// waitGone waits until no named pod has a RUNNING container and returns
// when they stopped: the latest finished_at containerd recorded for ids,
// or, for a container already removed, the moment the bench saw it gone.
func (r *runner) waitGone(ctx context.Context, manifestNames []string, ids []string, every, timeout time.Duration) (time.Time, error) {
	var seen time.Time
	err := r.poll(ctx, every, timeout, fmt.Sprintf("%d pods gone", len(manifestNames)), func() (bool, error) {
		snap, err := r.running(ctx)
		if err != nil {
			return false, err
		}
		seen = time.Now()
		for _, n := range manifestNames {
			if len(snap[r.runtimePodName(n)]) > 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return time.Time{}, err
	}
	var last time.Time
	for _, id := range ids {
		t := seen
		st, err := r.containerStatus(ctx, id)
		if err != nil {
			return time.Time{}, err
		}
		if st != nil && st.GetFinishedAt() != 0 {
			t = time.Unix(0, st.GetFinishedAt())
		}
		if t.After(last) {
			last = t
		}
	}
	return last, nil
}

// podIDs lists the IDs of the named pods' running containers.
func (r *runner) podIDs(ctx context.Context, manifestNames []string) ([]string, error) {
	snap, err := r.running(ctx)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, n := range manifestNames {
		for _, c := range snap[r.runtimePodName(n)] {
			ids = append(ids, c.GetId())
		}
	}
	return ids, nil
}

// allRunningIDs is the set of every RUNNING container in the bed.
func (r *runner) allRunningIDs(ctx context.Context) (map[string]bool, error) {
	snap, err := r.running(ctx)
	if err != nil {
		return nil, err
	}
	ids := map[string]bool{}
	for _, cs := range snap {
		for _, c := range cs {
			ids[c.GetId()] = true
		}
	}
	return ids, nil
}

// quiet reports whether the bed runs nothing: no RUNNING container and no
// READY sandbox, so the next figure starts from a clean slate.
func (r *runner) quiet(ctx context.Context) (bool, error) {
	ids, err := r.allRunningIDs(ctx)
	if err != nil || len(ids) > 0 {
		return false, err
	}
	cctx, cancel := context.WithTimeout(ctx, criTimeout)
	defer cancel()
	resp, err := r.rt.ListPodSandbox(cctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State: &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
	}})
	if err != nil {
		return false, fmt.Errorf("list ready sandboxes: %w", err)
	}
	return len(resp.GetItems()) == 0, nil
}

// settleSandboxes waits until the runtime's sandbox count reaches zero or
// stops changing for 6 s, at most a minute: an agent removes a stopped
// pod's sandbox a moment after the pod is quiet, and what runs next (a
// lone add, a floor beside, the next burst) must not share the runtime
// with those removals, nor must a removal race with the bed's own
// clean-up. On a loaded machine 50 removals at once can come seconds
// apart, so a short window lets a lone add start among them and measure
// the removals instead of the add. An agent that keeps stopped sandboxes (the
// kubelet, until its GC) settles after the window.
func (r *runner) settleSandboxes(ctx context.Context) error {
	return r.settle(ctx, 200*time.Millisecond, 30)
}

// settleOne is settleSandboxes after one pod's removal: the count
// unchanged for 300 ms. An add cycle waits for it, so the next add, and
// the floor pod timed beside it while the agent is frozen, do not share
// the runtime with the last pod's removal; a frozen agent would otherwise
// send its pending removal once thawed, into its own next add.
func (r *runner) settleOne(ctx context.Context) error {
	return r.settle(ctx, 25*time.Millisecond, 12)
}

// settle waits until the sandbox count reached zero or stayed the same
// for stable polls every period, at most a minute.
func (r *runner) settle(ctx context.Context, every time.Duration, stable int) error {
	last, same := -1, 0
	return r.poll(ctx, every, time.Minute, "sandbox removals to settle", func() (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, criTimeout)
		defer cancel()
		resp, err := r.rt.ListPodSandbox(cctx, &runtimeapi.ListPodSandboxRequest{})
		if err != nil {
			return false, fmt.Errorf("list sandboxes: %w", err)
		}
		n := len(resp.GetItems())
		if n == last {
			same++
		} else {
			last, same = n, 0
		}
		return n == 0 || same >= stable, nil
	})
}
