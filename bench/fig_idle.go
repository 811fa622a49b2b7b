package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// idleCost is what an idle window measured: per-interval CPU of the agent,
// containerd and the shims with the runc runs they reaped (percent of one
// core), the agent's RSS at every sample (MiB), its peak RSS at the end,
// and the CRI calls it made.
type idleCost struct {
	agentCPU, containerdCPU, shimCPU, rss []float64
	hwm                                   float64
	calls                                 opCounts
	callsWindow                           time.Duration
}

// bedProcesses finds the bed's containerd (by its config file on the
// command line) and its shims (by its socket).
func (r *runner) bedProcesses() (containerd int, shims []int, err error) {
	pids, err := findProcs("containerd", filepath.Join(r.bed.Dir, "containerd.toml"))
	if err != nil {
		return 0, nil, err
	}
	if len(pids) != 1 {
		return 0, nil, fmt.Errorf("found %d containerd processes of the bed, want 1", len(pids))
	}
	shims, err = findProcs("containerd-shim-runc-v2", r.bed.Socket)
	return pids[0], shims, err
}

// measureIdle samples the costs every plan.idleSample over
// plan.idleWindow, touching nothing else meanwhile. /metrics is read just
// outside the CPU window, so the scrape does not count as idle work.
func (r *runner) measureIdle(ctx context.Context) (idleCost, error) {
	var c idleCost
	ctrd, shims, err := r.bedProcesses()
	if err != nil {
		return c, err
	}
	agent := r.agent.pid()
	var opsBefore opCounts
	opsStart := time.Now()
	if r.metricsURL() != "" {
		if opsBefore, err = scrapeOps(ctx, r.metricsURL()); err != nil {
			return c, err
		}
	}
	prevAgent, err := cpuTicks(agent)
	if err != nil {
		return c, err
	}
	prevCtrd, err := cpuTicks(ctrd)
	if err != nil {
		return c, err
	}
	prevShims := groupTicks(shims)
	mem, err := readMemory(agent)
	if err != nil {
		return c, err
	}
	c.rss = append(c.rss, kibToMiB(mem.RSS))
	prevT := time.Now()
	for range int(r.plan.idleWindow / r.plan.idleSample) {
		if err := sleep(ctx, r.plan.idleSample); err != nil {
			return c, err
		}
		if err := r.agent.alive(); err != nil {
			return c, err
		}
		now := time.Now()
		a, err := cpuTicks(agent)
		if err != nil {
			return c, err
		}
		d, err := cpuTicks(ctrd)
		if err != nil {
			return c, err
		}
		s := groupTicks(shims)
		if mem, err = readMemory(agent); err != nil {
			return c, err
		}
		window := now.Sub(prevT)
		c.agentCPU = append(c.agentCPU, cpuPercent(a-prevAgent, window))
		c.containerdCPU = append(c.containerdCPU, cpuPercent(d-prevCtrd, window))
		c.shimCPU = append(c.shimCPU, cpuPercent(groupDelta(prevShims, s), window))
		c.rss = append(c.rss, kibToMiB(mem.RSS))
		prevAgent, prevCtrd, prevShims, prevT = a, d, s, now
	}
	c.hwm = kibToMiB(mem.HWM)
	if r.metricsURL() != "" {
		after, err := scrapeOps(ctx, r.metricsURL())
		if err != nil {
			return c, err
		}
		c.calls, c.callsWindow = after.minus(opsBefore), time.Since(opsStart)
	}
	return c, nil
}

// kibToMiB converts /proc's kB (KiB) to MiB.
func kibToMiB(kib int64) float64 { return float64(kib) / 1024 }

// figIdle measures the idle cost with 10 and then 50 pods running (pod
// network), after a settling period. The 50 pods stay for the adoption
// figure.
func (r *runner) figIdle(ctx context.Context) error {
	if err := r.ensureAgent(ctx, fileAgent); err != nil {
		return err
	}
	for _, n := range []int{10, 50} {
		if err := r.ensurePods(ctx, specs("idle", n, false)); err != nil {
			return err
		}
		if err := sleep(ctx, r.plan.settle); err != nil {
			return err
		}
		c, err := r.measureIdle(ctx)
		if err != nil {
			return fmt.Errorf("idle with %d pods: %w", n, err)
		}
		r.addIdle(n, c)
	}
	r.res.note("idle: CPU is %% of one core per %s interval (utime+stime from /proc/PID/stat, 10 ms ticks) over %s after %s of settling; RSS sampled at every interval",
		r.plan.idleSample, r.plan.idleWindow, r.plan.settle)
	return nil
}

// addIdle records one idle window's rows; targets apply to 50 pods.
func (r *runner) addIdle(n int, c idleCost) {
	var cpuTarget, rssTarget, callsTarget *Target
	var cpuRef, rssRef, callsRef string
	if n == 50 {
		cpuTarget = &Target{Text: "< 0.5%", Limit: 0.5}
		// A fifth of the kubelet's, flat over the window.
		rssTarget = &Target{Text: "<= 20 MiB (a fifth of the kubelet's)", Limit: 20, AtMost: true}
		callsTarget = &Target{Text: "< 118/min (1/5)", Limit: 9.8 * 60 / 5}
		if r.bed.ContainerdAtLeast(1, 7) {
			// The runtime streams container events: the relist is only
			// a safety net.
			callsTarget = &Target{Text: "<= 10/min (events)", Limit: 10, AtMost: true}
		}
		cpuRef, rssRef, callsRef = "2.45%", "111 MiB, growing", "588/min"
	}
	p := fmt.Sprintf("idle %d pods: ", n)
	r.res.add(p+"agent CPU", "%", c.agentCPU, cpuTarget, cpuRef)
	r.res.add(p+"agent VmRSS", "MiB", c.rss, rssTarget, rssRef)
	r.res.add(p+"agent VmHWM", "MiB", []float64{c.hwm}, nil, "")
	r.res.add(p+"containerd CPU", "%", c.containerdCPU, nil, "")
	r.res.add(p+"shims+runc CPU", "%", c.shimCPU, nil, "")
	if r.metricsURL() == "" {
		r.res.na(p+"CRI calls", "/min", "needs berth's /metrics or -agent-metrics", callsTarget, callsRef)
		return
	}
	perMin := c.calls.total() / c.callsWindow.Minutes()
	r.res.add(p+"CRI calls", "/min", []float64{perMin}, callsTarget, callsRef)
	r.res.note("idle %d pods: CRI calls over %s: %s", n, c.callsWindow.Round(time.Second), c.calls)
}
