// Package podpath builds the host paths berth names after pod fields (UID,
// namespace, name, container and volume names) and checks them, so that
// neither a hostile manifest nor a hostile runtime object makes berth
// create, read or remove anything outside --root-dir and --pod-logs-dir.
// Manifest validation refuses such fields first; this is the second line,
// applied right before a path is used.
//
// It is a leaf: it must never import another berth package.
//
// It keeps no mutable state.
package podpath
