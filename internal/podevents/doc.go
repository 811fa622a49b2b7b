// Package podevents keeps the recent events of each pod (Pulling, Started,
// BackOff, Killing, ...) as the kubelet would have recorded them, for the
// local API's /pods/{namespace}/{name}/events and the logs.
//
// It owns the per-pod rings of events. It must never import the sync loop,
// the pod workers or the merge store: anyone records through Event (it is
// the runtime manager's kuberuntime.Recorder). Its mutable state, the rings, is
// owned by Log and guarded by Log's mutex.
package podevents
