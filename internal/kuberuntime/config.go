package kuberuntime

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/podplan"
)

// containerConfig is the container's CRI config from the pod-to-CRI
// translation (criconfig); every failure is a *SyncError with reason
// CreateContainerConfigError and a message naming what in the manifest is
// wrong.
func (m *Manager) containerConfig(ctx context.Context, pod *v1.Pod, c *v1.Container, restartCount int, podIPs []string, imageRef string) (*runtimeapi.ContainerConfig, error) {
	cfg, err := m.config.ContainerConfig(ctx, pod, c, restartCount, podIPs, imageRef)
	if err != nil {
		return nil, &SyncError{Reason: ReasonCreateContainerConfigError, Message: err.Error(), Err: err}
	}
	return cfg, nil
}

// nextRestartCount is the restart count of the container's next start: one
// more than its newest status. Without any status (the runtime lost its
// state, say after a reboot) it continues from the newest <n>.log in the
// container's log directory, as the kubelet does, so a new start never
// appends to or overwrites an old log.
func (m *Manager) nextRestartCount(pod *v1.Pod, name string, status *podplan.PodStatus) int {
	if cs := status.FindContainer(name); cs != nil {
		return cs.RestartCount + 1
	}
	return m.config.NextLogIndex(pod, name)
}

// PodDir is the pod's state directory under RootDir; a UID that is not a
// single safe path element is an error.
func (m *Manager) PodDir(uid types.UID) (string, error) {
	return m.config.PodDir(uid)
}

// CleanupPodDir removes the pod's state directory after the pod has
// terminated, unmounting what berth mounted under it first; a missing
// directory is success.
func (m *Manager) CleanupPodDir(uid types.UID) error {
	return m.config.CleanupPodDir(uid)
}
