package kuberuntime

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/podplan"
)

// AnnotationCrashLoopBackoffMax is a pod's own crash-loop ceiling, a Go
// duration: its containers' restart delays never exceed it, nor the
// node-wide --crashloop-backoff-max (or the kubelet config's
// maxContainerRestartPeriod, KEP-5593). manifest validates it under the
// same name (podrules.AnnotationCrashLoopBackoffMax); the two packages do
// not import each other.
const AnnotationCrashLoopBackoffMax = "berth.io/crashloop-backoff-max"

// podCrashLoopCeiling is the pod's crash-loop ceiling, or the node's when
// the pod sets none (or one manifest validation would have refused).
func (m *Manager) podCrashLoopCeiling(pod *v1.Pod) time.Duration {
	node := m.opts.CrashLoopBackoffMax
	v, ok := pod.Annotations[AnnotationCrashLoopBackoffMax]
	if !ok {
		return node
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return node
	}
	return min(d, node)
}

// crashLoopBackoff decides whether a container that exited may be restarted
// now, the kubelet's doBackOff: the back-off runs from the moment it
// finished. When it may, the back-off is raised for the next exit and 0 is
// returned; otherwise the time left and the kubelet's message.
func (m *Manager) crashLoopBackoff(pod *v1.Pod, c *v1.Container, status *podplan.PodStatus) (time.Duration, string) {
	cs := status.FindContainer(c.Name)
	if cs == nil || cs.State != podplan.ContainerStateExited {
		return 0, ""
	}
	key := crashKey(pod.UID, c.Name)
	if remaining := m.crashBackoff.Remaining(key, cs.FinishedAt); remaining > 0 {
		return remaining, fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", m.crashBackoff.Delay(key), c.Name, podRef(pod))
	}
	m.crashBackoff.NextWithin(key, m.podCrashLoopCeiling(pod))
	return 0, ""
}

// crashKey is the crash-loop back-off key of a container of a pod.
func crashKey(uid types.UID, container string) string {
	return string(uid) + "/" + container
}
