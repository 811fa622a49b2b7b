// Package criclient is berth's transport to a CRI runtime: it dials the
// runtime and image services on their unix sockets, checks that the
// runtime speaks CRI v1, and wraps both services with Prometheus series
// per call. It knows nothing of pods: the runtime manager (kuberuntime)
// builds on the internalapi.RuntimeService and ImageManagerService it
// returns.
//
// Why not k8s.io/cri-client, the kubelet's client? It links in
// OpenTelemetry, k8s.io/component-base and klog, none of which berth
// otherwise needs; but size is the lesser reason. cri-client asks
// the runtime its version while it is built and fails when the runtime is
// not up yet, where Dial never waits, so berth can start before containerd
// and keeps its pods' status served meanwhile; calls here are not
// wait-for-ready and fail at once with codes.Unavailable while the runtime
// is down; the socket is retried every second at most (cri-client: 3 s);
// and this package logs nothing itself (cri-client logs through klog),
// leaving every message to berth's one logger.
//
// It is a leaf: it must never import another berth package.
//
// The node-wide ListContainers and ListPodSandbox replies are decoded by
// listCodec (listdecode.go), which reuses the objects of the last reply
// whose ID and state are unchanged: the listings it returns share their
// objects, which callers must not modify.
//
// A connection owns its own state (the dialed socket, the metric series,
// the last listings); it is safe for concurrent use. The one process-wide state it sets is
// gRPC's default buffer pool, from init (bufferPoolExponents in dial.go).
package criclient
