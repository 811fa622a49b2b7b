package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// burstTimeout bounds one burst's bring-up or teardown.
const burstTimeout = 5 * time.Minute

// burst drops n manifests at once (the last of them critical) and times
// them to RUNNING, then deletes them all at once and times them to no
// container running, then waits for a quiet bed and settled sandboxes.
func (r *runner) burst(ctx context.Context, prefix string, n int) (up burstTimes, critical float64, down time.Duration, err error) {
	ss := withCritical(prefix, n)
	t0, err := dropManifests(r.manifests, ss...)
	if err != nil {
		return up, 0, 0, err
	}
	ctrs, err := r.waitRunning(ctx, names(ss), nil, burstPoll, burstTimeout)
	if err != nil {
		return up, 0, 0, err
	}
	if up, critical, err = r.timesAfter(ctx, ss, ctrs, t0); err != nil {
		return up, 0, 0, err
	}
	ids, err := r.podIDs(ctx, names(ss))
	if err != nil {
		return up, 0, 0, err
	}
	t1, err := removeManifests(r.manifests, names(ss)...)
	if err != nil {
		return up, 0, 0, err
	}
	stopped, err := r.waitGone(ctx, names(ss), ids, burstPoll, burstTimeout)
	if err != nil {
		return up, 0, 0, err
	}
	if err = r.poll(ctx, burstPoll, burstTimeout, "the bed quiet", func() (bool, error) { return r.quiet(ctx) }); err != nil {
		return up, critical, 0, err
	}
	// The agent removes the stopped sandboxes (and their containers and
	// snapshots) after the pods are quiet: the next burst must not start
	// while the runtime is still busy with that, or it measures the
	// clean-up of this one.
	return up, critical, stopped.Sub(t1), r.settleSandboxes(ctx)
}

// timesAfter are the first, median and last container start of ss after
// t0 (containerd's started_at), and the critical pod's, in seconds.
func (r *runner) timesAfter(ctx context.Context, ss []podSpec, ctrs map[string]*runtimeapi.Container, t0 time.Time) (burstTimes, float64, error) {
	var starts []float64
	critical := -1.0
	for _, s := range ss {
		st, err := r.containerStatus(ctx, ctrs[s.Name].GetId())
		if err != nil {
			return burstTimes{}, 0, err
		}
		if st == nil || st.GetStartedAt() == 0 {
			return burstTimes{}, 0, fmt.Errorf("pod %s: container has no started_at", s.Name)
		}
		at := time.Unix(0, st.GetStartedAt()).Sub(t0).Seconds()
		starts = append(starts, at)
		if s.Critical {
			critical = at
		}
	}
	slices.Sort(starts)
	return burstTimes{first: starts[0], median: starts[len(starts)/2], all: starts[len(starts)-1]}, critical, nil
}

// Targets of the burst and boot figures, against the kubelet's reference
// figures and the floor measured in the same run.
var (
	burstAllTarget = &Target{Text: "< 3.55 s (half)", Limit: 3.55}
)

// figBurst times 50 manifests at once (several runs) and 110, the default
// --max-pods, once (not in -quick). Pods use the pod network, so the CNI
// plugin's work for every sandbox is part of the figure, as in real use.
// One pod of each burst is critical and dropped last.
func (r *runner) figBurst(ctx context.Context) error {
	if err := r.ensureAgent(ctx, fileAgent); err != nil {
		return err
	}
	var first, med, all, crit, downs []float64
	var beside besideTimes
	for i := range r.plan.burstRuns {
		floorFirst := i%2 == 0
		if err := r.besideRun(ctx, &beside, fmt.Sprintf("burstfloor-%d", i), false, floorFirst); err != nil {
			return fmt.Errorf("floor beside the burst of 50, run %d: %w", i, err)
		}
		if err := r.besideAdd(ctx, &beside, fmt.Sprintf("burstone-%d", i)); err != nil {
			return fmt.Errorf("burst of 50, run %d: %w", i, err)
		}
		up, critical, down, err := r.burst(ctx, fmt.Sprintf("burst50-%d", i), burstSize)
		if err != nil {
			return fmt.Errorf("burst of 50, run %d: %w", i, err)
		}
		first, med, all, crit = append(first, up.first), append(med, up.median), append(all, up.all), append(crit, critical)
		downs = append(downs, seconds(down))
		if err := r.besideRun(ctx, &beside, fmt.Sprintf("burstfloor-%d", i), false, !floorFirst); err != nil {
			return fmt.Errorf("floor beside the burst of 50, run %d: %w", i, err)
		}
	}
	r.addBurstRows("burst: 50 manifests", first, med, all, crit, kubeletCold, false, r.besideRows("burst: 50 manifests", &beside, false))
	r.res.add("burst: 50 deleted -> none running", "s", downs, nil, "")
	if !r.plan.burst110 {
		return nil
	}
	up, _, down, err := r.burst(ctx, "burst110", 110)
	if err != nil {
		return fmt.Errorf("burst of 110: %w", err)
	}
	r.res.add("burst: 110 manifests -> all RUNNING", "s", []float64{up.all}, nil, "")
	r.res.add("burst: 110 deleted -> none running", "s", []float64{seconds(down)}, nil, "")
	return nil
}

