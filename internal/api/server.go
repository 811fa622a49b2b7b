package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/nodestatus"
	"github.com/berth-agent/berth/internal/podevents"
	"github.com/berth-agent/berth/internal/podspec"
)

// Server serves berth's local HTTP API on a loopback TCP address and on a
// unix socket: health, readiness, metrics, the pods with their status and
// events, and (on the socket only) container logs.
//
// Everything that can be asked of it is bounded: connections per listener,
// concurrent log streams, concurrent /pods answers, request sizes and the
// time a request may take to arrive or its answer to leave.
type Server struct {
	view       Pods
	podLogsDir string
	clock      clock.PassiveClock
	log        *slog.Logger
	srv        *http.Server

	// Limits; New sets them, tests lower them before Listen.
	maxConns   int           // per listener
	connGrace  time.Duration // a connection silent this long may be evicted
	exposure   Exposure      // what pod data the TCP address serves
	listenAddr string        // --listen as given, for the Host check
	logStreams chan struct{} // one token per log request being served
	podsBuilds chan struct{} // one token per /pods answer being built
	watches    chan struct{} // one token per watch being served
	writeGrace time.Duration // how long a log stream may block on a client

	listeners []net.Listener
	healthL   net.Listener // the kubelet's healthz port, or nil
	healthSrv *http.Server // serves healthz: /healthz alone
	socket    string       // removed on exit
	socketGID int          // the socket's group; 0 is root's

	versionInfo version.Info // what /version serves
	// nodeState is the node controller's state /node serves; nil
	// without --kubeconfig.
	nodeState func() *nodestatus.State
}

// Pods is what the API serves: the sync loop's view of berth's pods,
// health and problems. Every method may be called from any goroutine.
type Pods interface {
	Healthy() error
	Ready() error
	// Pods lists every pod berth knows, sorted, as /pods shows them.
	Pods() []*v1.Pod
	// Pod is namespace/name as Pods lists it first, or nil.
	Pod(namespace, name string) *v1.Pod
	Events(uid types.UID) []podevents.Event
	Problems() []podspec.Problem
	// Changed returns a channel closed at the next change of what Pods
	// shows; a watch takes it before it lists the pods.
	Changed() <-chan struct{}
	// AllEvents is every pod's recent events, oldest first.
	AllEvents() []podevents.Record
	// EventsChanged returns a channel closed at the next event recorded.
	EventsChanged() <-chan struct{}
}

// Options are what the API is built with.
type Options struct {
	// PodLogsDir is the root of the CRI log layout the runtime manager
	// writes (--pod-logs-dir); "" is /var/log/pods.
	PodLogsDir string
	// ListenPods is what pod data the TCP address serves (--listen-pods).
	// The zero value serves none.
	ListenPods Exposure
	// Metrics is what /metrics serves.
	Metrics prometheus.Gatherer
	Clock   clock.PassiveClock
	Logger  *slog.Logger
	// Version is berth's version as `berth version` prints it (the
	// Makefile stamps it from git describe); "" is "dev". /version serves
	// it.
	Version string
	// Revision is the commit berth was built from; "" takes the one the
	// Go toolchain recorded in the binary, if any.
	Revision string
	// SocketGroup is the group id of the admin group allowed to use the
	// socket: it is created 0660 of that group, in a directory berth
	// creates 0750 of that group. 0 (the zero value) is root's group:
	// root alone.
	SocketGroup int
	// Node returns the node controller's state, as /node serves it on
	// the socket; nil when berth joins no cluster (no --kubeconfig). It
	// may be called from any goroutine.
	Node func() *nodestatus.State
}

// Limits of the API. A connection costs a descriptor and a goroutine or
// two; a log stream also an open file and a read buffer; a /pods answer a
// copy of every pod. The TCP port and the socket each get maxAPIConns, so
// whoever fills the TCP port (any local user) does not keep root's CLI
// out, and berth keeps thousands of descriptors for its own work.
const (
	maxAPIConns     = 64
	maxLogStreams   = 32
	maxPodsBuilds   = 2
	apiConnGrace    = time.Second
	apiReadTimeout  = 10 * time.Second
	apiWriteTimeout = 30 * time.Second
	apiIdleTimeout  = 30 * time.Second
)

