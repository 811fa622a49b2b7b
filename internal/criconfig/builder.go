package criconfig

import (
	"context"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/poddns"
	"github.com/berth-agent/berth/internal/podenv"
	"github.com/berth-agent/berth/internal/podresources"
	"github.com/berth-agent/berth/internal/volumes"
)

// Options are the translation's settings, from berth's flags.
type Options struct {
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
	// HostIP is the node's primary IP, for the downward API (status.hostIP)
	// and host-network pods' IPs.
	HostIP string
	// Objects returns the ConfigMaps and Secrets the pod with a UID
	// references; nil means none anywhere.
	Objects func(uid types.UID) podenv.PodObjects
	// ResolveImageMounts turns each image volume's reference in mounts into
	// the runtime's image ID (the runtime manager pulls the images first);
	// nil leaves the references as they are.
	ResolveImageMounts func(ctx context.Context, mounts []*runtimeapi.Mount) error
	// ProbeNode reads the machine's figures, once, on first use; nil means
	// the real machine's.
	ProbeNode func() (podresources.NodeFacts, error)
	// Clock is the time source; nil means the real clock.
	Clock clock.Clock
}

// Builder translates pods into CRI sandbox and container configs and has
// its volumes.Host prepare on the host what those configs name: the pod's
// directories, its volumes and subPath mounts, /etc/hosts,
// termination-message files and user-namespace mappings. It is safe for
// concurrent use by many pod workers, each working on a different pod UID.
type Builder struct {
	// images answers the one runtime question the translation asks: the
	// user an image runs as, when runAsNonRoot must be verified.
	images internalapi.ImageManagerService
	opts   Options
	clock  clock.Clock
	// dns makes the sandboxes' DNS configs from Options' resolver settings.
	dns poddns.Config

	// The machine's figures, probed once on first use.
	nodeOnce sync.Once
	node     podresources.NodeFacts
	nodeErr  error

	// vols makes the pods' volumes on the host; it guards its own state.
	vols *volumes.Host
}

// New builds a Builder over the runtime's image service.
func New(images internalapi.ImageManagerService, opts Options) *Builder {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.PodLogsDir == "" {
		opts.PodLogsDir = "/var/log/pods"
	}
	b := &Builder{
		images: images, opts: opts, clock: opts.Clock,
		dns: poddns.Config{ResolvConf: opts.ResolvConf, ClusterDNS: opts.ClusterDNS, ClusterDomain: opts.ClusterDomain},
	}
	b.vols = volumes.New(volumes.Options{
		RootDir: opts.RootDir, PodLogsDir: opts.PodLogsDir, Objects: opts.Objects,
		NodeFacts: b.nodeFacts, Clock: opts.Clock,
	})
	return b
}

// nodeFacts probes the machine once and remembers the answer.
func (b *Builder) nodeFacts() (podresources.NodeFacts, error) {
	b.nodeOnce.Do(func() {
		probe := b.opts.ProbeNode
		if probe == nil {
			probe = func() (podresources.NodeFacts, error) { return podresources.ProbeMachine(b.opts.RootDir) }
		}
		b.node, b.nodeErr = probe()
	})
	return b.node, b.nodeErr
}

// PodDir is the pod's state directory under RootDir (see volumes.Host).
func (b *Builder) PodDir(uid types.UID) (string, error) { return b.vols.PodDir(uid) }

// EnsurePodDirs creates the pod's state and log directories before its
// sandbox is created (see volumes.Host).
func (b *Builder) EnsurePodDirs(podDir, logDir string) error {
	return b.vols.EnsurePodDirs(podDir, logDir)
}

// CleanupPodDir removes the pod's state directory after the pod has
// terminated, unmounting what berth mounted under it first (see
// volumes.Host).
func (b *Builder) CleanupPodDir(uid types.UID) error { return b.vols.CleanupPodDir(uid) }

// Objects are the pod's ConfigMaps and Secrets, from Options.Objects.
func (b *Builder) Objects(uid types.UID) podenv.PodObjects { return b.vols.Objects(uid) }

// RefreshObjectVolumes updates the files of every configMap and secret
// volume the pod has already set up (see volumes.Host).
func (b *Builder) RefreshObjectVolumes(pod *v1.Pod) error { return b.vols.RefreshObjectVolumes(pod) }
