package agent

import (
	"context"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/cri"
)

// relist is one turn of the pod lifecycle event generator: the runtime's
// berth-owned pods, which of them changed since the previous successful
// turn, or the error that prevented reading them.
type relist struct {
	at       time.Time     // taken before the runtime was asked
	duration time.Duration // how long the runtime took to answer
	pods     map[types.UID]*cri.PodStatus
	changed  []types.UID // sorted, includes pods that disappeared
	err      error
}

// pleg relists the runtime every period and reports each turn to the sync
// loop. Out-of-band changes (a container killed by hand or by the OOM killer,
// a sandbox removed with crictl) thus reach their pod's worker within about
// one period. Its fields are owned by its goroutine.
type pleg struct {
	rt     podRuntime
	clock  clock.WithTicker
	period time.Duration
	prints map[types.UID]string
}

func newPLEG(rt podRuntime, clk clock.WithTicker, period time.Duration) *pleg {
	return &pleg{rt: rt, clock: clk, period: period}
}

// run relists at once, then every period, until ctx is done. Each relist
// waits until the loop takes it, and the ticker drops the ticks that pass
// meanwhile, so a slow loop is never flooded: it gets the relist made
// before it got busy (as old as the loop's delay), then a fresh one within
// a period.
func (p *pleg) run(ctx context.Context, out chan<- relist) {
	tick := p.clock.NewTicker(p.period)
	defer tick.Stop()
	for {
		r := p.relistOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		select {
		case out <- r:
		case <-ctx.Done():
			return
		}
		select {
		case <-tick.C():
		case <-ctx.Done():
			return
		}
	}
}

// relistOnce reads the runtime and diffs it against the previous successful
// turn. A failed turn changes nothing, so recovery reports only real changes.
func (p *pleg) relistOnce(ctx context.Context) relist {
	at := p.clock.Now()
	pods, err := p.rt.Relist(ctx)
	took := p.clock.Since(at)
	if err != nil {
		return relist{at: at, duration: took, err: err}
	}
	prints := make(map[types.UID]string, len(pods))
	var changed []types.UID
	for uid, st := range pods {
		fp := fingerprint(st)
		prints[uid] = fp
		if p.prints == nil || p.prints[uid] != fp {
			changed = append(changed, uid)
		}
	}
	for uid := range p.prints {
		if _, ok := pods[uid]; !ok {
			changed = append(changed, uid)
		}
	}
	sort.Slice(changed, func(i, j int) bool { return changed[i] < changed[j] })
	p.prints = prints
	return relist{at: at, duration: took, pods: pods, changed: changed}
}

// fingerprint captures what makes a pod's runtime state different for its
// worker: the set of sandboxes and containers and their states.
func fingerprint(st *cri.PodStatus) string {
	parts := make([]string, 0, len(st.Sandboxes)+len(st.Containers))
	for _, s := range st.Sandboxes {
		parts = append(parts, "s:"+s.ID+":"+string(s.State))
	}
	for _, c := range st.Containers {
		parts = append(parts, "c:"+c.ID+":"+string(c.State))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
