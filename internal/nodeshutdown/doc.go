// Package nodeshutdown is graceful node shutdown for static pods (the
// kubelet's shutdownGracePeriod and shutdownGracePeriodCriticalPods; the
// kubelet kills static pods first, or not gracefully). berth holds a
// systemd-logind delay inhibitor lock; when logind announces a shutdown
// (PrepareForShutdown true), berth stops its pods lowest priority first,
// the critical ones (priority >= system-cluster-critical) last within
// their own share of the time, then releases the lock so the shutdown
// proceeds. Stopping berth itself (systemctl stop, an upgrade) still
// leaves every pod running: only a shutdown of the machine stops them.
//
// It owns the inhibitor lock, the logind connection and the order of the
// stops. It must never import the sync loop, the merge store or the
// runtime manager: it stops pods only through the Pods it is given. Its
// mutable state (the lock and the logind signals) is owned by the
// goroutine in Manager.Run.
package nodeshutdown
