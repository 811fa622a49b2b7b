package runtimewatch

import (
	"path/filepath"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	internalapi "k8s.io/cri-api/pkg/apis"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/podpath"
)

// Options are a Watcher's settings, from berth's flags.
type Options struct {
	// PodLogsDir is the root of the CRI log layout (/var/log/pods): a log
	// file a runtime reports elsewhere is never taken for a container's.
	PodLogsDir string
	// RootDir holds per-pod state: a termination-message file elsewhere
	// than under RootDir/pods is never taken for a container's.
	RootDir string
	// Clock is the time source; nil means the real clock.
	Clock clock.Clock
}

// Watcher reads the state of berth's pods from one CRI runtime. It is
// safe for concurrent use.
type Watcher struct {
	runtime internalapi.RuntimeService
	opts    Options
	clock   clock.Clock

	// statusCache holds the status details the CRI lists lack, per object;
	// it guards itself.
	statusCache statusCache
	// lastSandboxes lets Relist skip the sandbox listing while nothing
	// changed; it guards itself.
	lastSandboxes sandboxListing
	// name is the runtime's name, the scheme of podplan.ContainerStatus.Runtime;
	// it guards itself.
	name runtimeName
}

// New is a Watcher over the runtime service.
func New(runtime internalapi.RuntimeService, opts Options) *Watcher {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Watcher{runtime: runtime, opts: opts, clock: opts.Clock}
}

// ContainerFiles are the log and termination-message files of a container
// the latest relist saw, for removing them with the container (the
// runtime manager, container GC): each is "" unless it lies under berth's
// own roots. known is false once the container was removed since the
// relist, or for one no relist saw.
func (w *Watcher) ContainerFiles(id string) (logPath, termPath string, known bool) {
	logPath, known = w.statusCache.containerLogPath(id)
	if !known {
		return "", "", false
	}
	return logPath, w.ownedTermPath(w.statusCache.containerTermPath(id)), true
}

// KnowsSandbox reports whether the latest relist saw the sandbox and
// nothing removed it since, so container GC (cri/gc) skips, without a
// runtime call, a sandbox a pod worker already removed.
func (w *Watcher) KnowsSandbox(id string) bool {
	return w.statusCache.knowsSandbox(id)
}

// Forget drops removed objects from the status cache, so the next pass
// over the same snapshot does not try them again.
func (w *Watcher) Forget(containerIDs, sandboxIDs []string) {
	w.statusCache.forget(containerIDs, sandboxIDs)
}

// OwnedLogPath is path, cleaned, when it lies below PodLogsDir, else "".
// berth removes and rotates the file a runtime reports as a container's
// log: a hostile or confused runtime must not make it remove /etc/shadow.
func (w *Watcher) OwnedLogPath(path string) string {
	if !podpath.Under(w.opts.PodLogsDir, path) {
		return ""
	}
	return filepath.Clean(path)
}

// ownedTermPath is path, cleaned, when it lies below RootDir/pods, else "":
// the same for the termination-message file berth removes with a container.
func (w *Watcher) ownedTermPath(path string) string {
	if !podpath.Under(filepath.Join(w.opts.RootDir, "pods"), path) {
		return ""
	}
	return filepath.Clean(path)
}

// isNotFound reports whether the runtime said the object does not exist:
// an object removed between a listing and its status call.
func isNotFound(err error) bool {
	return status.Code(err) == codes.NotFound
}
