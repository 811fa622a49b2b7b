package kuberuntime

import (
	"log/slog"
	"time"

	"k8s.io/apimachinery/pkg/types"
	internalapi "k8s.io/cri-api/pkg/apis"
	kubeletconfigv1 "k8s.io/kubelet/config/v1"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/backoff"
	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/images"
	"github.com/berth-agent/berth/internal/podenv"
	"github.com/berth-agent/berth/internal/podresources"
	"github.com/berth-agent/berth/internal/runtimewatch"
)

// Options are the runtime manager's settings, from berth's flags.
type Options struct {
	// NodeName is the (lower-cased) node name; pod names already carry it.
	NodeName string
	// RootDir holds per-pod state: RootDir/pods/<uid>/volumes/... for
	// emptyDirs, etc-hosts and termination-message files.
	RootDir string
	// PodLogsDir is the root of the CRI log layout (/var/log/pods).
	PodLogsDir string
	// ResolvConf is the host's resolver file for dnsPolicy Default and
	// ClusterFirst without cluster DNS; "" disables DNS config.
	ResolvConf string
	// ClusterDNS and ClusterDomain, for dnsPolicy ClusterFirst; optional.
	ClusterDNS    []string
	ClusterDomain string
	// CrashLoopBackoffInitial and CrashLoopBackoffMax bound the restart
	// back-off of a crashing container (kubelet: 10s and 5m).
	CrashLoopBackoffInitial time.Duration
	CrashLoopBackoffMax     time.Duration
	// ImagePullBackoffInitial and ImagePullBackoffMax bound the back-off of a
	// failing image pull (kubelet: 10s and 5m).
	ImagePullBackoffInitial time.Duration
	ImagePullBackoffMax     time.Duration
	// HostIP is the node's primary IP, for the downward API (status.hostIP)
	// and host-network pods' IPs.
	HostIP string
	// Objects returns the ConfigMaps and Secrets the pod with a UID
	// references (its configMap and secret volumes, environment and
	// image pull secrets read them); nil means none anywhere.
	Objects func(uid types.UID) podenv.PodObjects
	// CredentialDirs are where the node-wide registry credentials file
	// (config.json, else .dockercfg) is searched; nil means the kubelet's
	// search path with RootDir first (images.Options.CredentialDirs).
	CredentialDirs []string
	// CredentialProviders, CredentialProviderBinDir and
	// CredentialProviderTimeout are the image credential provider plugins
	// (images.Options).
	CredentialProviders       []kubeletconfigv1.CredentialProvider
	CredentialProviderBinDir  string
	CredentialProviderTimeout time.Duration
	// PendingImport returns a channel closed once the image archives being
	// preloaded are imported, nil when none is (preload.Preloader.Pending):
	// a container whose image is missing waits on it before it pulls. Nil
	// means no preloads.
	PendingImport func() <-chan struct{}
	// Recorder receives what the kubelet would record as events; nil drops
	// them.
	Recorder Recorder
	// Clock is the time source; nil means the real clock.
	Clock clock.Clock
	// Logger is berth's logger; nil means slog.Default().
	Logger *slog.Logger
}

// EventType is Normal or Warning, as in Kubernetes events.
type EventType string

const (
	EventNormal  EventType = "Normal"
	EventWarning EventType = "Warning"
)

// Recorder takes pod events (Pulling, Pulled, Created, Started, Killing,
// BackOff, Failed, ...) from the runtime manager to the agent, which keeps
// them per pod and logs them. Implementations must be safe for concurrent
// use and must not block.
type Recorder interface {
	Event(uid types.UID, podName, podNamespace string, typ EventType, reason, message string)
}

// discardRecorder is the Recorder of a Manager built without one.
type discardRecorder struct{}

func (discardRecorder) Event(types.UID, string, string, EventType, string, string) {}

