package bench

import (
	"context"
	"errors"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Poll periods of the latency figures. They only bound how soon the bench
// notices; the figures come from containerd's own started_at and
// finished_at, so polling faster would only load the two cores.
const (
	singlePoll = 10 * time.Millisecond
	burstPoll  = 100 * time.Millisecond
	podTimeout = 2 * time.Minute
)

// cycle is one add and remove of a single pod, timed.
type cycle struct {
	add, remove time.Duration
}

// addRemove drops one pod's manifest, times it to RUNNING, deletes the
// manifest, times it to no container running, and waits until the bed is
// quiet and the agent's removal of the sandbox settled (settleOne) so the
// next cycle does not compete with this one's teardown.
func (r *runner) addRemove(ctx context.Context, s podSpec) (cycle, error) {
	var c cycle
	t0, err := dropManifests(r.manifests, s)
	if err != nil {
		return c, err
	}
	ctrs, err := r.waitRunning(ctx, []string{s.Name}, nil, singlePoll, podTimeout)
	if err != nil {
		return c, err
	}
	started, err := r.lastStart(ctx, ctrs)
	if err != nil {
		return c, err
	}
	c.add = started.Sub(t0)
	ids, err := r.podIDs(ctx, []string{s.Name})
	if err != nil {
		return c, err
	}
	t1, err := removeManifests(r.manifests, s.Name)
	if err != nil {
		return c, err
	}
	stopped, err := r.waitGone(ctx, []string{s.Name}, ids, singlePoll, podTimeout)
	if err != nil {
		return c, err
	}
	c.remove = stopped.Sub(t1)
	if err := r.poll(ctx, 20*time.Millisecond, podTimeout, "the bed quiet", func() (bool, error) { return r.quiet(ctx) }); err != nil {
		return c, err
	}
	return c, r.settleOne(ctx)
}

// warmUp runs one untimed cycle per agent start, so the first timed run
// does not pay for cold caches (page cache of the image layers, the
// agent's first CNI call).
func (r *runner) warmUp(ctx context.Context) error {
	if r.warmed {
		return nil
	}
	if _, err := r.addRemove(ctx, podSpec{Name: "warmup"}); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	r.warmed = true
	return nil
}

// cycleTimes are the times of a series of add/remove cycles, in ms, and
// of the floor pods beside them when they were paired.
type cycleTimes struct {
	adds, removes []float64
	// floors are the floor's adds (its three CRI calls), stopFloors its
	// stops (StopContainer with the pod's grace period -> finished_at).
	floors, stopFloors []float64
}

// cycles runs n add/remove cycles of fresh pods (a new name each, so no
// cycle waits on the previous one's identity). With paired set, each
// cycle also brings one floor pod of the same network up and stops its
// container beside it (pairedFloor), alternately before and after the
// agent's: what the runtime took for the same pod under the same load,
// to take the agent's add and remove from.
func (r *runner) cycles(ctx context.Context, prefix string, hostNetwork, paired bool, n int) (cycleTimes, error) {
	var t cycleTimes
	for i := range n {
		floor := func(now bool) error {
			if !paired || !now {
				return nil
			}
			add, stop, err := r.pairedFloor(ctx, podSpec{Name: fmt.Sprintf("%s-floor-%d", prefix, i), HostNetwork: hostNetwork})
			t.floors, t.stopFloors = append(t.floors, add), append(t.stopFloors, stop)
			return err
		}
		floorFirst := i%2 == 0
		if err := floor(floorFirst); err != nil {
			return t, fmt.Errorf("%s run %d: %w", prefix, i, err)
		}
		c, err := r.addRemove(ctx, podSpec{Name: fmt.Sprintf("%s-%d", prefix, i), HostNetwork: hostNetwork})
		if err != nil {
			return t, fmt.Errorf("%s run %d: %w", prefix, i, err)
		}
		t.adds, t.removes = append(t.adds, ms(c.add)), append(t.removes, ms(c.remove))
		if err := floor(!floorFirst); err != nil {
			return t, fmt.Errorf("%s run %d: %w", prefix, i, err)
		}
	}
	return t, nil
}

// pairedFloor is the floor's add of s (its three CRI calls, in ms) and
// its stop (StopContainer with the pod's grace period, the call to the
// container's finished_at, in ms: what an agent's delete cannot go under)
// while the agent is frozen, the pod removed and the bed quiet again
// before the agent is thawed. The machine these figures run on is shared: its speed
// drifts by tens of percent within minutes, and a long series of pods
// slows the runtime down, so a floor timed minutes apart from the agent's
// adds measures the machine, not the agent. The bench lists the running
// containers meanwhile as often as it does while it waits for the agent's
// pod (mirrorPolls): both sides pay for the same observer.
func (r *runner) pairedFloor(ctx context.Context, s podSpec) (add, stop float64, err error) {
	thaw, err := r.agent.freeze()
	if err != nil {
		return 0, 0, err
	}
	defer func() { err = errors.Join(err, thaw()) }()
	stopPolls := r.mirrorPolls(ctx, singlePoll)
	var sandbox, ctr string
	bt, err := r.floorTimed(ctx, []podSpec{s}, 1, func(int) (string, error) {
		sb, c, err := r.floorPod(ctx, s)
		sandbox, ctr = sb, c
		return c, err
	})
	if err == nil {
		stop, err = r.floorStop(ctx, ctr, *s.pod().Spec.TerminationGracePeriodSeconds)
	}
	stopPolls()
	return bt.all * 1000, stop, errors.Join(err, r.floorTeardown(ctx, []string{sandbox}))
}

// floorStop stops container id as an agent's delete does (StopContainer
// with the grace period) and returns the time from the call to the
// container's finished_at, in ms. The call may take the whole grace
// period: a TERM that comes before the container's shell set its trap is
// ignored (the shell is its PID namespace's init), for the floor as for
// an agent's delete.
func (r *runner) floorStop(ctx context.Context, id string, grace int64) (float64, error) {
	cctx, cancel := context.WithTimeout(ctx, time.Duration(grace)*time.Second+criTimeout)
	defer cancel()
	t0 := time.Now()
	if _, err := r.rt.StopContainer(cctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: grace}); err != nil {
		return 0, fmt.Errorf("stop floor container %s: %w", id, err)
	}
	st, err := r.containerStatus(ctx, id)
	if err != nil {
		return 0, err
	}
	if st == nil || st.GetFinishedAt() == 0 {
		return 0, fmt.Errorf("floor container %s has no finished_at", id)
	}
	return ms(time.Unix(0, st.GetFinishedAt()).Sub(t0)), nil
}

