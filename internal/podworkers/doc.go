// Package podworkers runs one lane per pod UID: the lane alone calls the
// runtime manager for its pod, syncing it, then terminating and removing
// it. Around the lanes it keeps the full-name gate (at most one UID of a
// static pod's full name runs at a time, and a replaced one runs until its
// successor has pulled its images: prepull.go), the start queue and its
// adaptive limit, and the probes the lanes feed; each sync writes the
// pod's status into the podstatus.Store it is given.
//
// It owns the lanes, the gate, the start queue and the prober. It must
// never import the sync loop, the merge store, the API or the rollback
// tracker: the sync loop drives it through its methods, and whoever else
// must hear of a status or a terminated lane is passed in Options. Its
// mutable state is owned by Workers and guarded by Workers' mutex (each
// lane's own fields by the lane's goroutine, which runs while the lane has
// work and is started again by its next wake-up).
package podworkers
