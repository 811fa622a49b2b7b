// Package podsapi serves the kubelet's local pods API (KEP-4188, the gRPC
// service v1alpha1.Pods of k8s.io/kubelet: ListPods, GetPod, WatchPods)
// on a unix socket under --root-dir, at the path the kubelet uses under
// its own root directory, so that on-node tools written for the kubelet
// read berth unchanged. It serves the pods berth runs as a kubelet's pod
// manager returns them: each static pod's spec as its manifest says, with
// the status berth's status store has, as v1.Pod protobuf bytes.
//
// It owns the gRPC server, its socket and its limits: the watches served
// at once, the lists built at once, the time a watcher may take to read.
// A watch queues nothing: it relists when the pods change and sends what
// differs from what it last sent, as the HTTP API's watches do.
//
// It must never import the sync loop, the pod workers, the runtime
// manager or the stores: it reads the pods through the Pods it is given.
// Its mutable state (the listener, the tokens of watches and lists) is
// owned by Server: Listen and Serve set it up, each call takes its tokens
// through channels; each watch's record of what it sent is its handler's.
package podsapi