// mirrorPolls lists the running containers every period, as waitRunning
// does, until the returned stop is called; stop returns once the last
// list has ended.
func (r *runner) mirrorPolls(ctx context.Context, every time.Duration) (stop func()) {
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		for {
			if _, err := r.running(ctx); err != nil {
				r.log.Debug("mirrored poll failed", "err", err)
			}
			select {
			case <-done:
				return
			case <-time.After(every):
			}
		}
	}()
	return func() {
		close(done)
		<-ended
	}
}

// ms converts a duration to milliseconds for the table.
func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// seconds converts a duration to seconds for the table.
func seconds(d time.Duration) float64 { return d.Seconds() }

// Targets and kubelet references of the latency figures
// (docs/architecture.md, Performance targets).
var (
	addTarget    = &Target{Text: "median < 400 ms", Limit: 400}
	removeTarget = &Target{Text: "< 2.5 s", Limit: 2500}
	editTarget   = &Target{Text: "< 0.6 s", Limit: 600}
)

// figAdd times manifest rename -> container RUNNING for a host-network
// and a pod-network pod; the pod-network cycles also give the remove
// figure when it is selected.
func (r *runner) figAdd(ctx context.Context) error {
	if err := r.ensureAgent(ctx, fileAgent); err != nil {
		return err
	}
	if err := r.warmUp(ctx); err != nil {
		return err
	}
	n := r.plan.latencyRuns
	host, err := r.cycles(ctx, "add-host", true, true, n)
	if err != nil {
		return err
	}
	r.res.add("add: rename -> RUNNING, host network", "ms", host.adds, addTarget, "148 ms")
	pod, err := r.cycles(ctx, "add-pod", false, true, n)
	if err != nil {
		return err
	}
	r.res.add("add: rename -> RUNNING, pod network", "ms", pod.adds, addTarget, "181 ms")
	r.removes, r.hostRemoves = pod.removes, host.removes
	r.stopFloors, r.hostStopFloors = pod.stopFloors, host.stopFloors
	r.addPod = summarize(pod.adds).Median
	r.res.add("add: floor beside the adds, host network (3 CRI calls)", "ms", host.floors, nil, "132-136 ms")
	r.res.add("add: floor beside the adds, pod network (3 CRI calls)", "ms", pod.floors, nil, "155-159 ms")
	r.overheadRow("host", host.adds, host.floors, kubeletOverheadHost)
	r.overheadRow("pod", pod.adds, pod.floors, kubeletOverheadPod)
	return nil
}

