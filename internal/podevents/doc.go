// Package podevents keeps the recent events of each pod (Pulling, Started,
// BackOff, Killing, ...) as the kubelet would have recorded them, for the
// local API's /events and /pods/{namespace}/{name}/events and the logs,
// and keeps them across restarts under --root-dir (bounded in count and
// bytes, see persist.go).
//
// It owns the per-pod rings of events and their file. It must never import
// the sync loop, the pod workers or the merge store: anyone records
// through Event (it is the runtime manager's kuberuntime.Recorder). Its
// mutable state, the rings, is owned by Log and guarded by Log's mutex;
// the events file is written only by the goroutine in Log.Run, which
// Event wakes without waiting.
package podevents