// withKubeletMedian adds "no later than the kubelet's median v" to a
// median target (nil: none yet): the stricter limit of the two counts.
func withKubeletMedian(t *Target, v float64) *Target {
	k := &Target{Text: fmt.Sprintf("<= the kubelet's (%.2f s)", v), Limit: v, AtMost: true}
	if t == nil {
		return k
	}
	return &Target{Text: t.Text + " and " + k.Text, Limit: min(t.Limit, v), AtMost: true}
}

// kubeletFigures are the kubelet's medians of a 50-pod figure,
// shown beside berth's: first, median, all RUNNING in seconds.
type kubeletFigures struct{ first, median, all string }

// kubeletCold is the kubelet v1.31's cold burst of 50 on these machines.
var kubeletCold = kubeletFigures{first: "1.40 s", median: "2.71 s", all: "7.48 s"}

// addBurstRows records a 50-pod figure's first, median, all and critical
// rows, with their targets where the floor of this run is known:
// the median within 1.2x and all within 1.1x of the floor for the same
// work (dead: the floor after a power cut), the critical pod within 1.5x
// of the one-pod add; and where the compared agent (the kubelet) ran the
// same figure in this run, the first pod within half its first and the
// median no later than its median. The floor is the one timed beside the
// figure's runs at the best bound, when there is one, else the best
// medians of the floor figure; the one-pod add is the lone add timed
// beside them, else the add figure's.
func (r *runner) addBurstRows(prefix string, first, med, all, crit []float64, k kubeletFigures, dead bool, beside besideRef) {
	var medTarget, allTarget, critTarget *Target
	allTarget = burstAllTarget
	floor, which, ok := r.burstFloor(dead, beside.floor)
	if ok {
		medTarget = &Target{Text: fmt.Sprintf("<= 1.2x floor (%.2f s)", 1.2*floor.median), Limit: 1.2 * floor.median, AtMost: true}
		allTarget = &Target{Text: fmt.Sprintf("<= 1.1x floor (%.2f s)", 1.1*floor.all), Limit: 1.1 * floor.all, AtMost: true}
	}
	switch {
	case beside.add > 0:
		one := beside.add / 1000
		critTarget = &Target{Text: fmt.Sprintf("<= 1.5x one-pod add beside it (%.2f s)", 1.5*one), Limit: 1.5 * one, AtMost: true}
	case r.addPod > 0:
		one := r.addPod / 1000
		critTarget = &Target{Text: fmt.Sprintf("<= 1.5x one-pod add (%.2f s)", 1.5*one), Limit: 1.5 * one, AtMost: true}
	}
	firstTarget := &Target{Text: "<= 0.70 s (half the kubelet's)", Limit: 0.70, AtMost: true}
	if v, ok := r.compared(prefix + " -> first RUNNING"); ok {
		firstTarget = &Target{Text: fmt.Sprintf("<= %.2f s (half the kubelet's)", v/2), Limit: v / 2, AtMost: true}
	}
	if v, ok := r.compared(prefix + " -> median RUNNING"); ok {
		medTarget = withKubeletMedian(medTarget, v)
	}
	r.res.add(prefix+" -> first RUNNING", "s", first, firstTarget, k.first)
	r.res.add(prefix+" -> critical pod RUNNING", "s", crit, critTarget, "")
	r.res.add(prefix+" -> median RUNNING", "s", med, medTarget, k.median)
	r.res.add(prefix+" -> all RUNNING", "s", all, allTarget, k.all)
	if ok {
		r.res.note("%s: over the %s (medians): first %+.2f s, median %+.2f s, all %+.2f s", prefix, which,
			summarize(first).Median-floor.first, summarize(med).Median-floor.median, summarize(all).Median-floor.all)
	}
}