// The kubelet's one-pod overhead over the floor, host and pod network, in
// ms: the reference used when no compared kubelet ran (-compare).
const (
	kubeletOverheadHost = 14
	kubeletOverheadPod  = 24
)

// overheadRow records an add figure's samples less the floor's add taken
// beside each (cycles): what the agent adds above the runtime's own work,
// with the target of a third of the kubelet's overhead: the compared
// agent's, measured in this run the same way, else the kubelet's
// reference figure.
func (r *runner) overheadRow(network string, adds, floors []float64, kubelet float64) {
	over := make([]float64, len(adds))
	for i, a := range adds {
		over[i] = a - floors[i]
	}
	name := "add: overhead over the floor, " + network + " network"
	if v, ok := r.compared(name); ok {
		kubelet = v
	}
	r.res.add(name, "ms", over,
		&Target{Text: fmt.Sprintf("<= %.1f ms (a third of the kubelet's)", kubelet/3), Limit: kubelet / 3, AtMost: true}, fmt.Sprintf("%.0f ms", kubelet))
}

// figRemove times manifest deleted -> no container of the pod running, for
// a container that exits on TERM, from the add figure's pod-network cycles
// or from cycles of its own when add is not selected.
func (r *runner) figRemove(ctx context.Context) error {
	if r.removes == nil {
		if err := r.ensureAgent(ctx, fileAgent); err != nil {
			return err
		}
		if err := r.warmUp(ctx); err != nil {
			return err
		}
		t, err := r.cycles(ctx, "remove", false, false, r.plan.latencyRuns)
		if err != nil {
			return err
		}
		r.removes = t.removes
	}
	r.res.add("remove: delete -> not running", "ms", r.removes, removeTarget, "48 ms")
	// The add figure's host-network cycles and the floor's stops beside
	// them, when it ran.
	if r.hostRemoves != nil {
		r.res.add("remove: delete -> not running, host network", "ms", r.hostRemoves, nil, "")
		r.res.add("remove: floor beside the deletes, pod network (StopContainer)", "ms", r.stopFloors, nil, "")
		r.res.add("remove: floor beside the deletes, host network (StopContainer)", "ms", r.hostStopFloors, nil, "")
	}
	return nil
}

// figEdit times manifest edited (an env value changed, renamed over the
// old file) -> the new pod's container RUNNING, and checks that the old
// container had stopped before the new one started.
func (r *runner) figEdit(ctx context.Context) error {
	if err := r.ensureAgent(ctx, fileAgent); err != nil {
		return err
	}
	if err := r.warmUp(ctx); err != nil {
		return err
	}
	s := podSpec{Name: "edit"}
	if err := r.ensurePods(ctx, []podSpec{s}); err != nil {
		return err
	}
	var samples []float64
	overlaps := 0
	for i := 1; i <= r.plan.editRuns; i++ {
		oldIDs, err := r.podIDs(ctx, []string{s.Name})
		if err != nil {
			return err
		}
		old := map[string]bool{}
		for _, id := range oldIDs {
			old[id] = true
		}
		s.Gen = i
		t0, err := dropManifests(r.manifests, s)
		if err != nil {
			return err
		}
		ctrs, err := r.waitRunning(ctx, []string{s.Name}, old, singlePoll, podTimeout)
		if err != nil {
			return fmt.Errorf("edit %d: %w", i, err)
		}
		started, err := r.lastStart(ctx, ctrs)
		if err != nil {
			return err
		}
		samples = append(samples, ms(started.Sub(t0)))
		for _, id := range oldIDs {
			st, err := r.containerStatus(ctx, id)
			if err != nil {
				return err
			}
			if st != nil && (st.GetFinishedAt() == 0 || time.Unix(0, st.GetFinishedAt()).After(started)) {
				overlaps++
			}
		}
	}
	r.res.add("edit: rename -> new RUNNING", "ms", samples, editTarget, "11.7 s")
	if overlaps > 0 {
		r.res.note("edit: %d of %d runs started the new container before the old one had stopped", overlaps, len(samples))
	}
	return r.clear(ctx)
}

