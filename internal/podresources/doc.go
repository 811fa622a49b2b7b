// Package podresources computes what a pod's and a container's resources
// mean on Linux, as the kubelet does: the CRI's cgroup figures (CPU shares
// and quota, memory, hugepages), the pod's requirements, its QoS class and
// a container's oom_score_adj, and the machine's figures (NodeFacts) they
// depend on.
//
// It is a leaf: it must never import another berth package.
//
// It keeps no mutable state: the caller probes the machine (ProbeMachine)
// and keeps the answer.
package podresources
