// Package podenv resolves a container's environment as the kubelet does:
// env and envFrom in order, $(VAR) expansion of values, command, args and
// subPathExpr, the downward API's fieldRef and resourceFieldRef, and the
// values of ConfigMap and Secret references (PodObjects) and env files
// (through Context.FileKey).
//
// It is a leaf: it must never import another berth package; the runtime
// manager (kuberuntime) hands it what it needs in a Context.
//
// It keeps no mutable state; PodObjects are shared and never modified.
package podenv
