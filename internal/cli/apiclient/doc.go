// Package apiclient is the berth CLI's client of the daemon's local API
// over its unix socket: dialing with the peer-credential check (a socket
// served by another user than root or the caller is refused), GET and JSON
// requests whose failures say what the operator can do (no socket,
// permission denied, a stale socket, a daemon that does not answer, one
// too old to serve a path), the pod list and the resolution of what the
// operator typed to one pod (ResolvePod), and the reading of a watch
// stream (Watch).
//
// It owns the API's paths as the client sees them and the messages of its
// failures. It must never import cobra, internal/cli or its printers (the
// commands decide what to print), nor the daemon's side (api, syncloop,
// podworkers, kuberuntime): it speaks to the daemon over the socket's
// JSON only.
//
// A Client holds no mutable state of its own beyond the connections of
// its http.Client, which net/http owns; one Client may serve concurrent
// requests.
package apiclient
