package bench

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// adoptTimeout bounds how long an adopting agent may take to each mark.
const adoptTimeout = time.Minute

// adoption is one SIGKILL-and-restart with 50 pods running.
type adoption struct {
	ready, readyz, pods time.Duration // from the start of the new process; 0 when not measured
	restarted           int           // containers running before that are not after
	replaced            int           // containers running after that were not before
}

// adopt kills the agent, starts it again and times READY=1, /readyz 200
// and /pods showing every pod Running, all concurrently from the moment
// of the start; after a settling period it compares the running container
// IDs with those before the kill.
func (r *runner) adopt(ctx context.Context, podNames []string) (adoption, error) {
	var a adoption
	before, err := r.allRunningIDs(ctx)
	if err != nil {
		return a, err
	}
	if err := r.agent.kill(); err != nil {
		return a, err
	}
	t0 := time.Now()
	if err := r.launch(); err != nil {
		return a, err
	}
	wctx, cancel := context.WithTimeout(ctx, adoptTimeout)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, 3)
	wg.Go(func() {
		at, err := r.notify.waitReady(wctx, r.agent.alive)
		a.ready, errs[0] = at.Sub(t0), err
	})
	if r.opts.BerthAPI {
		want := map[string]bool{}
		for _, n := range podNames {
			want[r.runtimePodName(n)] = true
		}
		wg.Go(func() {
			errs[1] = r.poll(wctx, 5*time.Millisecond, adoptTimeout, "/readyz 200", func() (bool, error) {
				return readyz(wctx, r.listen), nil
			})
			a.readyz = time.Since(t0)
		})
		wg.Go(func() {
			errs[2] = r.poll(wctx, 20*time.Millisecond, adoptTimeout, "/pods all Running", func() (bool, error) {
				l, err := apiPods(wctx, r.listen)
				return err == nil && podsRunning(l, want) == len(want), nil
			})
			a.pods = time.Since(t0)
		})
	}
	wg.Wait()
	if errs[0] != nil {
		a.ready = 0
		r.res.note("adopt: %v", errs[0])
	}
	if errs[1] != nil || errs[2] != nil {
		return a, fmt.Errorf("adopt: %v; %v\n%s", errs[1], errs[2], r.logTail())
	}
	if err := sleep(ctx, r.plan.adoptSettle); err != nil {
		return a, err
	}
	after, err := r.allRunningIDs(ctx)
	if err != nil {
		return a, err
	}
	for id := range before {
		if !after[id] {
			a.restarted++
		}
	}
	for id := range after {
		if !before[id] {
			a.replaced++
		}
	}
	return a, nil
}

// figAdopt restarts the agent (SIGKILL, then start) with 50 pods running,
// several times.
func (r *runner) figAdopt(ctx context.Context) error {
	if err := r.ensureAgent(ctx, fileAgent); err != nil {
		return err
	}
	ss := specs("idle", 50, false)
	if err := r.ensurePods(ctx, ss); err != nil {
		return err
	}
	var ready, readyzs, pods, restarted, replaced []float64
	for i := range r.plan.adoptRuns {
		a, err := r.adopt(ctx, names(ss))
		if err != nil {
			return fmt.Errorf("adoption run %d: %w", i, err)
		}
		if a.ready > 0 {
			ready = append(ready, seconds(a.ready))
		}
		readyzs, pods = append(readyzs, seconds(a.readyz)), append(pods, seconds(a.pods))
		restarted, replaced = append(restarted, float64(a.restarted)), append(replaced, float64(a.replaced))
	}
	oneSecond := &Target{Text: "< 1 s", Limit: 1}
	if len(ready) > 0 {
		r.res.add("adopt 50: start -> READY=1", "s", ready, oneSecond, "0.3 s healthy")
	} else {
		r.res.na("adopt 50: start -> READY=1", "s", "the agent sent no READY=1", oneSecond, "0.3 s healthy")
	}
	if r.opts.BerthAPI {
		r.res.add("adopt 50: start -> /readyz 200", "s", readyzs, oneSecond, "0.3 s healthy")
		r.res.add("adopt 50: start -> /pods all Running", "s", pods, oneSecond, "5.9 s")
	} else {
		r.res.na("adopt 50: start -> /readyz 200", "s", "needs berth's /readyz", oneSecond, "0.3 s healthy")
		r.res.na("adopt 50: start -> /pods all Running", "s", "needs berth's /pods", oneSecond, "5.9 s")
	}
	r.res.add("adopt 50: containers restarted", "count", restarted, &Target{Text: "0", Limit: 0, AtMost: true}, "0")
	r.res.note("adopt: restarted = containers running before the SIGKILL and not %s after the new start (new container IDs: %v per run)", r.plan.adoptSettle, replaced)
	return nil
}