// Manager brings pods to their spec on one CRI runtime and reads their state
// back. It is safe for concurrent use by many pod workers, each working on a
// different pod UID.
type Manager struct {
	runtime internalapi.RuntimeService
	// images finds, pulls and reads images; it guards itself.
	images *images.Puller
	opts   Options
	clock  clock.Clock
	log    *slog.Logger

	// pullBackoff is keyed by image and credentials (images.BackoffKey),
	// crashBackoff by pod UID and container name; both guard themselves.
	pullBackoff  *backoff.Keyed
	crashBackoff *backoff.Keyed
	// sandboxNameBackoff is keyed by pod UID: the retries of a sandbox
	// whose name the runtime still reserves for an earlier request
	// (sandbox_name.go). It guards itself.
	sandboxNameBackoff *backoff.Keyed

	// Watcher reads the pods back from the runtime (Relist, PodStatus,
	// WatchEvents); its status cache is what kills and removals keep
	// current (Forget, RememberSandbox). It guards itself.
	*runtimewatch.Watcher

	// preStop runs a container's preStop hook before it is stopped
	// (runPreStop in hooks.go; tests replace it). See KillContainer.
	preStop preStopFunc
	// prePullSlots holds a token per pre-pull image pull in flight, at
	// most PrePullParallel (prepull.go).
	prePullSlots chan struct{}
	// config translates pods into CRI configs and prepares their host
	// side (pod directories, volumes, /etc/hosts); it guards itself.
	config *criconfig.Builder
}

// NewManager wires a Manager over the given services, filling defaults the
// kubelet would use for any Options left zero.
func NewManager(runtime internalapi.RuntimeService, imageService internalapi.ImageManagerService, opts Options) *Manager {
	if opts.Recorder == nil {
		opts.Recorder = discardRecorder{}
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.CrashLoopBackoffInitial == 0 {
		opts.CrashLoopBackoffInitial = 10 * time.Second
	}
	if opts.CrashLoopBackoffMax == 0 {
		opts.CrashLoopBackoffMax = 5 * time.Minute
	}
	if opts.ImagePullBackoffInitial == 0 {
		opts.ImagePullBackoffInitial = 10 * time.Second
	}
	if opts.ImagePullBackoffMax == 0 {
		opts.ImagePullBackoffMax = 5 * time.Minute
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.PodLogsDir == "" {
		opts.PodLogsDir = "/var/log/pods"
	}
	m := &Manager{
		runtime: runtime,
		images: images.New(imageService, images.Options{
			RootDir: opts.RootDir, CredentialDirs: opts.CredentialDirs, Objects: opts.Objects, Logger: opts.Logger,
			CredentialProviders: opts.CredentialProviders, CredentialProviderBinDir: opts.CredentialProviderBinDir,
			CredentialProviderTimeout: opts.CredentialProviderTimeout, Clock: opts.Clock,
		}),
		Watcher:      runtimewatch.New(runtime, runtimewatch.Options{PodLogsDir: opts.PodLogsDir, RootDir: opts.RootDir, Clock: opts.Clock}),
		opts:         opts,
		clock:        opts.Clock,
		log:          opts.Logger,
		pullBackoff:  backoff.New(opts.Clock, opts.ImagePullBackoffInitial, opts.ImagePullBackoffMax),
		crashBackoff: backoff.New(opts.Clock, opts.CrashLoopBackoffInitial, opts.CrashLoopBackoffMax),

		sandboxNameBackoff: backoff.New(opts.Clock, sandboxNameRetryInitial, sandboxNameRetryMax),
		prePullSlots:       make(chan struct{}, PrePullParallel),
	}
	m.preStop = m.runPreStop
	m.config = criconfig.New(imageService, m.configOptions(nil))
	return m
}

// configOptions are the translation's settings from the Manager's; probe
// reads the machine's figures (nil: the real machine's).
func (m *Manager) configOptions(probe func() (podresources.NodeFacts, error)) criconfig.Options {
	return criconfig.Options{
		RootDir:            m.opts.RootDir,
		PodLogsDir:         m.opts.PodLogsDir,
		ResolvConf:         m.opts.ResolvConf,
		ClusterDNS:         m.opts.ClusterDNS,
		ClusterDomain:      m.opts.ClusterDomain,
		HostIP:             m.opts.HostIP,
		Objects:            m.opts.Objects,
		ResolveImageMounts: m.images.ResolveMounts,
		ProbeNode:          probe,
		Clock:              m.clock,
	}
}
