package bench

import (
	"context"
	"fmt"
	"time"
)

// figHTTP measures the HTTP source: an agent reading the bench's PodList
// URL with a short poll period; the time from swapping the served list for
// 50 new pods to all of them RUNNING (the poll period is part of it), and
// the bytes an idle poll costs with ETag.
func (r *runner) figHTTP(ctx context.Context) error {
	if r.http == nil {
		s, err := startPodListServer()
		if err != nil {
			return err
		}
		r.http = s
	}
	if err := r.ensureAgent(ctx, httpAgent); err != nil {
		return err
	}
	prev := specs("http-0", 50, false)
	r.http.set(prev)
	if _, err := r.waitRunning(ctx, names(prev), nil, burstPoll, burstTimeout); err != nil {
		return fmt.Errorf("first pod list: %w", err)
	}
	var swaps []float64
	for i := 1; i <= r.plan.httpSwaps; i++ {
		next := specs(fmt.Sprintf("http-%d", i), 50, false)
		t0 := r.http.set(next)
		ctrs, err := r.waitRunning(ctx, names(next), nil, burstPoll, burstTimeout)
		if err != nil {
			return fmt.Errorf("swap %d: %w", i, err)
		}
		started, err := r.lastStart(ctx, ctrs)
		if err != nil {
			return err
		}
		swaps = append(swaps, seconds(started.Sub(t0)))
		if _, err := r.waitGone(ctx, names(prev), nil, burstPoll, burstTimeout); err != nil {
			return fmt.Errorf("swap %d: old pods: %w", i, err)
		}
		prev = next
	}
	r.res.add(fmt.Sprintf("http: swap 50 -> 50 new RUNNING (poll %s)", r.plan.httpCheck), "s", swaps, nil, "")

	if err := sleep(ctx, 2*r.plan.httpCheck); err != nil {
		return err
	}
	req0, nm0, in0, out0 := r.http.requests.Load(), r.http.notModified.Load(), r.http.bytesIn.Load(), r.http.bytesOut.Load()
	if err := sleep(ctx, r.plan.httpIdle); err != nil {
		return err
	}
	polls, notModified := r.http.requests.Load()-req0, r.http.notModified.Load()-nm0
	in, out := r.http.bytesIn.Load()-in0, r.http.bytesOut.Load()-out0
	if polls == 0 {
		return fmt.Errorf("no poll in %s with --http-check-frequency %s", r.plan.httpIdle, r.plan.httpCheck)
	}
	r.res.add("http: bytes per idle poll (ETag)", "B", []float64{float64(in+out) / float64(polls)}, nil, "")
	r.res.note("http idle: %d polls in %s (%d answered 304), %d B in + %d B out; the full PodList of 50 pods is %d B",
		polls, r.plan.httpIdle.Round(time.Second), notModified, in, out, r.http.size())
	return r.clear(ctx)
}
