// Package syncloop is berth's one reconcile loop: it takes the merge
// store's updates, the PLEG's relists (with the runtime's event stream
// waking it), its resync and housekeeping tickers and the rollbacks the
// tracker decided, and hands the work to the pod workers; it never calls
// the runtime to change a pod itself, so a slow runtime never stalls it.
// Around the loop it keeps max-pods admission, orphan cleanup, health and
// readiness, sd_notify, the loop's metrics, the garbage collection passes,
// and the view of the pods the API and the status report read.
//
// It owns the loop's state and wires the agent-side packages together. It
// must never be imported by the desired-state or runtime packages, nor by
// the packages it drives (podworkers, rollback, nodeshutdown, statusreport,
// api). Its mutable state (the last relist, the refused pods, readiness)
// is owned by the goroutine in Loop.Run; health is guarded by its own
// mutex, and the pods' statuses belong to the status store the pod
// workers write.
package syncloop
