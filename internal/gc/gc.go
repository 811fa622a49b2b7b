package gc

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/backoff"
	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/podplan"
)

// Runtime is the CRI runtime calls the collector makes: it removes and
// reopens, it never lists (what exists comes from the agent's relist).
type Runtime interface {
	RemoveContainer(ctx context.Context, containerID string) error
	RemovePodSandbox(ctx context.Context, podSandboxID string) error
	ReopenContainerLog(ctx context.Context, containerID string) error
	Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error)
}

// Images is the CRI image calls image GC makes.
type Images interface {
	ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error)
	RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error
	ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error)
	ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error)
}

// Manager is what the collector needs of the runtime manager (*kuberuntime.Manager):
// its status cache, which the relist keeps and which says, without a
// runtime call, whether an object of a snapshot still exists and where its
// files are; and its pod directory layout.
type Manager interface {
	// ContainerFiles are the log and termination-message files of a
	// container the latest relist saw, each "" unless under berth's own
	// roots; known is false once the container was removed since.
	ContainerFiles(id string) (logPath, termPath string, known bool)
	// KnowsSandbox reports a sandbox the latest relist saw and nothing
	// removed since.
	KnowsSandbox(id string) bool
	// Forget drops removed objects from the status cache.
	Forget(containerIDs, sandboxIDs []string)
	// PodDir is the pod's state directory under the root directory.
	PodDir(uid types.UID) (string, error)
	// PodLogDir is the pod's log directory, "" when the status cannot
	// name one safely.
	PodLogDir(status *podplan.PodStatus) string
	// CleanupPodDir unmounts and removes the pod's state directory.
	CleanupPodDir(uid types.UID) error
}

var _ Manager = (*kuberuntime.Manager)(nil)

// Options are the collector's settings, from berth's flags.
type Options struct {
	// RootDir and PodLogsDir are the runtime manager's (kuberuntime.Options): the
	// pod directory sweep lists RootDir/pods and the log directories under
	// PodLogsDir.
	RootDir    string
	PodLogsDir string
	// Clock is the time source; nil means the real clock.
	Clock clock.Clock
	// Preloaded are the images of the preload directory, which image GC
	// keeps, and pins with the others it keeps; nil means none.
	Preloaded Preloaded
}

// Preloaded is what image GC needs of the preloader
// (*preload.Preloader).
type Preloaded interface {
	// Images are the normalized names of the images it put in the
	// runtime.
	Images() []string
	// Pin pins them and keep where the runtime pins, and removes the pins
	// berth set on any other image.
	Pin(ctx context.Context, keep []string) error
	// Pending is a channel closed once the files waiting to be imported
	// are, nil when none waits: until then Images does not name what
	// they hold.
	Pending() <-chan struct{}
}

// Collector runs GC passes for the agent; it is safe for concurrent use
// (the agent rotates logs in a goroutine of its own).
type Collector struct {
	runtime Runtime
	images  Images
	manager Manager
	opts    Options
	clock   clock.Clock

	// What passes remember; each guards itself: rotated log files
	// waiting for compression, what image GC knows of each image, and the
	// back-off of removals that failed (10s doubling to 5m), so one the
	// runtime refuses costs neither a runtime call nor a warning every
	// pass.
	logs     logRotator
	imageUse imageTracker
	failures *backoff.Keyed
}

// New builds a collector over the runtime's services and the runtime
// manager that observes them.
func New(runtime Runtime, images Images, manager Manager, opts Options) *Collector {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.PodLogsDir == "" {
		opts.PodLogsDir = "/var/log/pods"
	}
	return &Collector{
		runtime: runtime, images: images, manager: manager, opts: opts, clock: opts.Clock,
		failures: backoff.New(opts.Clock, 10*time.Second, 5*time.Minute),
	}
}
