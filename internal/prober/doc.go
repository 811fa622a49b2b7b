// Package prober runs the liveness, readiness and startup probes of berth's
// pods, as the kubelet's prober does: one worker goroutine per container
// and probe kind, with the probe's initial delay, period, timeout and
// thresholds, and results per runtime container ID. The pod workers feed
// it each pod's runtime status after a sync, read readiness and started
// back into the pod status, and berth hands it to the runtime manager as
// the podplan.ContainerHealth that makes failed containers restart.
//
// It owns the probe workers and their results. It must never import the
// sync loop, the pod workers or the merge store: it learns of pods only
// through UpdatePod and RemovePod. Its mutable state (pods, results,
// workers) is owned by Manager and guarded by Manager's mutex.
package prober
