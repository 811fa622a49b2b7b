// Package podspectest holds the manifests and node name that the tests of
// the desired-state packages share.
//
// It must never import a berth package: podspec's own tests use it.
//
// It has no mutable state.
package podspectest
