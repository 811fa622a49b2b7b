package bench

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/e2e/testbed"
)

// floorParallelism are the in-flight bounds the floor brings a burst up
// with; 0 is every pod at once.
var floorParallelism = []int{0, 1, 2, 4, 8, 16}

// burstSize is the pod count of the cold and boot bursts.
const burstSize = 50

// floorDeadParallelism are the in-flight bounds of the floor after a
// power cut: around the agent's default, fewer than the cold floor's
// because each run must first bring its 50 pods up and kill them.
var floorDeadParallelism = []int{2, 4, 8}

// floorResult is what the floor figure found, for the overhead rows of
// the figures measured after it.
type floorResult struct {
	best burstTimes // per figure, the best median over the bounds
	// dead is best's counterpart for 50 pods left dead by a power cut:
	// each one's dead sandbox stopped before its new one runs.
	dead burstTimes
	// bestK and deadK are the best in-flight bounds (floorSeries; 0: all
	// in flight): the floor the 50-pod figures are timed beside
	// (besideRun).
	bestK, deadK int
}

// burstTimes are one burst's first, median and last container start
// after the moment the pods were handed over, in seconds.
type burstTimes struct {
	first, median, all float64
}

// figFloor measures what the runtime itself does, with no agent: the
// bench pods (the same image, command and network) brought up by the
// three CRI calls a pod needs (RunPodSandbox, CreateContainer,
// StartContainer), 50 at once with at most 1, 2, 4, 8, 16 or all of them
// in flight; then 50 dead pods brought back (floorDead). Every 50-pod
// figure is shown beside it; no agent runs meanwhile, so nothing else
// competes for the cores. The one-pod floor is timed beside the agent's
// own adds instead (cycles).
func (r *runner) figFloor(ctx context.Context) error {
	if err := r.stopAgent(ctx); err != nil {
		return err
	}
	if _, err := r.floorBurst(ctx, "floor-warm", 1, 1); err != nil {
		return fmt.Errorf("floor warm-up: %w", err)
	}
	best, bestK, err := r.floorSeries("floor: 50 pods, ", floorParallelism, func(k, i int) (burstTimes, error) {
		return r.floorBurst(ctx, fmt.Sprintf("floor%d-%d", k, i), burstSize, k)
	})
	if err != nil {
		return err
	}
	dead, deadK, err := r.floorDead(ctx)
	if err != nil {
		return err
	}
	r.floor = &floorResult{best: best, dead: dead, bestK: bestK, deadK: deadK}
	r.res.note("floor, best over 1..16 and all in flight (medians): first %.2f s, median %.2f s, all %.2f s (%s)", best.first, best.median, best.all, inFlight(bestK))
	r.res.note("floor after a power cut, best over 2, 4, 8 in flight (medians): first %.2f s, median %.2f s, all %.2f s (%s)", dead.first, dead.median, dead.all, inFlight(deadK))
	return nil
}

// bound is the best in-flight bound of the cold floor, or of the floor
// after a power cut when dead is set.
func (f *floorResult) bound(dead bool) int {
	if dead {
		return f.deadK
	}
	return f.bestK
}

// inFlight names an in-flight bound (0: all) for rows and notes.
func inFlight(k int) string {
	if k == 0 {
		return "all in flight"
	}
	return fmt.Sprintf("%d in flight", k)
}

// floorDead measures what the runtime itself does for the boot after a
// power cut: 50 pods whose containers exited and whose sandboxes are
// NOTREADY, each brought back by the four calls that takes at the least
// (StopPodSandbox of the dead sandbox, which releases what it still
// holds, such as its IP, then the three of a new pod).
func (r *runner) floorDead(ctx context.Context) (burstTimes, int, error) {
	return r.floorSeries("floor: 50 pods dead, ", floorDeadParallelism, func(k, i int) (burstTimes, error) {
		return r.floorDeadOf(ctx, fmt.Sprintf("floordead%d-%d", k, i), k)
	})
}

// floorDeadOf is floorDeadBurst of 50 pod-network pods named prefix-N.
func (r *runner) floorDeadOf(ctx context.Context, prefix string, k int) (burstTimes, error) {
	return r.floorDeadBurst(ctx, specs(prefix, burstSize, false), k)
}

