// Package kuberuntime is the runtime manager: it brings a pod to its spec
// on one CRI runtime. It executes the plan podplan computes (sync.go: the
// sandbox, image pulls through images with their events and back-offs,
// containers from the configs criconfig translates, hooks; prepull.go: a
// pod's images made present before it starts; restartrules.go:
// RestartAllContainers resets), and kills and removes (kill.go,
// stopsignal.go, remove.go). It reads the pods back through the runtime
// watch it embeds (runtimewatch: relist, container events), whose status
// cache its kills and removals keep current.
//
// It must never import the desired-state packages (manifests, sources, the
// merge store) nor the agent: the pod arrives as a *v1.Pod, the agent's
// ConfigMaps and Secrets through Options.Objects.
//
// A Manager owns its mutable state (the pull, crash-loop and sandbox-name
// back-offs, the pre-pulls' slots, and through its criconfig.Builder the machine's figures and
// user namespaces), each guarded where it is kept; its runtimewatch.Watcher
// owns the status cache and the runtime's name. Callers own the pods they
// pass and serialize work per pod UID.
package kuberuntime
