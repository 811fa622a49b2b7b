package daemon

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/api"
	"github.com/berth-agent/berth/internal/config"
	"github.com/berth-agent/berth/internal/criclient"
	"github.com/berth-agent/berth/internal/gc"
	"github.com/berth-agent/berth/internal/handlers"
	"github.com/berth-agent/berth/internal/images"
	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/logging"
	"github.com/berth-agent/berth/internal/nodecert"
	"github.com/berth-agent/berth/internal/nodestatus"
	"github.com/berth-agent/berth/internal/podenv"
	"github.com/berth-agent/berth/internal/podevents"
	"github.com/berth-agent/berth/internal/podsapi"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/preload"
	"github.com/berth-agent/berth/internal/source"
	"github.com/berth-agent/berth/internal/store"
	"github.com/berth-agent/berth/internal/syncloop"
)

// Options are what the daemon takes beside its settings.
type Options struct {
	// Version is berth's, logged at the start and sent in status reports.
	Version string
	// Stderr receives the daemon's log.
	Stderr io.Writer
	// OnJournalStream reports whether Stderr is the journal's stream, for
	// --log-format auto (logging.StderrIsJournal for the process's own).
	OnJournalStream func() bool
	// Warnings are what resolving the settings warned about (config.Resolve),
	// logged once the logger exists.
	Warnings []string
}

// Main runs the daemon with settings s until SIGTERM or SIGINT, or until
// something fatal happens; it returns the process exit code: 0 after a
// signal, 1 after a failure (logged).
func Main(s config.Settings, o Options) int {
	// berth's live heap is small and mostly long-lived; the default
	// GOGC=100 lets it double before collecting. Half the headroom keeps
	// an idle appliance's RSS lower for a GC cost that stays small with
	// such a heap. The start runs without the collector (holdGC). GOGC
	// from the environment wins.
	started := func() {}
	if os.Getenv("GOGC") == "" {
		started = holdGC(50)
	}
	defer started()
	level, _ := config.ParseLogLevel(s.LogLevel)  // validated
	format, _ := logging.ParseFormat(s.LogFormat) // validated
	log := logging.New(logging.Options{Format: format, Level: level, Stderr: o.Stderr, OnJournalStream: o.OnJournalStream})
	for _, w := range o.Warnings {
		log.Warn(w)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, s, o.Version, log, started); err != nil {
		log.Error("berth stopped", "err", err)
		return 1
	}
	return 0
}

