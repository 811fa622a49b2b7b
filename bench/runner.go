// Package bench measures a static-pod agent (berth, or another one such
// as the kubelet in standalone mode) from the outside, on a private real
// containerd test bed: latencies through CRI and containerd's own
// timestamps, costs through /proc, CRI call counts through berth's
// /metrics. It never takes the agent's word for a latency.
package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/berth-agent/berth/e2e/testbed"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Options configure one bench run.
type Options struct {
	Template string // the agent's command line with placeholders (DefaultTemplate)
	BerthAPI bool   // the agent serves berth's /readyz, /metrics and /pods on {listen}
	// AgentMetrics is another agent's Prometheus metrics URL with
	// kubelet_runtime_operations_total, for its CRI call counts.
	AgentMetrics string
	// Compare is the command line template of an agent (the kubelet)
	// measured in the same run on ComparedFigures, each just before the
	// agent's own: its medians fill the kubelet column and set the targets
	// that are relative to the kubelet. CompareMetrics is its AgentMetrics.
	Compare, CompareMetrics string
	Bin                     string // {bin}: the berth binary
	Only                    []string
	Quick                   bool
	RepoDir                 string   // where `go test -bench` runs
	GoBench                 []string // packages whose Go benchmarks are reported
	Keep                    bool     // keep the work dir (manifests, agent log) for a look afterwards
	Log                     *slog.Logger
}

// Figures are the figure groups in the order they run; -only selects
// among them.
var Figures = []string{"binary", "floor", "onepod", "add", "remove", "edit", "imageedit", "restart", "burst", "boot", "idle", "adopt", "probes", "http", "gobench"}

// plan is how much of each figure a run does: the full set for `make
// bench`, a small one for -quick.
type plan struct {
	latencyRuns, editRuns, onePodRuns int
	burstRuns, floorRuns, bootRuns    int
	burst110                          bool
	settle, idleWindow, idleSample    time.Duration
	idleLongSettle, idleLongWindow    time.Duration // the idle settle and window with 50 pods
	adoptRuns                         int
	adoptSettle                       time.Duration
	httpSwaps                         int
	httpIdle, httpCheck               time.Duration
	goBenchCount                      int
}

// plans are the full and the quick plan.
var (
	// latencyRuns is 30: a one-pod add and its floor beside it each
	// spread by tens of ms on a shared machine, far more than the
	// agent's own few ms, so the median of the paired differences needs
	// many pairs to be steady against a target of a third of the
	// kubelet's overhead.
	//
	// burstRuns and bootRuns are 5: one burst or boot of 50, berth's or
	// the floor's beside it, moves by 10 to 15 % from run to run against
	// targets 10 and 20 % above the floor, and a median of 3 moves with a
	// single lucky or unlucky sample.
	fullPlan = plan{
		latencyRuns: 30, editRuns: 10, onePodRuns: 5, burstRuns: 5, floorRuns: 2, bootRuns: 5, burst110: true,
		settle: 10 * time.Second, idleWindow: 60 * time.Second, idleSample: 10 * time.Second, idleLongSettle: time.Minute, idleLongWindow: 10 * time.Minute,
		adoptRuns: 3, adoptSettle: 10 * time.Second,
		httpSwaps: 3, httpIdle: 20 * time.Second, httpCheck: time.Second, goBenchCount: 3,
	}
	quickPlan = plan{
		latencyRuns: 5, editRuns: 3, onePodRuns: 2, burstRuns: 1, floorRuns: 1, bootRuns: 1,
		settle: 3 * time.Second, idleWindow: 15 * time.Second, idleSample: 5 * time.Second, idleLongSettle: 3 * time.Second, idleLongWindow: 15 * time.Second,
		adoptRuns: 1, adoptSettle: 3 * time.Second,
		httpSwaps: 1, httpIdle: 5 * time.Second, httpCheck: time.Second, goBenchCount: 1,
	}
)

// agentMode is which source the running agent reads.
type agentMode int

const (
	noAgent agentMode = iota
	fileAgent
	httpAgent
)

