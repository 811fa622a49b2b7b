package bench

import (
	"context"
	"fmt"
	"time"
)

// probePods is the population of the probe figure.
const probePods = 100

// figProbes measures the idle cost of 100 pods, each with an exec
// readiness probe every 10 s: every probe is a CRI ExecSync, a `runc exec`
// under the pod's shim, so the shims' reaped children count here. The
// settling period covers at least one probe period, so every probe worker
// runs during the window.
func (r *runner) figProbes(ctx context.Context) error {
	if err := r.ensureAgent(ctx, fileAgent); err != nil {
		return err
	}
	if err := r.clear(ctx); err != nil {
		return err
	}
	ss := specs("probe", probePods, false)
	for i := range ss {
		ss[i].Probe = true
	}
	if err := r.ensurePods(ctx, ss); err != nil {
		return err
	}
	if err := sleep(ctx, max(r.plan.settle, 15*time.Second)); err != nil {
		return err
	}
	c, err := r.measureIdle(ctx, r.plan.idleWindow)
	if err != nil {
		return fmt.Errorf("idle with %d probed pods: %w", probePods, err)
	}
	p := fmt.Sprintf("probes %d pods: ", probePods)
	r.res.add(p+"agent CPU", "%", c.agentCPU, nil, "")
	r.res.add(p+"agent VmRSS", "MiB", c.rss, nil, "")
	r.res.add(p+"containerd CPU", "%", c.containerdCPU, nil, "")
	r.res.add(p+"shims+runc CPU", "%", c.shimCPU, nil, "")
	if r.opts.BerthAPI {
		r.res.add(p+"ExecSync calls", "/s", []float64{c.calls["exec_sync"] / c.callsWindow.Seconds()}, nil, "")
		r.res.note("probes %d pods: CRI calls over %s: %s", probePods, c.callsWindow.Round(time.Second), c.calls)
	} else {
		r.res.na(p+"ExecSync calls", "/s", "needs berth's /metrics", nil, "")
	}
	return r.clear(ctx)
}