// figOnePod counts the CRI calls the agent makes to bring up one pod, from
// its metrics around a single add (2 s after RUNNING, so the status reads
// that follow a start count too, the kubelet's after its 1 s relist
// included). Periodic calls fall in that window as well, so a second row
// leaves them out (periodicOp: lists, runtime status, stats).
func (r *runner) figOnePod(ctx context.Context) error {
	const name = "CRI calls: one pod up"
	// The kubelet's own count, as this figure measures it with
	// -agent-metrics: its relist reads each sandbox's status again, and
	// the image twice.
	target := &Target{Text: "<= 9 (kubelet's)", Limit: 9, AtMost: true}
	if v, ok := r.compared(name + " (without periodic calls)"); ok {
		target = &Target{Text: fmt.Sprintf("<= %s (kubelet's)", num(v)), Limit: v, AtMost: true}
	}
	if r.metricsURL() == "" {
		r.res.na(name, "calls", "needs berth's /metrics or -agent-metrics", target, "9 + periodic")
		return nil
	}
	if err := r.ensureAgent(ctx, fileAgent); err != nil {
		return err
	}
	if err := r.warmUp(ctx); err != nil {
		return err
	}
	var all, own []float64
	sum := opCounts{}
	for i := range r.plan.onePodRuns {
		s := podSpec{Name: fmt.Sprintf("onepod-%d", i)}
		before, err := r.calmOps(ctx)
		if err != nil {
			return err
		}
		if _, err := dropManifests(r.manifests, s); err != nil {
			return err
		}
		if _, err := r.waitRunning(ctx, []string{s.Name}, nil, singlePoll, podTimeout); err != nil {
			return err
		}
		if err := sleep(ctx, 2*time.Second); err != nil {
			return err
		}
		after, err := scrapeOps(ctx, r.metricsURL())
		if err != nil {
			return err
		}
		d := after.minus(before)
		all = append(all, d.total())
		own = append(own, d.total()-d.periodic().total())
		for op, v := range d {
			sum[op] += v / float64(r.plan.onePodRuns)
		}
		if err := r.clear(ctx); err != nil {
			return err
		}
	}
	r.res.add(name+" (all)", "calls", all, nil, "")
	r.res.add(name+" (without periodic calls)", "calls", own, target, "9")
	r.res.note("CRI calls per pod brought up (mean of %d, window until 2 s after RUNNING): %s", len(all), sum)
	return nil
}

// calmOps waits until the agent has finished the work of earlier figures
// (a removed pod's sandbox is removed after it is stopped) and returns the
// CRI call counts then: settled once no call but periodic ones happened
// for 500 ms.
func (r *runner) calmOps(ctx context.Context) (opCounts, error) {
	prev, err := scrapeOps(ctx, r.metricsURL())
	if err != nil {
		return nil, err
	}
	for range 40 {
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return nil, err
		}
		cur, err := scrapeOps(ctx, r.metricsURL())
		if err != nil {
			return nil, err
		}
		d := cur.minus(prev)
		if d.total() == d.periodic().total() {
			return cur, nil
		}
		prev = cur
	}
	return nil, fmt.Errorf("agent still busy with CRI calls after 20 s")
}
