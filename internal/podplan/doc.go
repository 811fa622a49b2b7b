// Package podplan is the runtime's view of a pod and the pure planner on
// it: PodStatus (the pod's sandboxes and containers as the runtime reports
// them) and ComputePodActions, which decides from a pod, its status and
// the probes' verdicts what brings the pod to its spec (kills, the sandbox,
// init and sidecar starts, app starts, restart rules and resets), with the
// kubelet's semantics and no runtime, clock or I/O.
//
// It must never import the runtime manager, a CRI client, the desired-state
// packages (manifests, sources, the merge store) nor the agent; of berth's
// packages it uses only criconfig's labels and container hash and podenv's
// spec lookup.
//
// It owns no mutable state: every function works on the values its caller
// passes, and a PodStatus belongs to whoever read it from the runtime.
package podplan