// floorSeries runs burst plan.floorRuns times for each in-flight bound of
// ks (0: all in flight), adds the first, median and all rows of each, and
// returns the best median of each figure over the bounds and the best
// bound: the one whose median and all-50 are both nearest the best,
// its worse ratio to them the smallest. The 50-pod figures are timed
// beside the floor at that bound, held to one configuration of the
// runtime for both their median and their last pod.
func (r *runner) floorSeries(prefix string, ks []int, burst func(k, run int) (burstTimes, error)) (burstTimes, int, error) {
	best := burstTimes{first: -1, median: -1, all: -1}
	byK := make([]burstTimes, len(ks))
	for j, k := range ks {
		var first, med, all []float64
		for i := range r.plan.floorRuns {
			bt, err := burst(k, i)
			if err != nil {
				return best, 0, err
			}
			first, med, all = append(first, bt.first), append(med, bt.median), append(all, bt.all)
		}
		label := inFlight(k)
		r.res.add(prefix+label+" -> first RUNNING", "s", first, nil, "")
		r.res.add(prefix+label+" -> median RUNNING", "s", med, nil, "")
		r.res.add(prefix+label+" -> all RUNNING", "s", all, nil, "")
		byK[j] = burstTimes{first: summarize(first).Median, median: summarize(med).Median, all: summarize(all).Median}
		best.first = bestOf(best.first, byK[j].first)
		best.median = bestOf(best.median, byK[j].median)
		best.all = bestOf(best.all, byK[j].all)
	}
	bestK, worst := 0, -1.0
	for j, bt := range byK {
		if w := max(bt.median/best.median, bt.all/best.all); worst < 0 || w < worst {
			bestK, worst = ks[j], w
		}
	}
	return best, bestK, nil
}

// floorDeadBurst brings ss up (4 in flight, not timed), stops every
// sandbox as the power cut of the boot figure does, and then times ss
// brought back with at most k in flight. Every sandbox is removed and the
// bed quiet again before it returns.
func (r *runner) floorDeadBurst(ctx context.Context, ss []podSpec, k int) (burstTimes, error) {
	old := make([]string, len(ss))
	_, errs := r.floorRun(ctx, len(ss), 4, func(i int) (string, error) {
		sb, _, err := r.floorPod(ctx, ss[i])
		old[i] = sb
		return "", err
	})
	failed := errors.Join(errs...)
	if failed == nil {
		_, errs = r.floorRun(ctx, len(ss), 4, func(i int) (string, error) {
			return "", r.stopSandbox(ctx, old[i])
		})
		failed = errors.Join(errs...)
	}
	fresh := make([]string, len(ss))
	var bt burstTimes
	if failed == nil {
		bt, failed = r.floorTimed(ctx, ss, k, func(i int) (string, error) {
			if err := r.stopSandbox(ctx, old[i]); err != nil {
				return "", err
			}
			sb, c, err := r.floorPod(ctx, ss[i])
			fresh[i] = sb
			return c, err
		})
	}
	if err := r.floorTeardown(ctx, append(old, fresh...)); err != nil && failed == nil {
		failed = err
	}
	return bt, failed
}

// stopSandbox stops one sandbox; stopping a stopped one is a no-op for
// the runtime, as CRI wants.
func (r *runner) stopSandbox(ctx context.Context, id string) error {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if _, err := r.rt.StopPodSandbox(cctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		return fmt.Errorf("stop sandbox %s: %w", id, err)
	}
	return nil
}

// bestOf is the smaller of two figures, -1 standing for none yet.
func bestOf(a, b float64) float64 {
	if a < 0 || b < a {
		return b
	}
	return a
}

// stopAgent stops a running agent after removing its pods, so the floor
// has the runtime to itself; the next agent figure starts it again.
func (r *runner) stopAgent(ctx context.Context) error {
	if r.agent == nil || r.agent.alive() != nil {
		r.agent = nil
		return nil
	}
	if err := r.clear(ctx); err != nil {
		return err
	}
	if err := r.settleSandboxes(ctx); err != nil {
		return err
	}
	err := r.agent.stop(10 * time.Second)
	r.agent, r.warmed = nil, false
	return err
}

// floorBurst brings n pod-network pods up by direct CRI calls with at
// most k in flight (0: all) and takes them down again.
func (r *runner) floorBurst(ctx context.Context, prefix string, n, k int) (burstTimes, error) {
	return r.floorBurstOf(ctx, specs(prefix, n, false), k)
}

// floorBurstOf times ss brought up with at most k in flight: each pod's
// container started_at after the moment the first call went out. The pods
// are removed and the bed quiet again before it returns.
func (r *runner) floorBurstOf(ctx context.Context, ss []podSpec, k int) (burstTimes, error) {
	sandboxes := make([]string, len(ss))
	bt, failed := r.floorTimed(ctx, ss, k, func(i int) (string, error) {
		sb, c, err := r.floorPod(ctx, ss[i])
		sandboxes[i] = sb
		return c, err
	})
	if err := r.floorTeardown(ctx, sandboxes); err != nil && failed == nil {
		failed = err
	}
	return bt, failed
}

