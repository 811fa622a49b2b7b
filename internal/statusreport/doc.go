// Package statusreport PUTs berth's status report to --status-url: which
// pods a device runs and how they fare, which manifest versions it took,
// and its manifest problems, without anything that may be secret.
//
// It owns the report's format, its size bound, and the schedule of PUTs
// (debounce, period, jitter, back-off). It must never import the sync loop
// or the pod workers: the sync loop hands New a snapshot function. Its
// mutable state (the last report sent and the schedule) is owned by the
// goroutine in Reporter.Run.
package statusreport