// run wires berth in one order, each piece from the ones before it, once
// no kubelet or other berth runs the same manifest directory
// (refuseOtherAgents): the node and the sources' configuration
// (identifyNode), the sources and their merge store (started at once, see
// there), the runtime side (the CRI transport, the event log, the runtime
// manager recording into it, the collector: startRuntime), the agent (over
// the store, the event log, the runtime manager and an exec handler on the
// same transport), the local API (listenAPI) and the kubelet's pods API
// (listenPodsAPI). It returns when ctx ends
// (leaving pods running) or something fatal happens.
//
// started is called (in a goroutine of its own) once berth is first ready,
// every pod handed over, or after startBound, whichever comes first.
func run(ctx context.Context, s config.Settings, version string, log *slog.Logger, started func()) error {
	// Before anything reads the manifests or touches the runtime.
	if err := refuseOtherAgents("/proc", s.PodManifestPath, log); err != nil {
		return err
	}
	n, err := identifyNode(s, version, log)
	if err != nil {
		return err
	}
	// The manager reads the pods' ConfigMaps and Secrets from the store.
	store := store.New(n.sources.SourceNames()...)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := &components{cancel: cancel, errc: make(chan error, 5)}
	// The sources read and check the manifests while the runtime is
	// dialled and the rest is built: at boot every pod waits for that
	// reading, and it needs nothing from the runtime. The store holds
	// what they deliver until the agent runs.
	c.start(func() error { return source.Run(ctx, n.sources, store) })

	rt, err := startRuntime(ctx, s, n, store, log)
	if err != nil {
		return c.abort(err)
	}
	status, err := s.StatusConfig(n.name)
	if err != nil {
		return c.abort(err)
	}
	cfg := s.AgentConfig(n.name, n.hostIP, version, n.reg, log, status)
	var certs *nodecert.Manager
	if cfg.Node, cfg.Mirror, certs, err = clusterConfigs(s, n.name, n.hostIP, version, rt.runtimeVersion, log); err != nil {
		return c.abort(err)
	}
	cfg.OnReady = func() { go started() }
	a := syncloop.New(cfg, store, rt.events, rt.mgr, handlers.NewExecer(rt.rs), rt.collector)
	// A start that never gets ready (a source that cannot deliver) still
	// ends; its pods wait for the source, not for the collector.
	bound := time.AfterFunc(startBound, started)
	defer bound.Stop()

	srv, err := listenAPI(s, a, a.NodeState(), n.reg, version, log)
	if err != nil {
		return c.abort(err)
	}
	if certs != nil {
		c.start(func() error { return certs.Run(ctx) })
	}
	c.start(func() error { return rt.preloader.Run(ctx) })
	c.start(func() error { return srv.Serve(ctx) })
	// After the API's Serve: a failure here ends it, removing its socket.
	if path := s.PodsAPISocket(); path != "" {
		pods, err := listenPodsAPI(s, a, path, log)
		if err != nil {
			return c.abort(err)
		}
		c.start(func() error { return pods.Serve(ctx) })
	}
	c.start(func() error { return a.Run(ctx) })
	return c.wait(ctx)
}

// node is who berth runs as: the node's name and IP, the metrics registry
// every part registers on, and the sources' configuration.
type node struct {
	name, hostIP string
	reg          *prometheus.Registry
	sources      source.Config
}

