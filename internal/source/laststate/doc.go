// Package laststate keeps what berth needs across restarts from a
// manifest source under the state directory: each manifest's last good
// pods and objects (State), so that a restart while a manifest is broken
// runs the last good version, and the node's UID key (LoadUIDKey), so that
// the UIDs berth derives stay the same.
//
// It imports podspec, podrules and statefile only, and must never import
// package source, the store, the agent or the runtime.
//
// A State belongs to the goroutine of the source that made it; the files
// under <state dir>/<source> belong to that source.
package laststate
