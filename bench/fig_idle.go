package bench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"
)

// idleCost is what an idle window measured: per-interval CPU of the agent,
// containerd and the shims with the runc runs they reaped (percent of one
// core), the agent's RSS and its anonymous and file parts at every sample
// (MiB) with the sample's time (s from the window's start), its peak RSS
// at the end, and the CRI calls it made.
type idleCost struct {
	agentCPU, containerdCPU, shimCPU []float64
	rss, anon, file, at              []float64
	hwm                              float64
	calls                            opCounts
	callsWindow                      time.Duration
}

// sampleMemory appends mem, taken at t, to the window's memory samples.
func (c *idleCost) sampleMemory(mem memory, t float64) {
	c.rss = append(c.rss, kibToMiB(mem.RSS))
	c.anon = append(c.anon, kibToMiB(mem.Anon))
	c.file = append(c.file, kibToMiB(mem.File))
	c.at = append(c.at, t)
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

// measureIdle samples the costs every plan.idleSample over window,
// touching nothing else meanwhile. /metrics is read just outside the CPU
// window, so the scrape does not count as idle work.
func (r *runner) measureIdle(ctx context.Context, window time.Duration) (idleCost, error) {
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
	start := time.Now()
	c.sampleMemory(mem, 0)
	prevT := start
	for range int(window / r.plan.idleSample) {
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
		c.sampleMemory(mem, now.Sub(start).Seconds())
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
// network), after a settling period: over plan.idleWindow with 10 and
// plan.idleLongWindow with 50, long enough for the RSS's trend to show a
// leak, after plan.idleLongSettle, long enough for the 40 pods just added
// to have settled. The 50 pods stay for the adoption figure.
func (r *runner) figIdle(ctx context.Context) error {
	if err := r.ensureAgent(ctx, fileAgent); err != nil {
		return err
	}
	for _, n := range []int{10, 50} {
		if err := r.ensurePods(ctx, specs("idle", n, false)); err != nil {
			return err
		}
		settle, window := r.plan.settle, r.plan.idleWindow
		if n == 50 {
			settle, window = r.plan.idleLongSettle, r.plan.idleLongWindow
		}
		if err := sleep(ctx, settle); err != nil {
			return err
		}
		c, err := r.measureIdle(ctx, window)
		if err != nil {
			return fmt.Errorf("idle with %d pods: %w", n, err)
		}
		r.addIdle(n, c)
	}
	r.res.note("idle: CPU is %% of one core per %s interval (utime+stime from /proc/PID/stat, 10 ms ticks) over %s after %s of settling (10 pods) and %s after %s (50 pods); RSS sampled at every interval, its trend the least-squares slope of its lowest sample in each %s",
		r.plan.idleSample, r.plan.idleWindow, r.plan.settle, r.plan.idleLongWindow, r.plan.idleLongSettle, trendPeriod)
	return nil
}

// trendPeriod is the period of the RSS troughs whose slope is the idle
// trend: several of the collector's cycles at idle.
const trendPeriod = time.Minute

// Reference figures of the kubelet at idle with 50 pods on containerd 1.6,
// for runs without a compared agent: v1.37.2's RSS, v1.31's CPU.
const (
	kubeletIdleRSS = 96.5 // MiB
	kubeletIdleCPU = 2.45 // % of one core
)

// addIdle records one idle window's rows; targets apply to 50 pods, those
// relative to the kubelet against the compared agent's figure of this run
// when there is one (it ran the idle figure just before), else against
// the reference figures.
func (r *runner) addIdle(n int, c idleCost) {
	var cpuTarget, rssTarget, trendTarget, callsTarget *Target
	var cpuRef, rssRef, callsRef string
	p := fmt.Sprintf("idle %d pods: ", n)
	if n == 50 {
		cpu, rss := kubeletIdleCPU, kubeletIdleRSS
		if v, ok := r.compared(p + "agent CPU"); ok {
			cpu = v
		}
		if v, ok := r.compared(p + "agent VmRSS"); ok {
			rss = v
		}
		cpuTarget = &Target{Text: fmt.Sprintf("<= %s%% (a tenth of the kubelet's)", num(cpu/10)), Limit: cpu / 10, AtMost: true}
		rssTarget = &Target{Text: fmt.Sprintf("<= %s MiB (a fifth of the kubelet's)", num(rss/5)), Limit: rss / 5, AtMost: true}
		// Flat, to what 10 minutes can tell: the minute's troughs of a
		// flat agent still scatter by a few tenths of a MiB, a drift of
		// about 1.5 MiB/h either way.
		trendTarget = &Target{Text: "< 3 MiB/h (flat, to what the window tells)", Limit: 3}
		// A fifth of the kubelet v1.31's 588 a minute: the runtime
		// streams no events, so berth relists, but less often.
		callsTarget = &Target{Text: "< 118/min", Limit: 118}
		if r.bed.ContainerdAtLeast(1, 7) {
			// The runtime streams container events: the relist is only
			// a safety net.
			callsTarget = &Target{Text: "<= 10/min (events)", Limit: 10, AtMost: true}
		}
		cpuRef, rssRef, callsRef = fmt.Sprintf("%s%%", num(kubeletIdleCPU)), fmt.Sprintf("%s MiB", num(kubeletIdleRSS)), "588/min"
	}
	r.res.add(p+"agent CPU", "%", c.agentCPU, cpuTarget, cpuRef)
	r.res.add(p+"agent VmRSS", "MiB", c.rss, rssTarget, rssRef)
	if slope, ok := trendPerHour(troughs(c.at, c.rss, trendPeriod.Seconds())); ok {
		r.res.add(p+"agent VmRSS trend", "MiB/h", []float64{slope}, trendTarget, "")
	}
	r.res.add(p+"agent RssAnon (heap, stacks)", "MiB", c.anon, nil, "")
	r.res.add(p+"agent RssFile (binary)", "MiB", c.file, nil, "")
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