// identifyNode resolves the node's name and IP (--node-ip, else the first
// global address), builds the registry and the sources' configuration,
// and logs the start with them.
func identifyNode(s config.Settings, version string, log *slog.Logger) (node, error) {
	name, err := config.NodeName(s.HostnameOverride)
	if err != nil {
		return node{}, err
	}
	hostIP := s.NodeIP
	if hostIP == "" {
		hostIP = firstGlobalIP()
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	syncloop.RegisterBuildInfo(reg, version, "")
	srcCfg, err := s.SourceConfig(name, reg, log)
	if err != nil {
		return node{}, err
	}
	log.Info("starting berth", "version", version, "node", name, "hostIP", hostIP,
		"manifests", s.PodManifestPath, "url", podspec.RedactURL(srcCfg.URL), "signedURL", srcCfg.URLSigners != nil,
		"signedFiles", srcCfg.FileSigners != nil, "runtime", s.ContainerRuntimeEndpoint)
	return node{name: name, hostIP: hostIP, reg: reg, sources: srcCfg}, nil
}

// runtimeSide is what berth drives the runtime with: the instrumented CRI
// runtime service, the event log, the runtime manager recording into it,
// and the collector.
type runtimeSide struct {
	rs        internalapi.RuntimeService
	events    *podevents.Log
	mgr       *kuberuntime.Manager
	collector *gc.Collector
	// preloader imports the image archives of --image-preload-dir.
	preloader *preload.Preloader
	// runtimeVersion is the runtime's name://version for the Node's
	// nodeInfo, "" while it does not answer.
	runtimeVersion string
}

// startRuntime dials the CRI runtime and builds the runtime side over it;
// the manager reads the pods' ConfigMaps and Secrets from store.
func startRuntime(ctx context.Context, s config.Settings, n node, store *store.Store, log *slog.Logger) (runtimeSide, error) {
	rs, is, runtimeVersion, err := dialRuntime(ctx, s, n.reg, log)
	if err != nil {
		return runtimeSide{}, err
	}
	clk := clock.RealClock{}
	events := podevents.Open(podevents.Options{Clock: clk, Logger: log, StateDir: s.EventsStateDir()})
	opts, err := s.RuntimeOptions(n.name, n.hostIP, events, podObjects(store), log)
	if err != nil {
		return runtimeSide{}, err
	}
	if len(opts.CredentialProviders) > 0 {
		names := make([]string, 0, len(opts.CredentialProviders))
		for _, p := range opts.CredentialProviders {
			names = append(names, p.Name)
		}
		log.Info("image credential providers", "providers", names, "binDir", opts.CredentialProviderBinDir)
	}
	preloader, err := startPreload(s, is, runtimeVersion, events, opts, n.reg, log)
	if err != nil {
		return runtimeSide{}, err
	}
	opts.PendingImport = preloader.Pending
	mgr := kuberuntime.NewManager(rs, is, opts)
	// The collector removes what the manager's relists saw die, and
	// keeps and pins what the preloader put in the runtime.
	collector := gc.New(rs, is, mgr, gc.Options{RootDir: s.RootDir, PodLogsDir: s.PodLogsDir, Clock: clk, Preloaded: preloader})
	return runtimeSide{rs: rs, events: events, mgr: mgr, collector: collector, preloader: preloader, runtimeVersion: runtimeVersion}, nil
}

// startPreload builds the preloader of --image-preload-dir (its lists are
// pulled with the node's credentials and the credential provider plugins
// of opts, as a pod without pull Secrets would be): its importer
// speaks containerd's API on the image service's socket unless the
// runtime is known to be another (CRI-O: no importer yet; a runtime that
// does not answer yet is taken for containerd, and an import fails
// with the runtime's error if it is not).
func startPreload(s config.Settings, is internalapi.ImageManagerService, runtimeVersion string, events *podevents.Log, opts kuberuntime.Options, reg prometheus.Registerer, log *slog.Logger) (*preload.Preloader, error) {
	runtimeName, _, _ := strings.Cut(runtimeVersion, "://")
	var importer preload.Importer
	if runtimeName == "" || runtimeName == "containerd" {
		endpoint := s.ImageServiceEndpoint
		if endpoint == "" {
			endpoint = s.ContainerRuntimeEndpoint
		}
		conn, err := criclient.DialRuntimeAPI(endpoint)
		if err != nil {
			return nil, err
		}
		importer = preload.NewContainerd(conn)
	}
	puller := images.New(is, images.Options{RootDir: s.RootDir, CredentialProviders: opts.CredentialProviders, CredentialProviderBinDir: opts.CredentialProviderBinDir, CredentialProviderTimeout: opts.CredentialProviderTimeout, Logger: log})
	return preload.New(preload.Options{
		Dir: s.ImagePreloadPath(), Importer: importer, RuntimeName: runtimeName, Images: is,
		Credentials: func(image string) ([]*runtimeapi.AuthConfig, error) { return puller.Credentials(&v1.Pod{}, image) },
		Recorder:    events, Logger: log, Metrics: reg,
	})
}

// listenAPI builds the local API over the agent a and opens its listeners
// (--listen, --socket).
// node is the node controller's state, nil without --kubeconfig.
func listenAPI(s config.Settings, a api.Pods, node func() *nodestatus.State, reg *prometheus.Registry, version string, log *slog.Logger) (*api.Server, error) {
	// Validate resolved the group already; -1 (none) leaves the socket
	// root's alone, as gid 0 does.
	gid, err := s.SocketGroupID()
	if err != nil {
		return nil, err
	}
	srv := api.New(a, api.Options{
		PodLogsDir: s.PodLogsDir, ListenPods: api.Exposure(s.ListenPods), SocketGroup: max(gid, 0),
		Metrics: reg, Logger: log, Version: version, Node: node,
	})
	// The healthz port first: a failure of Listen then leaves no socket.
	if addr := s.HealthzAddress(); addr != "" {
		if err := srv.ListenHealthz(addr); err != nil {
			return nil, err
		}
	}
	if err := srv.Listen(s.Listen, s.Socket); err != nil {
		return nil, err
	}
	return srv, nil
}

// listenPodsAPI builds the kubelet's pods API over the agent a and opens
// its socket at path (--pods-api), root's alone or also --socket-group's.
func listenPodsAPI(s config.Settings, a podsapi.Pods, path string, log *slog.Logger) (*podsapi.Server, error) {
	gid, err := s.SocketGroupID()
	if err != nil {
		return nil, err
	}
	srv := podsapi.New(a, podsapi.Options{SocketGroup: max(gid, 0), Logger: log})
	if err := srv.Listen(path); err != nil {
		return nil, err
	}
	return srv, nil
}

// components are berth's long-running parts (the sources, the API, the
// agent), each returning when ctx ends or on a fatal error.
type components struct {
	cancel  context.CancelFunc // ends ctx, and so every component
	errc    chan error         // room for every component's return
	running int
}

// start runs f as a component.
func (c *components) start(f func() error) {
	c.running++
	go func() { c.errc <- f() }()
}

// abort ends the components started so far before berth returns err.
func (c *components) abort(err error) error {
	c.cancel()
	for range c.running {
		<-c.errc
	}
	return err
}

// wait returns once every component has: the first to return ends berth,
// the others follow ctx. Its error is the first error; the cancellation
// that ends berth is none.
func (c *components) wait(ctx context.Context) error {
	err := <-c.errc
	c.cancel()
	for range c.running - 1 {
		if e := <-c.errc; e != nil && err == nil {
			err = e
		}
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// dialRuntime connects to the CRI runtime and image services, logs the
// runtime's version (or that it is not usable yet: berth retries), and
// instruments both with metrics on reg. It returns the runtime's version
// as NAME://VERSION, the Node's containerRuntimeVersion ("" when not
// reached yet).
func dialRuntime(ctx context.Context, s config.Settings, reg prometheus.Registerer, log *slog.Logger) (internalapi.RuntimeService, internalapi.ImageManagerService, string, error) {
	rs, is, err := criclient.Dial(s.ContainerRuntimeEndpoint, s.ImageServiceEndpoint, s.RuntimeRequestTimeout.Duration)
	if err != nil {
		return nil, nil, "", err
	}
	var runtimeVersion string
	if v, err := criclient.CheckVersion(ctx, rs, s.ContainerRuntimeEndpoint); err != nil {
		log.Error("container runtime not usable yet; berth keeps retrying", "err", err)
	} else {
		log.Info("container runtime", "name", v.RuntimeName, "version", v.RuntimeVersion, "cri", v.RuntimeApiVersion)
		runtimeVersion = v.RuntimeName + "://" + v.RuntimeVersion
	}
	rs, is = criclient.Instrument(rs, is, reg)
	return rs, is, runtimeVersion, nil
}

// firstGlobalIP picks the node IP when --node-ip is not given: the first
// global unicast address, IPv4 preferred, as the kubelet falls back to.
func firstGlobalIP() string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return ""
	}
	var v6 string
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || !ipn.IP.IsGlobalUnicast() {
			continue
		}
		if ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
		if v6 == "" {
			v6 = ipn.IP.String()
		}
	}
	return v6
}

// podObjects gives the runtime manager the ConfigMaps and Secrets the store
// resolved for each pod: manifest and kuberuntime do not know each other.
func podObjects(store *store.Store) func(types.UID) podenv.PodObjects {
	return func(uid types.UID) podenv.PodObjects {
		o := store.PodObjects(uid)
		if o == nil {
			return podenv.PodObjects{}
		}
		return podenv.PodObjects{ConfigMaps: o.ConfigMaps, Secrets: o.Secrets}
	}
}
