// Package kuberuntime is the runtime manager: it brings a pod to its spec
// on one CRI runtime and reads the pod's state back. It computes the
// actions (actions.go, restartrules.go) and executes them (sync.go:
// sandbox, image pulls with their credentials, pod-to-CRI translation of
// sandbox and container configs, starts, hooks), kills and removes
// (kill.go, stopsignal.go, remove.go), and lists the runtime's objects
// into PodStatus (relist.go, events.go).
//
// It must never import the desired-state packages (manifests, sources, the
// merge store) nor the agent: the pod arrives as a *v1.Pod, the agent's
// ConfigMaps and Secrets through Options.Objects.
//
// A Manager owns its mutable state (back-offs, the status cache, the
// user-namespace allocator, the machine's figures), each guarded where it
// is kept; callers own the pods they pass and serialize work per pod UID.
package kuberuntime
