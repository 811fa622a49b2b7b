// Package runtimewatch reads berth's pods back from the CRI runtime: the
// relist (Relist, PodStatus) that groups berth's sandboxes and containers
// into podplan's PodStatus by pod UID, completed from a status cache so a
// relist at idle costs one or two list calls; the CRI container events
// (WatchEvents), hints that make the next relist list afresh; and the
// runtime's name, the scheme of the container IDs berth shows. It is the
// runtime half of the kubelet's PLEG; the agent's loop (syncloop) decides
// when to relist and what a change means.
//
// It must never import the runtime manager (kuberuntime), the
// desired-state packages (manifests, sources, the merge store) nor the
// agent: it knows pods only by the labels berth writes on runtime objects
// (criconfig).
//
// A Watcher owns its mutable state (the status cache, the last sandbox
// listing, the runtime's name), each guarded where it is kept. Whoever
// removes runtime objects tells it (Forget), and whoever creates a sandbox
// may hand it the status read back (RememberSandbox).
package runtimewatch
