package volumes

import (
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/podenv"
	"github.com/berth-agent/berth/internal/podresources"
)

// Options are the settings of a pod's volumes on the host, from berth's
// flags.
type Options struct {
	// RootDir holds per-pod state: RootDir/pods/<uid>/volumes/... for
	// emptyDirs, configMap and secret volumes, etc-hosts, termination-message
	// files, subPath mount points and the user-namespace record.
	RootDir string
	// PodLogsDir is the root of the CRI log layout (/var/log/pods).
	PodLogsDir string
	// Objects returns the ConfigMaps and Secrets the pod with a UID
	// references; nil means none anywhere.
	Objects func(uid types.UID) podenv.PodObjects
	// NodeFacts returns the machine's figures, which bound memory-backed
	// volumes; it is called only for those. nil means the real machine's,
	// probed at each call.
	NodeFacts func() (podresources.NodeFacts, error)
	// SubIDFiles are the subordinate UID and GID files user namespaces
	// take their ranges from; empty means /etc/subuid and /etc/subgid.
	SubIDFiles [2]string
	// Clock is the time source; nil means the real clock.
	Clock clock.Clock
}

// Host makes a pod's volumes on the host and removes them. It is safe for
// concurrent use by many pod workers, each working on a different pod UID.
type Host struct {
	opts  Options
	clock clock.Clock

	// userns hands out pods' user-namespace ID ranges (userns.go); it
	// guards itself.
	userns usernsAllocator
}

// New builds a Host.
func New(opts Options) *Host {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.PodLogsDir == "" {
		opts.PodLogsDir = "/var/log/pods"
	}
	if opts.SubIDFiles == [2]string{} {
		opts.SubIDFiles = [2]string{"/etc/subuid", "/etc/subgid"}
	}
	if opts.NodeFacts == nil {
		opts.NodeFacts = func() (podresources.NodeFacts, error) { return podresources.ProbeMachine(opts.RootDir) }
	}
	h := &Host{opts: opts, clock: opts.Clock}
	h.userns.subIDFiles = opts.SubIDFiles
	return h
}
