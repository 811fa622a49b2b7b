package api

import (
	"fmt"
	"net"
	"net/http"
	"strings"
)

// Exposure says what pod data the TCP address serves. Every local user can
// reach that address, without authentication; the unix socket (root and
// its group) always serves everything.
type Exposure string

const (
	// ExposeNone serves health, readiness and metrics only: the default.
	ExposeNone Exposure = "none"
	// ExposeRedacted adds /pods and /pods/{namespace}/{name} with what may
	// hold secrets removed (see redactPod), for a monitoring agent.
	ExposeRedacted Exposure = "redacted"
	// ExposeFull serves pods, events and problems as the socket does
	// (container logs stay on the socket).
	ExposeFull Exposure = "full"
)

// ParseExposure checks a --listen-pods value.
func ParseExposure(s string) (Exposure, error) {
	switch e := Exposure(s); e {
	case ExposeNone, ExposeRedacted, ExposeFull:
		return e, nil
	}
	return "", fmt.Errorf("--listen-pods=%q: want none, redacted or full", s)
}

// maxRequestBody bounds what berth reads of a request body: every route is
// a GET, so anything sent is junk.
const maxRequestBody = 1 << 10

// overTCP reports whether r came in on the TCP address rather than the
// unix socket.
func overTCP(r *http.Request) bool {
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return !ok || addr.Network() != "unix"
}

// guard wraps the whole API: it bounds request bodies and, on TCP, refuses
// requests for another host name, so a web page whose name resolves to
// 127.0.0.1 (DNS rebinding) cannot read berth from the user's browser.
// The socket is out of a browser's reach, and clients name it anything
// (berth's CLI says "berth", curl --unix-socket "localhost"): it is not
// checked.
func (api *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, maxRequestBody)
		if overTCP(r) && !api.hostAllowed(r) {
			http.Error(w, fmt.Sprintf("host %q is not berth's: use the address berth listens on (%s) or localhost", r.Host, api.listenAddr),
				http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed accepts a Host naming this machine's loopback (localhost,
// 127.0.0.0/8, ::1), the host of --listen as written, or the IP address
// the connection came in on. Names that merely resolve to those are not
// accepted: that is what DNS rebinding relies on.
func (api *Server) hostAllowed(r *http.Request) bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "" {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	if listenHost, _, err := net.SplitHostPort(api.listenAddr); err == nil && listenHost != "" && strings.EqualFold(host, listenHost) {
		return true
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return false
	}
	if ip.IsLoopback() {
		return true
	}
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(*net.TCPAddr); ok && local.IP.Equal(ip) {
		return true
	}
	return false
}

// exposed lets a pod-data route through on the socket, and on TCP when
// --listen-pods is at least need; otherwise it answers 403 with what to do.
func (api *Server) exposed(need Exposure, next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if overTCP(r) && !api.exposure.atLeast(need) {
			http.Error(w, fmt.Sprintf("%s is served on berth's unix socket only (--socket; `berth pods` uses it): the TCP address is open to every local user."+
				" To open it to a monitoring agent, set --listen-pods=%s (now %s)", r.URL.Path, need, api.exposure), http.StatusForbidden)
			return
		}
		next(w, r)
	}
}

func (e Exposure) atLeast(need Exposure) bool {
	rank := map[Exposure]int{ExposeNone: 0, ExposeRedacted: 1, ExposeFull: 2}
	return rank[e] >= rank[need]
}
