package kuberuntime

import (
	"time"

	v1 "k8s.io/api/core/v1"
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
