// Package nodestatus makes berth a node of a Kubernetes cluster when
// --kubeconfig is set: it registers the Node object as the kubelet does
// (name, labels, taints, addresses, capacity, nodeInfo), keeps its status
// (the Ready and pressure conditions from berth's own measures) up to date
// on change and every --node-status-report-frequency, and renews the
// node's Lease in kube-node-lease. Pods never depend on it: an API server
// that is down, slow or refusing only delays the next attempt.
//
// It owns the Node and Lease objects berth writes, the registration and
// renewal schedule and their back-off, and the berth_node_* series. It
// must never import the sync loop, the pod workers, the merge store or the
// runtime packages: the sync loop hands New a snapshot function. Its
// mutable state (whether the node is registered, the last status and
// Lease written, the back-off, the current error) is owned by the
// goroutine in Controller.Run, which publishes it after each round as an
// immutable State that any goroutine reads through Controller.State.
package nodestatus
