package bench

import (
	"context"
	"fmt"
	"time"
)

// burstTimeout bounds one burst's bring-up or teardown.
const burstTimeout = 5 * time.Minute

// burst drops n manifests at once and times them to all RUNNING (the last
// container's started_at), then deletes them all at once and times them
// to no container running, then waits for a quiet bed.
func (r *runner) burst(ctx context.Context, prefix string, n int) (up, down time.Duration, err error) {
	ss := specs(prefix, n, false)
	t0, err := dropManifests(r.manifests, ss...)
	if err != nil {
		return 0, 0, err
	}
	ctrs, err := r.waitRunning(ctx, names(ss), nil, burstPoll, burstTimeout)
	if err != nil {
		return 0, 0, err
	}
	starts, err := r.startTimes(ctx, ctrs)
	if err != nil {
		return 0, 0, err
	}
	started := starts[len(starts)-1]
	r.res.note("burst %s: first container RUNNING after %s, half after %s, last after %s", prefix,
		starts[0].Sub(t0).Round(time.Millisecond), starts[len(starts)/2].Sub(t0).Round(time.Millisecond), started.Sub(t0).Round(time.Millisecond))
	ids, err := r.podIDs(ctx, names(ss))
	if err != nil {
		return 0, 0, err
	}
	t1, err := removeManifests(r.manifests, names(ss)...)
	if err != nil {
		return 0, 0, err
	}
	stopped, err := r.waitGone(ctx, names(ss), ids, burstPoll, burstTimeout)
	if err != nil {
		return 0, 0, err
	}
	err = r.poll(ctx, burstPoll, burstTimeout, "the bed quiet", func() (bool, error) { return r.quiet(ctx) })
	return started.Sub(t0), stopped.Sub(t1), err
}

// figBurst times 50 manifests at once (several runs) and 110, the default
// --max-pods, once (not in -quick). Pods use the pod network, so the CNI
// plugin's work for every sandbox is part of the figure, as in real use.
func (r *runner) figBurst(ctx context.Context) error {
	if err := r.ensureAgent(ctx, fileAgent); err != nil {
		return err
	}
	var ups, downs []float64
	for i := range r.plan.burstRuns {
		up, down, err := r.burst(ctx, fmt.Sprintf("burst50-%d", i), 50)
		if err != nil {
			return fmt.Errorf("burst of 50, run %d: %w", i, err)
		}
		ups, downs = append(ups, seconds(up)), append(downs, seconds(down))
	}
	r.res.add("burst: 50 manifests -> all RUNNING", "s", ups, &Target{Text: "< 3.55 s (half)", Limit: 3.55}, "7.1 s")
	r.res.add("burst: 50 deleted -> none running", "s", downs, nil, "")
	if !r.plan.burst110 {
		return nil
	}
	up, down, err := r.burst(ctx, "burst110", 110)
	if err != nil {
		return fmt.Errorf("burst of 110: %w", err)
	}
	r.res.add("burst: 110 manifests -> all RUNNING", "s", []float64{seconds(up)}, nil, "")
	r.res.add("burst: 110 deleted -> none running", "s", []float64{seconds(down)}, nil, "")
	return nil
}
