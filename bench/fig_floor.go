package bench

import (
	"context"
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

// floorResult is what the floor figure found, for the overhead rows of
// the figures measured after it.
type floorResult struct {
	add  map[bool]float64 // median one-pod add in ms, by host network
	best burstTimes       // per figure, the best median over the bounds
}

// burstTimes are one burst's first, median and last container start
// after the moment the pods were handed over, in seconds.
type burstTimes struct {
	first, median, all float64
}

// figFloor measures what the runtime itself does, with no agent: the
// bench pods (the same image, command and network) brought up by the
// three CRI calls a pod needs (RunPodSandbox, CreateContainer,
// StartContainer), one pod at a time, and 50 at once with at most 1, 2,
// 4, 8, 16 or all of them in flight. Every agent figure is shown beside
// it; no agent runs meanwhile, so nothing else competes for the cores.
func (r *runner) figFloor(ctx context.Context) error {
	if err := r.stopAgent(ctx); err != nil {
		return err
	}
	f := &floorResult{add: map[bool]float64{}}
	if _, err := r.floorBurst(ctx, "floor-warm", 1, 1); err != nil {
		return fmt.Errorf("floor warm-up: %w", err)
	}
	for _, host := range []bool{true, false} {
		var adds []float64
		for i := range r.plan.latencyRuns / 2 {
			bt, err := r.floorBurstOf(ctx, []podSpec{{Name: fmt.Sprintf("floor-one-%d", i), HostNetwork: host}}, 1)
			if err != nil {
				return err
			}
			adds = append(adds, bt.all*1000)
		}
		net := "pod"
		if host {
			net = "host"
		}
		r.res.add("floor: one pod, "+net+" network (3 CRI calls)", "ms", adds, nil, "132-136 / 155-159 ms")
		f.add[host] = summarize(adds).Median
	}
	best := burstTimes{first: -1, median: -1, all: -1}
	for _, k := range floorParallelism {
		var first, med, all []float64
		for i := range r.plan.floorRuns {
			bt, err := r.floorBurst(ctx, fmt.Sprintf("floor%d-%d", k, i), burstSize, k)
			if err != nil {
				return err
			}
			first, med, all = append(first, bt.first), append(med, bt.median), append(all, bt.all)
		}
		label := fmt.Sprintf("%d in flight", k)
		if k == 0 {
			label = "all in flight"
		}
		r.res.add("floor: 50 pods, "+label+" -> first RUNNING", "s", first, nil, "")
		r.res.add("floor: 50 pods, "+label+" -> median RUNNING", "s", med, nil, "")
		r.res.add("floor: 50 pods, "+label+" -> all RUNNING", "s", all, nil, "")
		best.first = bestOf(best.first, summarize(first).Median)
		best.median = bestOf(best.median, summarize(med).Median)
		best.all = bestOf(best.all, summarize(all).Median)
	}
	f.best = best
	r.floor = f
	r.res.note("floor, best over 1..16 and all in flight (medians): first %.2f s, median %.2f s, all %.2f s", best.first, best.median, best.all)
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
	if k <= 0 || k > len(ss) {
		k = len(ss)
	}
	sandboxes := make([]string, len(ss))
	ctrs := make([]string, len(ss))
	errs := make([]error, len(ss))
	next := make(chan int)
	var wg sync.WaitGroup
	t0 := time.Now()
	for range k {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				sandboxes[i], ctrs[i], errs[i] = r.floorPod(ctx, ss[i])
			}
		}()
	}
	for i := range ss {
		next <- i
	}
	close(next)
	wg.Wait()
	var starts []float64
	var failed error
	for i, id := range ctrs {
		if errs[i] != nil {
			failed = fmt.Errorf("floor pod %s: %w", ss[i].Name, errs[i])
			continue
		}
		st, err := r.containerStatus(ctx, id)
		if err != nil {
			failed = err
			continue
		}
		if st == nil || st.GetStartedAt() == 0 {
			failed = fmt.Errorf("floor pod %s: container %s has no started_at", ss[i].Name, id)
			continue
		}
		starts = append(starts, time.Unix(0, st.GetStartedAt()).Sub(t0).Seconds())
	}
	if err := r.floorTeardown(ctx, sandboxes); err != nil && failed == nil {
		failed = err
	}
	if failed != nil {
		return burstTimes{}, failed
	}
	slices.Sort(starts)
	return burstTimes{first: starts[0], median: starts[len(starts)/2], all: starts[len(starts)-1]}, nil
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
	errs := make([]error, len(sandboxes))
	next := make(chan int)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if sandboxes[i] == "" {
					continue
				}
				cctx, cancel := context.WithTimeout(ctx, time.Minute)
				if _, err := r.rt.StopPodSandbox(cctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sandboxes[i]}); err != nil {
					errs[i] = fmt.Errorf("stop floor sandbox: %w", err)
				} else if _, err := r.rt.RemovePodSandbox(cctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sandboxes[i]}); err != nil {
					errs[i] = fmt.Errorf("remove floor sandbox: %w", err)
				}
				cancel()
			}
		}()
	}
	for i := range sandboxes {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return r.poll(ctx, 50*time.Millisecond, 3*time.Minute, "the bed quiet", func() (bool, error) { return r.quiet(ctx) })
}
