// Package handlers runs the actions a container's probes and lifecycle
// hooks share, the same way for both: exec in the container through the
// runtime, and httpGet requests with the kubelet's port resolution,
// headers and redirect policy. The probes and the runtime manager's hooks
// (kuberuntime) import it.
//
// It is a leaf: it must never import another berth package.
//
// It keeps no mutable state; each call owns what it opens.
package handlers
