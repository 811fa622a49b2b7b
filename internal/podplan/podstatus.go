package podplan

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/criconfig"
)

// ContainerState is the runtime's view of one container.
type ContainerState string

const (
	ContainerStateCreated ContainerState = "created"
	ContainerStateRunning ContainerState = "running"
	ContainerStateExited  ContainerState = "exited"
	ContainerStateUnknown ContainerState = "unknown"
)

// SandboxState is the runtime's view of one sandbox.
type SandboxState string

const (
	SandboxStateReady    SandboxState = "ready"
	SandboxStateNotReady SandboxState = "notready"
)

// PodStatus is what the runtime says about one pod (one UID). It is the input
// of ComputePodActions and of the agent's v1.PodStatus.
type PodStatus struct {
	UID       types.UID
	Name      string // the pod name (with node suffix), from labels
	Namespace string
	// IPs of the newest ready sandbox on the pod network, primary first;
	// empty on the host network or without a ready sandbox.
	IPs []string
	// Sandboxes newest first.
	Sandboxes []*SandboxStatus
	// Containers of all attempts, newest first.
	Containers []*ContainerStatus
}

// SandboxStatus is one sandbox of a pod.
type SandboxStatus struct {
	ID        string
	State     SandboxState
	CreatedAt time.Time
	Attempt   uint32
	// IP and AdditionalIPs as the runtime reported them ("" on host network).
	IP            string
	AdditionalIPs []string
	// HostNetwork is true when the sandbox's network namespace mode is NODE.
	HostNetwork bool
	Labels      map[string]string
	Annotations map[string]string
}

// ContainerStatus is one container of a pod, any attempt.
type ContainerStatus struct {
	ID string
	// Runtime is the runtime's name ("containerd", "cri-o"), the scheme
	// of the container's ID in a v1 status: Runtime://ID.
	Runtime   string
	SandboxID string
	Name      string
	State     ContainerState
	CreatedAt time.Time
	// StartedAt and FinishedAt are zero when unknown or not reached.
	StartedAt  time.Time
	FinishedAt time.Time
	ExitCode   int32
	Reason     string
	Message    string
	// Image is the image as the spec named it; ImageRef the resolved digest
	// reference (the v1 imageID).
	Image    string
	ImageRef string
	// Hash is the spec hash recorded when berth created the container.
	Hash         uint64
	RestartCount int
	Labels       map[string]string
	Annotations  map[string]string
}

// OwnedSandboxes are the pod's sandboxes that berth created, newest
// first: the ones a kill of the pod stops and its removal removes; a
// sandbox someone else made under the pod's labels is left alone.
func (s *PodStatus) OwnedSandboxes() []*SandboxStatus {
	var owned []*SandboxStatus
	for _, sb := range s.Sandboxes {
		if Owned(sb.Labels) {
			owned = append(owned, sb)
		}
	}
	return owned
}

// FindContainer returns the newest status of the named container, or nil.
func (s *PodStatus) FindContainer(name string) *ContainerStatus {
	for _, c := range s.Containers {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// Owned reports whether an object carries berth's ownership label; berth
// never stops or removes anything else.
func Owned(labels map[string]string) bool {
	return labels[criconfig.LabelManaged] == "true"
}
