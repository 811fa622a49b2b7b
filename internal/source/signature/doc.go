// Package signature decides which signed manifest bodies berth accepts: it
// parses allowed signers files and checks SSH signatures made in the
// berth-manifest namespace, reads a body's serial, and keeps the serials
// accepted per manifest and per pod, ConfigMap or Secret under
// <state dir>/serials, so that no older signed version runs again
// (Origin, Serials), counting what it refuses (Metrics).
//
// It imports podspec and statefile only, and must never import
// package source, the store, the agent or the runtime.
//
// An Origin and its Serials belong to the goroutine of the source that made
// them; Signers are immutable once parsed.
package signature
