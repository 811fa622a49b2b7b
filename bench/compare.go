package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ComparedFigures are the figures a compared agent (-compare, the kubelet
// in practice) runs too, in the same run: the targets are set against
// the kubelet's first, median and one-pod overhead measured on
// the same machine in the same run, not against figures of another day.
// remove records the deletes of the compared agent's add cycles; idle
// runs its 50 pods through the same long window as the agent's.
var ComparedFigures = []string{"onepod", "add", "remove", "imageedit", "burst", "boot", "idle"}

// compareOptions are the options of the compared agent's runner: its own
// template and metrics URL, no berth API, and nothing compared in turn.
func compareOptions(opts Options) Options {
	c := opts
	c.Template, c.AgentMetrics, c.BerthAPI = opts.Compare, opts.CompareMetrics, false
	c.Compare, c.CompareMetrics = "", ""
	return c
}

// runCompared runs the compared agent's figure name just before the
// agent's own, on the same bed: the agent under test is stopped (its pods
// removed) first, and the compared one after, so each has the runtime to
// itself. It shares the floor measured earlier in the run. A failure is
// recorded in the compared results and leaves the agent's figure to run.
func (r *runner) runCompared(ctx context.Context, name string) {
	c := r.cmp
	if c == nil || !slices.Contains(ComparedFigures, name) {
		return
	}
	if err := r.stopAgent(ctx); err != nil {
		c.res.fail(name, fmt.Errorf("stop the agent under test: %w", err))
		return
	}
	c.floor = r.floor
	r.markLoad("compared " + name)
	c.log.Info("figure of the compared agent", "name", name)
	err := c.figure(name)(ctx)
	if err == nil {
		err = c.stopAgent(ctx)
	}
	if err == nil {
		err = r.removeLeftovers(ctx)
	}
	if err != nil {
		c.log.Error("figure of the compared agent failed", "name", name, "err", err)
		c.res.fail(name, err)
		if ctx.Err() != nil {
			return
		}
		// Back to a runtime the agent under test has to itself: the
		// compared agent's pods removed through it (started again if it
		// died), the agent stopped, and what it kept removed.
		if err := errors.Join(c.reset(ctx), c.stopAgent(ctx), r.removeLeftovers(ctx)); err != nil {
			c.res.fail(name, fmt.Errorf("clean up after the compared agent: %w", err))
		}
	}
}

// removeLeftovers removes every sandbox the compared agent left behind
// (the kubelet keeps stopped ones until its garbage collection): the
// agent under test must start from the runtime it would have had alone.
func (r *runner) removeLeftovers(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, criTimeout)
	resp, err := r.rt.ListPodSandbox(cctx, &runtimeapi.ListPodSandboxRequest{})
	cancel()
	if err != nil {
		return fmt.Errorf("list the compared agent's sandboxes: %w", err)
	}
	var ids []string
	for _, sb := range resp.GetItems() {
		ids = append(ids, sb.GetId())
	}
	return r.floorTeardown(ctx, ids)
}

// compared is the compared agent's median of the figure called name, if
// it was measured in this run.
func (r *runner) compared(name string) (float64, bool) {
	if r.cmp == nil {
		return 0, false
	}
	for _, row := range r.cmp.res.Rows {
		if row.Name == name && row.NA == "" && len(row.Samples) > 0 {
			return row.Summary.Median, true
		}
	}
	return 0, false
}

// fillCompared puts the compared agent's medians in the kubelet column of
// every figure it measured too, in place of the reference figures, and
// keeps its whole results beside the agent's.
func (r *runner) fillCompared() {
	if r.cmp == nil {
		return
	}
	r.res.Compared = r.cmp.res
	for i, row := range r.res.Rows {
		if v, ok := r.compared(row.Name); ok {
			r.res.Rows[i].Kubelet = fmt.Sprintf("%s %s (this run)", num(v), row.Unit)
		}
	}
}
