// Package kubeclient is berth's API client for a cluster (--kubeconfig):
// client-go's REST client over a scheme of the three API groups berth
// writes, core/v1 (the Node, mirror pods), coordination.k8s.io/v1 (the
// Lease) and certificates.k8s.io/v1 (the CSRs of TLS bootstrap), with the same methods as client-go's typed clients. client-go's
// generated clientset would link every API group's types and clients and
// register them all at start, whether or not berth joins a cluster.
//
// It owns the transport to the API server and nothing about nodes or
// pods. It is a leaf: it imports no other package of berth. It holds no
// mutable state of its own (client-go's REST client is safe for
// concurrent use).
package kubeclient
