// Package kuberuntime is the runtime manager: it brings a pod to its spec
// on one CRI runtime and reads the pod's state back. It executes the
// actions podplan computes (sync.go: the sandbox, image pulls with the
// credentials pullauth matches and their back-off, containers from the
// configs criconfig translates, hooks; restartrules.go: RestartAllContainers
// resets), kills and removes (kill.go, stopsignal.go, remove.go), and lists
// the runtime's objects into podplan's PodStatus (relist.go, events.go).
//
// It must never import the desired-state packages (manifests, sources, the
// merge store) nor the agent: the pod arrives as a *v1.Pod, the agent's
// ConfigMaps and Secrets through Options.Objects.
//
// A Manager owns its mutable state (back-offs, the status cache, the
// runtime's name, and through its criconfig.Builder the machine's figures
// and user namespaces), each guarded where it is kept; callers own the
// pods they pass and serialize work per pod UID.
package kuberuntime
