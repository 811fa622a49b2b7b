// Package gc keeps a device's disk from filling up with what pods leave
// behind: dead containers and sandboxes (containers.go, sandboxes.go),
// unused images (images.go), oversized container logs (logrotate.go) and
// the directories of pods that no longer exist (poddirs.go). It is the
// kubelet's container GC, image GC and container log manager, kept apart
// from the runtime manager (kuberuntime.Manager) as the kubelet keeps
// kuberuntime_gc.go apart from kuberuntime_manager.go: it decides and
// removes, the manager creates and observes.
//
// It must never import the desired-state packages nor the agent, which
// schedules its passes; it reads pods' state through kuberuntime.
//
// A Collector owns what its passes remember (rotated logs, image use,
// removal back-offs), each part guarding itself; the agent schedules the
// passes.
package gc
