// Package api serves berth's local HTTP API on a loopback TCP address and
// a unix socket: /healthz, /readyz, /version, /metrics, /pods with their
// events and watches, /events, /problems, and (on the socket only)
// container logs and the node controller's state (/node), each bounded and guarded by what --listen-pods exposes
// over TCP.
//
// It owns the listeners, their connection limits and the redaction of what
// TCP serves. It must never import the sync loop, the pod workers or the
// runtime manager: it reads pods, health and problems through the Pods it
// is given, and the node's state through the function it is given. Its mutable state (listeners, tokens of log streams, watches
// and /pods answers) is owned by Server: Listen and Serve set it up, each request
// takes its tokens through channels.
package api
