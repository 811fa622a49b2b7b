package podworkers

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/podplan"
)

// Runtime is what the agent needs of the runtime manager. *kuberuntime.Manager
// implements it; the seam exists so the workers' own tests can count and
// order calls.
type Runtime interface {
	// PlanPod decides what SyncPod does for the pod from its status; the
	// workers ask it whether a sync starts a sandbox (which waits for a
	// start slot), then hand the same plan to SyncPod.
	PlanPod(pod *v1.Pod, status *podplan.PodStatus, health podplan.ContainerHealth) podplan.PodActions
	SyncPod(ctx context.Context, pod *v1.Pod, status *podplan.PodStatus, plan *podplan.PodActions, opts kuberuntime.SyncOptions) kuberuntime.SyncResult
	// PrePull makes a pod's images present before it starts (a new
	// version waiting for the old one's full name), reporting what it
	// pulls to pulling first.
	PrePull(ctx context.Context, pod *v1.Pod, pulling func(images []string)) kuberuntime.PrePullResult
	KillPod(ctx context.Context, pod *v1.Pod, status *podplan.PodStatus, gracePeriodOverride *int64) error
	RemovePod(ctx context.Context, status *podplan.PodStatus) error
	PodStatus(ctx context.Context, uid types.UID) (*podplan.PodStatus, error)
	Relist(ctx context.Context) (map[types.UID]*podplan.PodStatus, error)
	CleanupPodDir(uid types.UID) error
	ForgetStaleBackoffs()
}

var _ Runtime = (*kuberuntime.Manager)(nil)
