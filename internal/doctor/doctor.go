package doctor

import (
	"context"
	"log/slog"
	"os"
	"time"

	"golang.org/x/sys/unix"
	internalapi "k8s.io/cri-api/pkg/apis"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/criclient"
	"github.com/berth-agent/berth/internal/nodestatus"
)

// Status is how a check came out.
type Status string

const (
	// OK: nothing to do.
	OK Status = "OK"
	// Warn: berth works, but not as well as it could, or a check could not
	// be made; the message says which.
	Warn Status = "WARN"
	// Fail: berth cannot run pods (or not safely) until this is fixed.
	Fail Status = "FAIL"
)

// rank orders statuses from best to worst.
func (s Status) rank() int {
	switch s {
	case OK:
		return 0
	case Warn:
		return 1
	}
	return 2
}

// Result is one check's line: what was checked, how it came out, what was
// found, and for WARN and FAIL what to do about it.
type Result struct {
	Check   string `json:"check"`
	Status  Status `json:"status"`
	Message string `json:"message"`
	Fix     string `json:"fix,omitempty"`
}

// Worst is the exit status of `berth doctor` for results: 1 when any check
// failed, else 0. A WARN exits 0, as `kubectl` does with its warnings: each
// WARN is a state berth runs in (no event stream, cgroup v1, a clock
// without NTP, berth not started yet), and an installer that stopped on
// them would teach its authors to append `|| true`, hiding the FAILs too.
// Scripts that want to stop on a WARN read `-o json`.
func Worst(results []Result) int {
	if WorstStatus(results) == Fail {
		return 1
	}
	return 0
}

// WorstStatus is the worst status in results, OK when there are none.
func WorstStatus(results []Result) Status {
	worst := OK
	for _, r := range results {
		if r.Status.rank() > worst.rank() {
			worst = r.Status
		}
	}
	return worst
}

// Options are the settings of one Run: berth run's own (the same flags and
// defaults), where to find the machine's files, and whether to start a
// sandbox.
type Options struct {
	// RuntimeEndpoint and ImageEndpoint are --container-runtime-endpoint
	// ("": containerd's socket, berth's default) and
	// --image-service-endpoint ("" is the runtime's).
	RuntimeEndpoint string
	ImageEndpoint   string
	// ManifestDir is --pod-manifest-path; "" skips its checks (a berth
	// with only --manifest-url).
	ManifestDir string
	// RootDir and PodLogsDir are --root-dir and --pod-logs-dir, whose
	// filesystems' free space is checked.
	RootDir    string
	PodLogsDir string
	// Socket is --socket, the local API's socket; "" skips its check.
	Socket string
	// Kubeconfig is --kubeconfig; "" (no cluster joined) makes the
	// cluster check OK without asking anything.
	Kubeconfig string
	// CNIConfDir and CNIBinDirs are where the runtime reads its network
	// configuration and finds the plugins: empty means what the runtime
	// reports (containerd does), else /etc/cni/net.d and /opt/cni/bin.
	CNIConfDir string
	CNIBinDirs []string
	// PauseImage is the sandbox image to look for: "" means the one the
	// runtime reports (containerd 1.x: sandbox_image). berth does not pick
	// it: the runtime starts every sandbox from its own.
	PauseImage string
	// ProcRoot and SysRoot are where /proc and /sys are mounted ("" is
	// /proc and /sys); tests point them at fake trees.
	ProcRoot string
	SysRoot  string
	// Timeout bounds each runtime call (0: 10 s); the sandbox of Run gets
	// smokeTimeout.
	Timeout time.Duration
	// Clock times the event stream's grace period (nil: the real clock).
	Clock clock.Clock
	// Logger gets what the checks do, at debug level (nil: discarded).
	Logger *slog.Logger
	// Run also starts a sandbox on the pod network and removes it.
	Run bool
}

// defaultTimeout bounds each runtime call of a Run: doctor is run by a
// person waiting, and a runtime that takes longer than this to answer a
// Version or Status is itself the finding.
const defaultTimeout = 10 * time.Second

// defaultRuntimeEndpoint is berth run's --container-runtime-endpoint default.
const defaultRuntimeEndpoint = "unix:///run/containerd/containerd.sock"

func (o Options) withDefaults() Options {
	if o.RuntimeEndpoint == "" {
		o.RuntimeEndpoint = defaultRuntimeEndpoint
	}
	if o.ProcRoot == "" {
		o.ProcRoot = "/proc"
	}
	if o.SysRoot == "" {
		o.SysRoot = "/sys"
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultTimeout
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// Run makes every check and returns their results in a fixed order, one
// per check. It never fails as a whole: a check that cannot be made is a
// line saying why.
func Run(ctx context.Context, opts Options) []Result {
	opts = opts.withDefaults()
	e := &env{opts: opts, statfs: unix.Statfs, timeSync: systemTimeSync, nodeState: daemonNode, apiReady: apiServerReady}
	rs, is, err := criclient.Dial(opts.RuntimeEndpoint, opts.ImageEndpoint, opts.Timeout)
	if err != nil {
		e.dialErr = err
	} else {
		e.rs, e.is = rs, is
		defer func() {
			if err := rs.Close(context.Background()); err != nil {
				opts.Logger.Debug("close the runtime connection", "err", err)
			}
		}()
	}
	return e.run(ctx)
}

// env is one Run: its options, the runtime connection, and the few system
// calls tests replace. It is used by one goroutine.
type env struct {
	opts    Options
	rs      internalapi.RuntimeService
	is      internalapi.ImageManagerService
	dialErr error
	// statfs is unix.Statfs; tests give filesystems of their own.
	statfs func(path string, st *unix.Statfs_t) error
	// timeSync is systemTimeSync; tests give answers of their own.
	timeSync func(ctx context.Context) timeSyncState
	// nodeState is daemonNode and apiReady apiServerReady; tests give
	// answers of their own.
	nodeState func(ctx context.Context, socket string) (*nodestatus.State, error)
	apiReady  func(ctx context.Context, kubeconfig string) error
}

// run makes the checks in the order `berth doctor` prints them.
func (e *env) run(ctx context.Context) []Result {
	ri := e.askRuntime(ctx)
	results := []Result{
		checkRuntime(ri, e.opts.RuntimeEndpoint),
		e.checkEvents(ctx, ri),
		e.checkCNI(ri),
		e.checkPauseImage(ctx, ri),
		e.checkCgroups(ctx, ri),
		checkManifestDir(e.opts.ManifestDir),
		checkOtherAgents(e.opts.ProcRoot, e.opts.ManifestDir, socketServer(e.opts.Socket)),
		e.checkClock(ctx),
		e.checkImageFs(ctx, ri),
		e.checkFreeSpace("root-fs", "--root-dir", e.opts.RootDir),
		e.checkFreeSpace("logs-fs", "--pod-logs-dir", e.opts.PodLogsDir),
		checkSocket(e.opts.Socket),
		e.checkCluster(ctx),
	}
	if e.opts.Run {
		results = append(results, e.smoke(ctx, ri))
	}
	for _, r := range results {
		e.opts.Logger.Debug("doctor check", "check", r.Check, "status", string(r.Status), "message", r.Message)
	}
	return results
}

// notChecked is the line of a check that needs the runtime when the
// runtime could not be asked; the runtime's own line says why.
func notChecked(check string) Result {
	return Result{Check: check, Status: Warn, Message: "not checked: the container runtime did not answer (see the runtime line)",
		Fix: "fix the runtime line first, then run berth doctor again"}
}

// exists reports whether path exists (without following a final link).
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}
