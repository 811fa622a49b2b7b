// Package mirror keeps a mirror pod in the API server for each static pod
// berth runs when --kubeconfig is set, as the kubelet's mirror client does:
// the pod with the annotation kubernetes.io/config.mirror (its config
// hash), its node name and one controller ownerReference to the Node;
// replaced when the hash changes, deleted when the pod goes, its status
// patched on change with a UID precondition. Pods that the NodeRestriction
// admission plugin would refuse (Unmirrorable) get none, and say why.
//
// It owns the mirror pods berth writes and their schedule. It must never
// import the sync loop, the pod workers, the merge store or the runtime
// packages: the sync loop hands New a snapshot function and an event
// callback. Its mutable state (the mirror pods known in the API server,
// the pods told they have none) is owned by the goroutine in Mirrorer.Run.
package mirror