// runner holds one bench run's state: the bed, the agent under test and
// the results gathered so far.
type runner struct {
	opts Options
	plan plan
	bed  *testbed.Bed
	rt   runtimeapi.RuntimeServiceClient
	log  *slog.Logger
	res  *Results

	dir, manifests, node, listen string
	bin                          string // {bin}: the run's own copy of opts.Bin
	notify                       *notifySocket

	agent  *agentProc
	mode   agentMode
	args   []string // the running agent's command line, for restarts
	http   *podListServer
	warmed bool // one untimed add/remove cycle ran

	removes []float64 // remove latencies of the add figure's pod-network cycles, in ms
	// hostRemoves are those of its host-network cycles, stopFloors and
	// hostStopFloors the floor's stops beside them (pairedFloor), in ms.
	hostRemoves, stopFloors, hostStopFloors []float64
	floor                                   *floorResult // what the floor figure found, nil before it ran
	addPod                                  float64      // median one-pod add on the pod network in ms, 0 before the add figure
	// cmp measures the compared agent (Options.Compare) on the same bed;
	// nil when there is none.
	cmp *runner
	// besideFloors times the floor beside each 50-pod figure's runs
	// (besideRun): for the agent under test, whose targets it sets, not
	// for the compared agent, whose figures are only shown beside.
	besideFloors bool
	// loads are "figure load" as each figure started (markLoad).
	loads []string
	// imageEdit is the imageedit figure's slow registry; nil before it
	// ran.
	imageEdit *imageEditSetup
}

// node is the --hostname-override of every run; pod names end in it.
const node = "bench-node"

// readyTimeout bounds an agent's start until READY=1 (or /readyz).
const readyTimeout = 30 * time.Second

// Run measures the selected figures on bed and returns the results; a
// figure that fails is noted and the next one starts from a clean slate.
// The agent is stopped and every pod removed before it returns, also when
// ctx is cancelled.
func Run(ctx context.Context, bed *testbed.Bed, opts Options) (*Results, error) {
	r, err := newRunner(bed, opts)
	if err != nil {
		return nil, err
	}
	r.besideFloors = true
	defer r.close(ctx)
	if opts.Compare != "" {
		if r.cmp, err = newRunner(bed, compareOptions(opts)); err != nil {
			return nil, fmt.Errorf("compared agent: %w", err)
		}
		defer r.cmp.close(ctx)
		defer r.fillCompared()
	}
	r.noteLoad("start")
	defer r.noteLoad("end")
	defer r.noteFigureLoads()
	for _, name := range Figures {
		if len(opts.Only) > 0 && !slices.Contains(opts.Only, name) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		r.runCompared(ctx, name)
		r.markLoad(name)
		started := time.Now()
		r.log.Info("figure", "name", name)
		err := r.figure(name)(ctx)
		if err == nil {
			r.log.Info("figure done", "name", name, "took", time.Since(started).Round(time.Second))
			continue
		}
		r.log.Error("figure failed", "name", name, "err", err)
		r.res.fail(name, err)
		if ctx.Err() != nil {
			break
		}
		if err := r.reset(ctx); err != nil {
			return r.res, fmt.Errorf("reset after %s failed: %w", name, err)
		}
	}
	return r.res, ctx.Err()
}

// figure is the function that measures the figure group called name.
func (r *runner) figure(name string) func(context.Context) error {
	return map[string]func(context.Context) error{
		"binary": r.figBinary, "floor": r.figFloor, "onepod": r.figOnePod, "add": r.figAdd, "remove": r.figRemove, "edit": r.figEdit, "imageedit": r.figImageEdit,
		"restart": r.figRestart, "burst": r.figBurst, "boot": r.figBoot, "idle": r.figIdle, "adopt": r.figAdopt, "probes": r.figProbes, "http": r.figHTTP, "gobench": r.figGoBench,
	}[name]
}

