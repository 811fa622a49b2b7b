package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-agent/berth/manifest"
)

// API serves berth's local HTTP API on a loopback TCP address and on a unix
// socket: health, readiness, metrics, the pods with their status and events,
// and (on the socket only) container logs.
type API struct {
	// PodLogsDir is the root of the CRI log layout the runtime manager
	// writes (--pod-logs-dir); set it before Serve.
	PodLogsDir string

	agent *Agent
	store *manifest.Store
	log   *slog.Logger
	srv   *http.Server

	listeners []net.Listener
	socket    string // removed on exit
}

// NewAPI builds the API over a running agent.
func NewAPI(a *Agent, store *manifest.Store, reg *prometheus.Registry, log *slog.Logger) *API {
	api := &API{PodLogsDir: "/var/log/pods", agent: a, store: store, log: log}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", api.healthz)
	mux.HandleFunc("GET /readyz", api.readyz)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{
		// Compression buys nothing on a local endpoint and costs a flate
		// writer (about a megabyte) per scrape.
		DisableCompression: true,
	}))
	mux.HandleFunc("GET /pods", api.pods)
	mux.HandleFunc("GET /pods/{namespace}/{name}", api.pod)
	mux.HandleFunc("GET /pods/{namespace}/{name}/events", api.podEvents)
	mux.HandleFunc("GET /pods/{namespace}/{name}/log", api.podLog)
	mux.HandleFunc("GET /problems", api.problems)
	api.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	return api
}

// Listen opens the TCP address and the unix socket ("" skips either). The
// socket's directory is created, a stale socket from a crashed run is
// replaced, and the socket is made mode 0660.
func (api *API) Listen(addr, socket string) error {
	if addr != "" {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", addr, err)
		}
		api.listeners = append(api.listeners, l)
	}
	if socket != "" {
		if err := os.MkdirAll(filepath.Dir(socket), 0o755); err != nil {
			return fmt.Errorf("socket directory: %w", err)
		}
		if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove stale socket %s: %w", socket, err)
		}
		l, err := net.Listen("unix", socket)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", socket, err)
		}
		if err := os.Chmod(socket, 0o660); err != nil {
			l.Close()
			return fmt.Errorf("chmod %s: %w", socket, err)
		}
		api.listeners = append(api.listeners, l)
		api.socket = socket
	}
	return nil
}

// Serve answers on every listener until ctx ends, then closes them and
// removes the socket.
func (api *API) Serve(ctx context.Context) error {
	errc := make(chan error, len(api.listeners))
	for _, l := range api.listeners {
		go func() { errc <- api.srv.Serve(l) }()
	}
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = api.srv.Shutdown(shutdownCtx)
	if api.socket != "" {
		os.Remove(api.socket)
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

func (api *API) healthz(w http.ResponseWriter, _ *http.Request) {
	if err := api.agent.Healthy(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprint(w, "ok")
}

func (api *API) readyz(w http.ResponseWriter, _ *http.Request) {
	if err := api.agent.Ready(); err != nil {
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	fmt.Fprint(w, "ok")
}

func (api *API) pods(w http.ResponseWriter, _ *http.Request) {
	list := v1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}}
	for _, p := range api.agent.Pods() {
		list.Items = append(list.Items, *p)
	}
	writeJSON(w, list)
}

func (api *API) pod(w http.ResponseWriter, r *http.Request) {
	p := api.agent.Pod(r.PathValue("namespace"), r.PathValue("name"))
	if p == nil {
		http.Error(w, fmt.Sprintf("pod %s/%s not found", r.PathValue("namespace"), r.PathValue("name")), http.StatusNotFound)
		return
	}
	writeJSON(w, p)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
