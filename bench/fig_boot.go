package bench

import (
	"context"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// figBoot times the agent's start with 50 pods to bring up (one critical,
// last by name): on an appliance's first boot (manifests present, an
// empty runtime) and after a power cut (the pods left in the runtime with
// every container dead and every sandbox NOTREADY). Time 0 is the agent's
// exec; the figures are containerd's started_at of the new containers.
func (r *runner) figBoot(ctx context.Context) error {
	var cold, dead [4][]float64 // first, critical, median, all
	var coldCPU, deadCPU []float64
	var coldOps, deadOps []opCounts
	var coldFloor, deadFloor besideTimes
	beside := func(i int, now bool) error {
		if err := r.besideRun(ctx, &coldFloor, fmt.Sprintf("bootfloor-%d", i), false, now); err != nil {
			return fmt.Errorf("floor beside the first boot, run %d: %w", i, err)
		}
		if err := r.besideRun(ctx, &deadFloor, fmt.Sprintf("bootfloordead-%d", i), true, now); err != nil {
			return fmt.Errorf("floor beside the boot after a power cut, run %d: %w", i, err)
		}
		return nil
	}
	for i := range r.plan.bootRuns {
		ss := withCritical(fmt.Sprintf("boot-%d", i), burstSize)
		if err := r.stopAgent(ctx); err != nil {
			return err
		}
		floorFirst := i%2 == 0
		if err := beside(i, floorFirst); err != nil {
			return err
		}
		if _, err := dropManifests(r.manifests, ss...); err != nil {
			return err
		}
		up, crit, cpu, ops, err := r.bootAndTime(ctx, ss, nil)
		if err != nil {
			return fmt.Errorf("first boot, run %d: %w", i, err)
		}
		appendTimes(&cold, up, crit)
		coldCPU, coldOps = append(coldCPU, cpu), append(coldOps, ops)

		old, err := r.killAll(ctx, ss)
		if err != nil {
			return fmt.Errorf("power cut, run %d: %w", i, err)
		}
		if up, crit, cpu, ops, err = r.bootAndTime(ctx, ss, old); err != nil {
			return fmt.Errorf("boot after a power cut, run %d: %w", i, err)
		}
		appendTimes(&dead, up, crit)
		deadCPU, deadOps = append(deadCPU, cpu), append(deadOps, ops)
		if err := r.clear(ctx); err != nil {
			return err
		}
		// The lone add both boots' critical pods are held to, on the
		// agent that has just booted, once it has removed the 100
		// sandboxes of the two boots: a pod added while it does took
		// 2.2 to 3.1 s.
		if err := r.settleSandboxes(ctx); err != nil {
			return err
		}
		if err := r.besideAdd(ctx, &coldFloor, fmt.Sprintf("bootone-%d", i)); err != nil {
			return fmt.Errorf("boot, run %d: %w", i, err)
		}
		if err := beside(i, !floorFirst); err != nil {
			return err
		}
	}
	deadFloor.adds = coldFloor.adds
	r.addBurstRows("boot: 50 manifests, empty runtime", cold[0], cold[2], cold[3], cold[1], kubeletFigures{}, false,
		r.besideRows("boot: 50 manifests, empty runtime", &coldFloor, false))
	r.addBurstRows("boot: 50 pods dead (sandboxes NOTREADY)", dead[0], dead[2], dead[3], dead[1], kubeletFigures{}, true,
		r.besideRows("boot: 50 pods dead (sandboxes NOTREADY)", &deadFloor, true))
	r.res.add("boot: 50 manifests, empty runtime -> agent CPU until all RUNNING", "s", coldCPU, nil, "")
	r.res.add("boot: 50 pods dead -> agent CPU until all RUNNING", "s", deadCPU, nil, "")
	r.bootOpsRows("boot: 50 manifests, empty runtime", coldOps)
	r.bootOpsRows("boot: 50 pods dead", deadOps)
	return nil
}

// bootOpsRows adds the CRI calls an agent made from its exec until every
// pod ran, per pod, with and without its periodic calls, and a note of
// their mean by operation: what a boot asks of the runtime besides the
// calls that create the pods. Nothing when the agent's metrics are not
// known (ops nil).
func (r *runner) bootOpsRows(prefix string, runs []opCounts) {
	if len(runs) == 0 || runs[0] == nil {
		return
	}
	var all, own []float64
	mean := opCounts{}
	for _, ops := range runs {
		all = append(all, ops.total()/burstSize)
		own = append(own, (ops.total()-ops.periodic().total())/burstSize)
		for op, v := range ops {
			mean[op] += v / float64(len(runs))
		}
	}
	r.res.add(prefix+" -> CRI calls per pod until all RUNNING (all)", "calls", all, nil, "")
	r.res.add(prefix+" -> CRI calls per pod until all RUNNING (without periodic calls)", "calls", own, nil, "")
	r.res.note("%s: CRI calls from the exec until all RUNNING (mean of %d): %s", prefix, len(runs), mean)
}

// appendTimes adds one run's figures to the per-figure sample lists.
func appendTimes(to *[4][]float64, up burstTimes, crit float64) {
	to[0] = append(to[0], up.first)
	to[1] = append(to[1], crit)
	to[2] = append(to[2], up.median)
	to[3] = append(to[3], up.all)
}

// bootAndTime starts the (stopped) file agent and times ss's containers
// that are not in old to RUNNING, from the moment before the exec. It also
// returns the CPU time the agent used by the time they all ran (in
// seconds of one core): on a machine the runtime saturates while it
// starts pods, the agent's own work delays them; and the CRI calls it
// made by then, nil when its metrics are not known.
func (r *runner) bootAndTime(ctx context.Context, ss []podSpec, old map[string]bool) (burstTimes, float64, float64, opCounts, error) {
	args, err := r.agentArgs(fileAgent)
	if err != nil {
		return burstTimes{}, 0, 0, nil, err
	}
	r.args, r.mode = args, fileAgent
	t0 := time.Now()
	if err := r.launch(); err != nil {
		return burstTimes{}, 0, 0, nil, err
	}
	ctrs, err := r.waitRunning(ctx, names(ss), old, burstPoll, burstTimeout)
	if err != nil {
		return burstTimes{}, 0, 0, nil, err
	}
	ticks, err := cpuTicks(r.agent.pid())
	if err != nil {
		return burstTimes{}, 0, 0, nil, err
	}
	var ops opCounts
	if url := r.metricsURL(); url != "" {
		if ops, err = scrapeOps(ctx, url); err != nil {
			return burstTimes{}, 0, 0, nil, err
		}
	}
	if err := r.awaitReady(ctx); err != nil {
		return burstTimes{}, 0, 0, nil, err
	}
	up, crit, err := r.timesAfter(ctx, ss, ctrs, t0)
	return up, crit, float64(ticks) / userHZ, ops, err
}

// killAll stops the agent (SIGTERM: its pods stay) and then every sandbox
// of ss, as a power cut leaves them after the next boot: containers
// exited, sandboxes NOTREADY. It returns the IDs of the dead containers.
func (r *runner) killAll(ctx context.Context, ss []podSpec) (map[string]bool, error) {
	if err := r.agent.stop(10 * time.Second); err != nil {
		return nil, err
	}
	r.agent, r.warmed = nil, false
	ids, err := r.podIDs(ctx, names(ss))
	if err != nil {
		return nil, err
	}
	old := map[string]bool{}
	for _, id := range ids {
		old[id] = true
	}
	want := map[string]bool{}
	for _, s := range ss {
		want[r.runtimePodName(s.Name)] = true
	}
	cctx, cancel := context.WithTimeout(ctx, criTimeout)
	resp, err := r.rt.ListPodSandbox(cctx, &runtimeapi.ListPodSandboxRequest{})
	cancel()
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	for _, sb := range resp.GetItems() {
		if !want[sb.GetLabels()[labelPodName]] || sb.GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		_, err := r.rt.StopPodSandbox(cctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.GetId()})
		cancel()
		if err != nil {
			return nil, fmt.Errorf("stop sandbox %s: %w", sb.GetId(), err)
		}
	}
	return old, r.poll(ctx, burstPoll, burstTimeout, "the bed quiet", func() (bool, error) { return r.quiet(ctx) })
}
