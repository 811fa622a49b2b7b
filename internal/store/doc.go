// Package store merges the Snapshots of berth's sources into the ordered
// stream of pod updates (ADD, UPDATE, REMOVE, RECONCILE) the agent
// consumes, and answers the agent's questions about the desired state at
// any time: the current pods and their ConfigMaps and Secrets, every
// source's problems, warnings and version, and whether all sources have
// delivered.
//
// It imports package podspec for the model (and podrules for the host
// ports pods of two sources both claim) and must never import the sources,
// the agent or the runtime.
//
// A Store owns its state behind its own mutex: sources call Apply from
// their goroutines, the agent reads Updates and the query methods.
package store