// New builds the API over pods.
func New(pods Pods, opts Options) *Server {
	if opts.PodLogsDir == "" {
		opts.PodLogsDir = "/var/log/pods"
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.ListenPods == "" {
		opts.ListenPods = ExposeNone
	}
	api := &Server{
		view: pods, podLogsDir: opts.PodLogsDir, exposure: opts.ListenPods, clock: opts.Clock, log: opts.Logger,
		maxConns:    maxAPIConns,
		connGrace:   apiConnGrace,
		logStreams:  make(chan struct{}, maxLogStreams),
		podsBuilds:  make(chan struct{}, maxPodsBuilds),
		watches:     make(chan struct{}, maxWatches),
		writeGrace:  apiWriteTimeout,
		versionInfo: versionInfo(opts.Version, opts.Revision),
		socketGID:   opts.SocketGroup,
		nodeState:   opts.Node,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", api.healthz)
	mux.HandleFunc("GET /readyz", api.readyz)
	mux.HandleFunc("GET /version", api.version)
	mux.Handle("GET /metrics", promhttp.HandlerFor(opts.Metrics, promhttp.HandlerOpts{
		// Compression buys nothing on a local endpoint and costs a flate
		// writer (about a megabyte) per scrape.
		DisableCompression: true,
	}))
	mux.HandleFunc("GET /pods", api.exposed(ExposeRedacted, api.pods))
	mux.HandleFunc("GET /pods/{namespace}/{name}", api.exposed(ExposeRedacted, api.pod))
	mux.HandleFunc("GET /pods/{namespace}/{name}/events", api.exposed(ExposeFull, api.podEvents))
	mux.HandleFunc("GET /pods/{namespace}/{name}/log", api.podLog)
	mux.HandleFunc("GET /events", api.exposed(ExposeFull, api.events))
	mux.HandleFunc("GET /problems", api.exposed(ExposeFull, api.problems))
	mux.HandleFunc("GET /node", api.node)
	api.srv = &http.Server{
		Handler:           api.guard(mux),
		ReadHeaderTimeout: 5 * time.Second,
		// Log streams lift these for themselves (podLog).
		ReadTimeout:    apiReadTimeout,
		WriteTimeout:   apiWriteTimeout,
		IdleTimeout:    apiIdleTimeout,
		MaxHeaderBytes: 16 << 10,
		ConnState:      trackConnState,
	}
	health := http.NewServeMux()
	health.HandleFunc("GET /healthz", api.healthz)
	api.healthSrv = &http.Server{
		Handler: api.guard(health), ReadHeaderTimeout: 5 * time.Second, ReadTimeout: apiReadTimeout,
		WriteTimeout: apiWriteTimeout, IdleTimeout: apiIdleTimeout, MaxHeaderBytes: 16 << 10, ConnState: trackConnState,
	}
	return api
}

// ListenHealthz opens the kubelet's healthz address (--healthz-port),
// which serves /healthz alone, as the TCP address does: capped at
// maxConns connections, the Host checked. kubeadm's kubelet-check polls it.
func (api *Server) ListenHealthz(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s (healthz): %w", addr, err)
	}
	api.healthL = newLimitListener(l, api.maxConns, api.connGrace, api.clock)
	return nil
}

// Listen opens the TCP address and the unix socket ("" skips either), each
// capped at maxConns connections. The socket is created as listenUnix
// says; a stale one from a crashed run is replaced.
func (api *Server) Listen(addr, socket string) error {
	if addr != "" {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", addr, err)
		}
		api.listeners = append(api.listeners, newLimitListener(l, api.maxConns, api.connGrace, api.clock))
		api.listenAddr = addr
	}
	if socket != "" {
		l, err := listenUnix(socket, api.socketGID)
		if err != nil {
			for _, l := range api.listeners {
				l.Close()
			}
			return err
		}
		api.listeners = append(api.listeners, newLimitListener(l, api.maxConns, api.connGrace, api.clock))
		api.socket = socket
	}
	return nil
}

// Serve answers on every listener until ctx ends, then closes them and
// removes the socket.
func (api *Server) Serve(ctx context.Context) error {
	errc := make(chan error, len(api.listeners)+1)
	for _, l := range api.listeners {
		go func() { errc <- api.srv.Serve(l) }()
	}
	if api.healthL != nil {
		go func() { errc <- api.healthSrv.Serve(api.healthL) }()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = api.srv.Shutdown(shutdownCtx)
	_ = api.healthSrv.Shutdown(shutdownCtx)
	if api.socket != "" {
		os.Remove(api.socket)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

func (api *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	if err := api.view.Healthy(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprint(w, "ok")
}

func (api *Server) readyz(w http.ResponseWriter, _ *http.Request) {
	if err := api.view.Ready(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprint(w, "ok")
}

// pods streams the PodList item by item, so an answer costs one encoded
// pod at a time rather than the whole body, and at most maxPodsBuilds
// answers are built at once (each holds a copy of the pod list): with
// 10,000 pods, concurrent requests queue instead of multiplying berth's
// memory.
func (api *Server) pods(w http.ResponseWriter, r *http.Request) {
	if watch, ok := wantsWatch(w, r); !ok {
		return
	} else if watch {
		api.watch(w, r, api.view.Pods)
		return
	}
	select {
	case api.podsBuilds <- struct{}{}:
		defer func() { <-api.podsBuilds }()
	case <-r.Context().Done():
		return
	}
	redact := overTCP(r) && api.exposure == ExposeRedacted
	w.Header().Set("Content-Type", "application/json")
	bw := bufio.NewWriterSize(w, 32<<10)
	bw.WriteString(`{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[`)
	enc := json.NewEncoder(bw)
	for i, p := range api.view.Pods() {
		if i > 0 {
			bw.WriteByte(',')
		}
		if redact {
			p = redactPod(p)
		}
		if err := enc.Encode(p); err != nil {
			return
		}
	}
	bw.WriteString("]}\n")
	bw.Flush()
}

func (api *Server) pod(w http.ResponseWriter, r *http.Request) {
	if watch, ok := wantsWatch(w, r); !ok {
		return
	} else if watch {
		ns, name := r.PathValue("namespace"), r.PathValue("name")
		api.watch(w, r, func() []*v1.Pod {
			if p := api.view.Pod(ns, name); p != nil {
				return []*v1.Pod{p}
			}
			return nil
		})
		return
	}
	p := api.view.Pod(r.PathValue("namespace"), r.PathValue("name"))
	if p == nil {
		http.Error(w, fmt.Sprintf("pod %s/%s not found", r.PathValue("namespace"), r.PathValue("name")), http.StatusNotFound)
		return
	}
	if overTCP(r) && api.exposure == ExposeRedacted {
		p = redactPod(p)
	}
	writeJSON(w, p)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