// newRunner creates the work dirs, the notify socket and a free port.
func newRunner(bed *testbed.Bed, opts Options) (*runner, error) {
	dir, err := os.MkdirTemp("", "berthbench-")
	if err != nil {
		return nil, fmt.Errorf("work dir: %w", err)
	}
	r := &runner{
		opts: opts, plan: fullPlan, bed: bed, rt: bed.Runtime(), log: opts.Log,
		res: &Results{Agent: opts.Template, Runtime: bed.ContainerdVersion, BerthAPI: opts.BerthAPI, Quick: opts.Quick, Started: time.Now()},
		dir: dir, manifests: filepath.Join(dir, "manifests"), node: node,
	}
	if opts.Quick {
		r.plan = quickPlan
	}
	for _, d := range []string{r.manifests, filepath.Join(dir, "root"), filepath.Join(dir, "logs")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("work dir: %w", err)
		}
	}
	if err := r.pinBinary(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if r.listen, err = freePort(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if r.notify, err = listenNotify(filepath.Join(dir, "notify.sock")); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return r, nil
}

// pinBinary copies the -bin binary into the work dir and uses the copy for
// {bin}: the tree is shared, and a `make build` by someone else during the
// run must not swap the binary under the adoption figure's restarts. A
// template without {bin} (another agent) leaves it alone.
func (r *runner) pinBinary() error {
	if !strings.Contains(r.opts.Template, "{bin}") {
		return nil
	}
	data, err := os.ReadFile(r.opts.Bin)
	if err != nil {
		return fmt.Errorf("agent binary: %w", err)
	}
	pinned := filepath.Join(r.dir, filepath.Base(r.opts.Bin))
	if err := os.WriteFile(pinned, data, 0o755); err != nil {
		return fmt.Errorf("pin agent binary: %w", err)
	}
	r.bin = pinned
	return nil
}

// freePort finds a loopback port nobody listens on, for {listen}.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// agentArgs expands the template for a mode: the HTTP agent gets the
// bench's server URL and a short poll period, the file agent neither.
func (r *runner) agentArgs(mode agentMode) ([]string, error) {
	url, check := "", 20*time.Second
	if mode == httpAgent {
		url, check = r.http.url(), r.plan.httpCheck
	}
	return expand(r.opts.Template, map[string]string{
		"bin": r.bin, "manifests": r.manifests, "url": url, "http_check": check.String(),
		"endpoint": r.bed.Endpoint, "root": filepath.Join(r.dir, "root"), "logs": filepath.Join(r.dir, "logs"),
		"listen": r.listen, "socket": filepath.Join(r.dir, "agent.sock"), "node": r.node,
	})
}

// launch starts the agent with r.args, without waiting for readiness,
// after forgetting READY=1 messages of earlier starts.
func (r *runner) launch() error {
	r.notify.drain()
	p, err := startAgent(r.args, r.logPath(), r.notify.path)
	if err != nil {
		return err
	}
	r.agent = p
	return nil
}

// logPath is where every agent start appends its output.
func (r *runner) logPath() string { return filepath.Join(r.dir, "agent.log") }

// metricsURL is where the agent's CRI call counts are read: berth's
// /metrics, or -agent-metrics for another agent; "" when neither.
func (r *runner) metricsURL() string {
	if r.opts.BerthAPI {
		return "http://" + r.listen + "/metrics"
	}
	return r.opts.AgentMetrics
}

// ensureAgent makes sure an agent of mode runs and is ready. Switching
// modes clears every pod through the old agent first, so no pod is left
// that the new one does not know.
func (r *runner) ensureAgent(ctx context.Context, mode agentMode) error {
	if r.agent != nil && r.agent.alive() == nil && r.mode == mode {
		return nil
	}
	if r.agent != nil && r.agent.alive() == nil {
		if err := r.clear(ctx); err != nil {
			return err
		}
		if err := r.settleSandboxes(ctx); err != nil {
			return err
		}
		if err := r.agent.stop(10 * time.Second); err != nil {
			return err
		}
	}
	args, err := r.agentArgs(mode)
	if err != nil {
		return err
	}
	r.args, r.mode = args, mode
	if err := r.launch(); err != nil {
		return err
	}
	return r.awaitReady(ctx)
}

// awaitReady waits for READY=1 and, for berth, for /readyz 200. An agent
// that never notifies is given the benefit of the doubt after
// readyTimeout (with a note), since sd_notify is optional for it.
func (r *runner) awaitReady(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if _, err := r.notify.waitReady(wctx, r.agent.alive); err != nil {
		if ctx.Err() != nil || r.agent.alive() != nil {
			return fmt.Errorf("agent start: %w\n%s", err, r.logTail())
		}
		r.res.note("the agent sent no READY=1 within %s of a start", readyTimeout)
	}
	if !r.opts.BerthAPI {
		return nil
	}
	return r.poll(ctx, 10*time.Millisecond, readyTimeout, "/readyz 200", func() (bool, error) {
		return readyz(ctx, r.listen), nil
	})
}

// logTail is the end of the agent's log, for errors.
func (r *runner) logTail() string {
	data, err := os.ReadFile(r.logPath())
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > 30 {
		lines = lines[len(lines)-30:]
	}
	return "agent log tail:\n" + strings.Join(lines, "\n")
}

// clear removes every pod through the agent (all manifests deleted, the
// HTTP source emptied) and waits until the bed runs nothing.
func (r *runner) clear(ctx context.Context) error {
	entries, err := os.ReadDir(r.manifests)
	if err != nil {
		return fmt.Errorf("list manifests: %w", err)
	}
	for _, e := range entries {
		if err := os.Remove(filepath.Join(r.manifests, e.Name())); err != nil {
			return fmt.Errorf("clear manifests: %w", err)
		}
	}
	if r.http != nil {
		r.http.set(nil)
	}
	return r.poll(ctx, 50*time.Millisecond, 3*time.Minute, "every pod gone", func() (bool, error) { return r.quiet(ctx) })
}

// reset brings the run back to a clean slate after a failed figure: an
// agent that died is started again, and every pod is removed.
func (r *runner) reset(ctx context.Context) error {
	if r.agent != nil && r.agent.alive() != nil {
		r.log.Warn("agent died; starting it again", "log", r.logTail())
		if err := r.launch(); err != nil {
			return err
		}
		if err := r.awaitReady(ctx); err != nil {
			return err
		}
	}
	if r.agent == nil {
		return nil
	}
	return r.clear(ctx)
}

// close removes the pods through the agent when there is time (else the
// bed's Close removes them), stops the agent and removes the work dir.
func (r *runner) close(ctx context.Context) {
	if r.agent != nil {
		if ctx.Err() == nil && r.agent.alive() == nil {
			if err := r.clear(ctx); err != nil {
				r.log.Warn("clean up pods", "err", err)
			} else if err := r.settleSandboxes(ctx); err != nil {
				r.log.Warn("clean up pods", "err", err)
			}
		}
		if err := r.agent.stop(10 * time.Second); err != nil {
			r.log.Warn("stop agent", "err", err)
		}
	}
	if r.http != nil {
		r.http.close()
	}
	if r.imageEdit != nil {
		r.imageEdit.proxy.close()
	}
	if err := r.notify.close(); err != nil {
		r.log.Warn("close notify socket", "err", err)
	}
	if r.opts.Keep {
		// The bed's Close removes its dir: keep containerd's side too.
		if data, err := os.ReadFile(filepath.Join(r.bed.Dir, "containerd.log")); err == nil {
			_ = os.WriteFile(filepath.Join(r.dir, "containerd.log"), data, 0o644)
		}
		r.log.Info("work dir kept", "dir", r.dir, "agent log", r.logPath())
		return
	}
	// The kubelet bind-mounts its root dir onto itself (to make it
	// rshared) and leaves the mount behind; EINVAL means no mount.
	if err := syscall.Unmount(filepath.Join(r.dir, "root"), syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
		r.log.Warn("unmount the agent's root dir", "err", err)
	}
	if err := os.RemoveAll(r.dir); err != nil {
		r.log.Warn("remove work dir", "err", err)
	}
}

// ensurePods drops the manifests of those specs that are not in the
// directory yet and waits until all of them run; figures that need a
// population (idle, adoption) share it this way.
func (r *runner) ensurePods(ctx context.Context, ss []podSpec) error {
	var missing []podSpec
	for _, s := range ss {
		if _, err := os.Stat(manifestFile(r.manifests, s.Name)); err != nil {
			missing = append(missing, s)
		}
	}
	if len(missing) > 0 {
		if _, err := dropManifests(r.manifests, missing...); err != nil {
			return err
		}
	}
	_, err := r.waitRunning(ctx, names(ss), nil, 100*time.Millisecond, 5*time.Minute)
	return err
}

// noteLoad records the machine's load averages: the machines are shared,
// and a figure means little without the load it was measured under.
func (r *runner) noteLoad(when string) {
	if f := loadAverages(); f != nil {
		r.res.note("load average at the %s of the run (1, 5, 15 min): %s %s %s", when, f[0], f[1], f[2])
	}
}

// loadAverages are the machine's 1, 5 and 15 minute load averages as
// /proc/loadavg gives them; nil if it cannot be read.
func loadAverages() []string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return nil
	}
	return f[:3]
}

// markLoad remembers the 1-minute load average as a figure starts: the
// floor runs first and the agents' figures minutes later, and a load that
// rose in between makes every ratio to the floor say more about the
// machine than about the agent. noteFigureLoads prints them.
func (r *runner) markLoad(figure string) {
	if f := loadAverages(); f != nil {
		r.loads = append(r.loads, figure+" "+f[0])
	}
}

// noteFigureLoads adds the load at each figure's start to the notes.
func (r *runner) noteFigureLoads() {
	if len(r.loads) > 0 {
		r.res.note("1-minute load average as each figure started: %s", strings.Join(r.loads, ", "))
	}
}

// sleep waits d unless ctx ends first.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
