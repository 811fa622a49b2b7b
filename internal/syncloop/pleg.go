package syncloop

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/podplan"
	"github.com/berth-agent/berth/internal/podworkers"
)

// relist is one turn of the pod lifecycle event generator: the runtime's
// berth-owned pods, which of them changed since the previous successful
// turn, or the error that prevented reading them.
type relist struct {
	at       time.Time     // taken before the runtime was asked
	duration time.Duration // how long the runtime took to answer
	pods     map[types.UID]*podplan.PodStatus
	changed  []types.UID // sorted, includes pods that disappeared
	err      error
}

// pleg relists the runtime and reports each turn to the sync loop.
// Out-of-band changes (a container killed by hand or by the OOM killer, a
// sandbox removed with crictl) thus reach their pod's worker within about
// one period, or, when the runtime streams container events (watch), within
// one relist of the event: the relist then only runs every safetyPeriod as
// a safety net for lost events. Its fields are owned by its goroutine.
type pleg struct {
	rt     podworkers.Runtime
	clock  clock.WithTicker
	period time.Duration
	prints map[types.UID]string
	// watch is the runtime's event stream, nil for a runtime that cannot
	// have one; safetyPeriod is the relist period while it is up.
	watch        *runtimeWatch
	safetyPeriod time.Duration
}

func newPLEG(rt podworkers.Runtime, clk clock.WithTicker, period time.Duration) *pleg {
	return &pleg{rt: rt, clock: clk, period: period}
}

// watchEvents makes the PLEG follow src's container event stream when it
// has one, relisting every safetyPeriod while the stream is up.
func (p *pleg) watchEvents(src runtimeEvents, clk clock.WithDelayedExecution, log *slog.Logger, safetyPeriod time.Duration) {
	p.watch = newRuntimeWatch(src, clk, log)
	p.safetyPeriod = safetyPeriod
}

// run relists at once, then every period (every safetyPeriod while the
// event stream is up, and at once on an event newer than the last relist
// or when the stream comes up or breaks), until ctx is done. Each relist
// waits until the loop takes it, and the ticker drops the ticks that pass
// meanwhile, so a slow loop is never flooded: it gets the relist made
// before it got busy (as old as the loop's delay), then a fresh one within
// a period.
func (p *pleg) run(ctx context.Context, out chan<- relist) {
	tick := p.clock.NewTicker(p.period)
	defer tick.Stop()
	var kick <-chan struct{}
	if p.watch != nil {
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.watch.run(ctx)
		}()
		kick = p.watch.kick
	}
	var gen uint64 // the watch's generation when the last relist began
	for {
		if p.watch != nil {
			_, gen, _ = p.watch.state()
		}
		r := p.relistOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		select {
		case out <- r:
		case <-ctx.Done():
			return
		}
		if !p.await(ctx, tick, kick, r, gen) {
			return
		}
	}
}

// await blocks until the next relist is due after last, and reports false
// when ctx ended first. gen is the watch's generation when last began: a
// stream that came up since may have missed what happened before it, one
// that broke will miss what happens next, so either change calls for a
// relist at once. An event calls for one only when it is
// newer than last: an older one (a replay, a duplicate, one that queued
// while nobody listened) is already in last.
func (p *pleg) await(ctx context.Context, tick clock.Ticker, kick <-chan struct{}, last relist, gen uint64) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case <-tick.C():
			if p.watch == nil || last.err != nil {
				return true
			}
			if up, _, _ := p.watch.state(); !up || p.clock.Since(last.at) >= p.safetyPeriod {
				return true
			}
		case <-kick:
			if _, g, newest := p.watch.state(); eventDue(last.at, gen, g, newest) {
				return true
			}
		}
	}
}

// eventDue decides a relist on a kick of the event watch: the stream came
// up or broke since the relist at last (seen is the watch generation then,
// gen the current one), or an event was produced at or after last. Older
// events, replays included, are in last already.
func eventDue(last time.Time, seen, gen uint64, newest time.Time) bool {
	return gen != seen || !newest.Before(last)
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
		fp := podworkers.Fingerprint(st)
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
