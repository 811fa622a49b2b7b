// Package rollback judges every new version of a pod on probation and
// decides the automatic rollback of a bad edit to the last version of its
// manifest that was Ready; the sync loop carries the rollbacks out. It
// keeps each manifest's last Ready version and the rollbacks in force in
// state files, so they hold across restarts.
//
// It owns the trials, the last Ready versions, the rollbacks decided and
// their state files. It must never import the sync loop, the pod workers
// or the runtime manager (it records events through kuberuntime.Recorder only).
// Its mutable state is owned by Tracker and guarded by Tracker's mutex,
// which is held while a record is written.
package rollback