// floorTimed runs up(i) for every pod of ss with at most k in flight and
// times the started_at of the container each returns after the moment
// the first call went out. It leaves the pods in place.
func (r *runner) floorTimed(ctx context.Context, ss []podSpec, k int, up func(i int) (containerID string, err error)) (burstTimes, error) {
	t0 := time.Now()
	ctrs, errs := r.floorRun(ctx, len(ss), k, up)
	var starts []float64
	for i, id := range ctrs {
		if errs[i] != nil {
			return burstTimes{}, fmt.Errorf("floor pod %s: %w", ss[i].Name, errs[i])
		}
		st, err := r.containerStatus(ctx, id)
		if err != nil {
			return burstTimes{}, err
		}
		if st == nil || st.GetStartedAt() == 0 {
			return burstTimes{}, fmt.Errorf("floor pod %s: container %s has no started_at", ss[i].Name, id)
		}
		starts = append(starts, time.Unix(0, st.GetStartedAt()).Sub(t0).Seconds())
	}
	slices.Sort(starts)
	return burstTimes{first: starts[0], median: starts[len(starts)/2], all: starts[len(starts)-1]}, nil
}

// floorRun calls do(i) for i in [0, n) with at most k in flight (0: all)
// and returns what each returned (a container ID, or ""), by i.
func (r *runner) floorRun(ctx context.Context, n, k int, do func(i int) (string, error)) ([]string, []error) {
	if k <= 0 || k > n {
		k = n
	}
	ctrs := make([]string, n)
	errs := make([]error, n)
	next := make(chan int)
	var wg sync.WaitGroup
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if ctx.Err() != nil {
					errs[i] = ctx.Err()
					continue
				}
				ctrs[i], errs[i] = do(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return ctrs, errs
}

// floorPod is what a pod needs of the runtime at the least, with the
// kubelet's labels so the bench's own observation finds it the same way.
func (r *runner) floorPod(ctx context.Context, s podSpec) (sandboxID, containerID string, err error) {
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	podName := r.runtimePodName(s.Name)
	uid := fmt.Sprintf("floor-%s-%d", s.Name, time.Now().UnixNano())
	labels := map[string]string{labelPodName: podName, labelPodUID: uid, "io.kubernetes.pod.namespace": "default"}
	network, hostname := runtimeapi.NamespaceMode_POD, podName
	if s.HostNetwork {
		// The host's UTS namespace too: runc refuses a hostname there.
		network, hostname = runtimeapi.NamespaceMode_NODE, ""
	}
	ns := &runtimeapi.NamespaceOption{Network: network, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}
	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: podName, Uid: uid, Namespace: "default"},
		Hostname:     hostname,
		LogDirectory: filepath.Join(r.dir, "logs", "default_"+podName+"_"+uid),
		Labels:       labels,
		Linux:        &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: ns}},
	}
	sb, err := r.rt.RunPodSandbox(cctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
	if err != nil {
		return "", "", fmt.Errorf("run sandbox: %w", err)
	}
	ctrLabels := map[string]string{labelContainerName: containerName}
	for k, v := range labels {
		ctrLabels[k] = v
	}
	c, err := r.rt.CreateContainer(cctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: sb.GetPodSandboxId(),
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: containerName},
			Image:    &runtimeapi.ImageSpec{Image: testbed.BusyboxRef},
			Command:  []string{"sh", "-c", sleeper},
			Envs:     []*runtimeapi.KeyValue{{Key: "BENCH_GEN", Value: []byte(strconv.Itoa(s.Gen))}},
			Labels:   ctrLabels,
			LogPath:  containerName + "/0.log",
			Linux:    &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: ns}},
		},
		SandboxConfig: sbCfg,
	})
	if err != nil {
		return sb.GetPodSandboxId(), "", fmt.Errorf("create container: %w", err)
	}
	if _, err := r.rt.StartContainer(cctx, &runtimeapi.StartContainerRequest{ContainerId: c.GetContainerId()}); err != nil {
		return sb.GetPodSandboxId(), c.GetContainerId(), fmt.Errorf("start container: %w", err)
	}
	return sb.GetPodSandboxId(), c.GetContainerId(), nil
}

// floorTeardown stops and removes the floor's sandboxes (their containers
// with them), a few at a time, and waits for a quiet bed.
func (r *runner) floorTeardown(ctx context.Context, sandboxes []string) error {
	_, errs := r.floorRun(ctx, len(sandboxes), 4, func(i int) (string, error) {
		if sandboxes[i] == "" {
			return "", nil
		}
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if _, err := r.rt.StopPodSandbox(cctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sandboxes[i]}); err != nil {
			return "", fmt.Errorf("stop floor sandbox: %w", err)
		}
		if _, err := r.rt.RemovePodSandbox(cctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sandboxes[i]}); err != nil {
			return "", fmt.Errorf("remove floor sandbox: %w", err)
		}
		return "", nil
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return r.poll(ctx, 50*time.Millisecond, 3*time.Minute, "the bed quiet", func() (bool, error) { return r.quiet(ctx) })
}
