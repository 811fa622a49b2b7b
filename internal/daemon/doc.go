// Package daemon is `berth run` once its settings are resolved: it
// refuses to start on a manifest directory a kubelet or another berth
// runs (doctor.FindOtherAgents, at start only), then builds every
// component whole from config.Settings, in one order (the sources
// and their merge store, the CRI transport, the event log, the runtime
// manager, the garbage collector, the sync loop, the local API, the
// kubelet's pods API (--pods-api) and, with
// --bootstrap-kubeconfig, the node certificate manager), runs
// them until SIGTERM or SIGINT or a fatal error, and starts without the
// Go garbage collector until berth is first ready (holdGC).
//
// It owns that wiring and the components' lifetime (components: start,
// abort, wait). It must never import internal/cli, and holds no pod
// state of its own: each component owns its own. Its mutable state is the
// components value of one run, owned by run's goroutine, and the
// process's GC settings, set by holdGC and restored by its release.
package daemon