// burstFloor is the floor a 50-pod figure is held to and what to call it:
// beside when the floor was timed beside the figure's runs, else the best
// medians of the floor figure; false when no floor ran.
func (r *runner) burstFloor(dead bool, beside *burstTimes) (burstTimes, string, bool) {
	switch {
	case beside != nil && dead:
		return *beside, fmt.Sprintf("floor after a power cut beside it (%s)", inFlight(r.floor.bound(dead))), true
	case beside != nil:
		return *beside, fmt.Sprintf("floor beside it (%s)", inFlight(r.floor.bound(dead))), true
	case r.floor == nil:
		return burstTimes{}, "", false
	case dead:
		return r.floor.dead, "best floor after a power cut", true
	}
	return r.floor.best, "best floor", true
}

// besideTimes gathers what was timed beside a 50-pod figure's runs: the
// floor's bursts (first, median, all RUNNING in s) and the agent's lone
// adds (in ms), one each per run.
type besideTimes struct{ first, median, all, adds []float64 }

// besideRef is what a 50-pod figure is held to, from what was timed
// beside it: the floor's medians (nil: none) and the lone add's median
// in ms (0: none).
type besideRef struct {
	floor *burstTimes
	add   float64
}

// besideRun times one floor burst beside the figure's run into b when now
// is set and the runner times floors beside its figures (besideFloors)
// and the floor figure ran: 50 pods at the bound that was best there
// (floorSeries; dead: 50 dead pods brought back, at the best bound after
// a power cut), with a running agent frozen meanwhile, and the running
// containers listed every burstPoll as the bench lists them while it
// waits for the agent's 50 (mirrorPolls). The machine these figures
// run on is shared and drifts by tens of percent within minutes, and the
// best of six bounds' medians of two runs each, taken on a fresh bed, is
// the luckiest of twelve samples: the figure's own runs are held to the
// floor timed beside them instead.
func (r *runner) besideRun(ctx context.Context, b *besideTimes, prefix string, dead, now bool) (err error) {
	if !now || !r.besideFloors || r.floor == nil {
		return nil
	}
	if r.agent != nil && r.agent.alive() == nil {
		thaw, err := r.agent.freeze()
		if err != nil {
			return err
		}
		defer func() { err = errors.Join(err, thaw()) }()
	}
	var bt burstTimes
	stop := r.mirrorPolls(ctx, burstPoll)
	if dead {
		bt, err = r.floorDeadOf(ctx, prefix, r.floor.bound(dead))
	} else {
		bt, err = r.floorBurst(ctx, prefix, burstSize, r.floor.bound(dead))
	}
	stop()
	if err != nil {
		return err
	}
	b.first, b.median, b.all = append(b.first, bt.first), append(b.median, bt.median), append(b.all, bt.all)
	return nil
}

// besideAdd times one lone pod added to the running agent and removed
// again (addRemove) into b, when the runner times floors beside its
// figures: the single-pod add a critical pod among 50 is held to, taken
// on the machine as it is at that run, not minutes before.
func (r *runner) besideAdd(ctx context.Context, b *besideTimes, name string) error {
	if !r.besideFloors {
		return nil
	}
	c, err := r.addRemove(ctx, podSpec{Name: name})
	if err != nil {
		return fmt.Errorf("lone add beside: %w", err)
	}
	b.adds = append(b.adds, ms(c.add))
	return nil
}

// besideRows adds the rows of what was timed beside the figure prefix
// and returns their medians.
func (r *runner) besideRows(prefix string, b *besideTimes, dead bool) besideRef {
	var ref besideRef
	if len(b.adds) > 0 {
		r.res.add(prefix+": one pod added beside it -> RUNNING", "ms", b.adds, nil, "")
		ref.add = summarize(b.adds).Median
	}
	if len(b.all) == 0 {
		return ref
	}
	label := fmt.Sprintf("%s: floor beside it, %s", prefix, inFlight(r.floor.bound(dead)))
	r.res.add(label+" -> first RUNNING", "s", b.first, nil, "")
	r.res.add(label+" -> median RUNNING", "s", b.median, nil, "")
	r.res.add(label+" -> all RUNNING", "s", b.all, nil, "")
	ref.floor = &burstTimes{first: summarize(b.first).Median, median: summarize(b.median).Median, all: summarize(b.all).Median}
	return ref
}
