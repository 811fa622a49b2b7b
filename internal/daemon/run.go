package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"k8s.io/apimachinery/pkg/types"
	internalapi "k8s.io/cri-api/pkg/apis"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/api"
	"github.com/berth-agent/berth/internal/criclient"
	"github.com/berth-agent/berth/internal/gc"
	"github.com/berth-agent/berth/internal/handlers"
	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/podenv"
	"github.com/berth-agent/berth/internal/podevents"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/rollback"
	"github.com/berth-agent/berth/internal/source"
	"github.com/berth-agent/berth/internal/statusreport"
	"github.com/berth-agent/berth/internal/store"
	"github.com/berth-agent/berth/internal/syncloop"
)

func runRun(args []string, stdout, stderr io.Writer) int {
	s, err := parseSettings(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "berth run: %v\n", err)
		return 2
	}
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
	level, _ := parseLogLevel(s.LogLevel)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	for _, w := range configWarnings {
		log.Warn(w)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, s, log, started); err != nil {
		log.Error("berth stopped", "err", err)
		return 1
	}
	return 0
}

// run wires berth in one order, each piece from the ones before it: the
// sources and their merge store (started at once, see there), the CRI
// transport, the event log, the runtime manager (recording into the event
// log), the agent (over the store, the event log, the runtime manager and
// an exec handler on the same transport), and the local API. It returns
// when ctx ends (leaving pods running) or something fatal happens.
//
// started is called (in a goroutine of its own) once berth is first ready,
// every pod handed over, or after startBound, whichever comes first.
func run(ctx context.Context, s settings, log *slog.Logger, started func()) error {
	nodeName, err := nodeName(s.HostnameOverride)
	if err != nil {
		return err
	}
	hostIP := s.NodeIP
	if hostIP == "" {
		hostIP = firstGlobalIP()
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	syncloop.RegisterBuildInfo(reg, version, "")
	srcCfg, err := s.sourceConfig(nodeName, reg, log)
	if err != nil {
		return err
	}
	log.Info("starting berth", "version", version, "node", nodeName, "hostIP", hostIP,
		"manifests", s.PodManifestPath, "url", podspec.RedactURL(srcCfg.URL), "signedURL", srcCfg.URLSigners != nil,
		"signedFiles", srcCfg.FileSigners != nil, "runtime", s.ContainerRuntimeEndpoint)
	// The manager reads the pods' ConfigMaps and Secrets from the store.
	store := store.New(srcCfg.SourceNames()...)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c := &components{cancel: cancel, errc: make(chan error, 3)}
	// The sources read and check the manifests while the runtime is
	// dialled and the rest is built: at boot every pod waits for that
	// reading, and it needs nothing from the runtime. The store holds
	// what they deliver until the agent runs.
	c.start(func() error { return source.Run(ctx, srcCfg, store) })

	rs, is, err := dialRuntime(ctx, s, reg, log)
	if err != nil {
		return c.abort(err)
	}
	clk := clock.RealClock{}
	events := podevents.New(clk, log)
	mgr := kuberuntime.NewManager(rs, is, s.runtimeOptions(nodeName, hostIP, events, store, log))
	// The collector removes what the manager's relists saw die.
	collector := gc.New(rs, is, mgr, gc.Options{RootDir: s.RootDir, PodLogsDir: s.PodLogsDir, Clock: clk})

	status, err := s.statusConfig(nodeName)
	if err != nil {
		return c.abort(err)
	}
	cfg := s.agentSettings(nodeName, hostIP, reg, log, status)
	cfg.OnReady = func() { go started() }
	a := syncloop.New(cfg, store, events, mgr, handlers.NewExecer(rs), collector)
	// A start that never gets ready (a source that cannot deliver) still
	// ends; its pods wait for the source, not for the collector.
	bound := time.AfterFunc(startBound, started)
	defer bound.Stop()

	srv := api.New(a, api.Options{PodLogsDir: s.PodLogsDir, ListenPods: api.Exposure(s.ListenPods), Metrics: reg, Logger: log})
	if err := srv.Listen(s.Listen, s.Socket); err != nil {
		return c.abort(err)
	}
	c.start(func() error { return srv.Serve(ctx) })
	c.start(func() error { return a.Run(ctx) })
	return c.wait(ctx)
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

// sourceConfig is the manifest sources' configuration: the file and URL
// sources, their signers and persisted state, with signature metrics on
// reg.
func (s settings) sourceConfig(nodeName string, reg prometheus.Registerer, log *slog.Logger) (source.Config, error) {
	manifestURL, err := s.manifestURL(nodeName)
	if err != nil {
		return source.Config{}, fmt.Errorf("--manifest-url: %w", err)
	}
	var signers, fileSigners *source.Signers
	if s.ManifestURLSigners != "" {
		if signers, err = source.LoadAllowedSigners(s.ManifestURLSigners); err != nil {
			return source.Config{}, fmt.Errorf("--manifest-url-allowed-signers: %w", err)
		}
	}
	if s.PodManifestSigners != "" {
		if fileSigners, err = source.LoadAllowedSigners(s.PodManifestSigners); err != nil {
			return source.Config{}, fmt.Errorf("--pod-manifest-allowed-signers: %w", err)
		}
	}
	return source.Config{
		NodeName:           nodeName,
		ManifestPath:       s.PodManifestPath,
		FileSigners:        fileSigners,
		FileCheckFrequency: s.FileCheckFrequency.Duration,
		URL:                manifestURL,
		URLHeader:          s.manifestHeaders(),
		URLCAFile:          s.ManifestURLCA,
		URLSigners:         signers,
		Metrics:            source.NewMetrics(reg),
		MaxPods:            s.MaxPods,
		Permissions:        source.Permissions(s.ManifestPermissions),
		HTTPCheckFrequency: s.HTTPCheckFrequency.Duration,
		HTTPBackoffMax:     s.HTTPCheckBackoffMax.Duration,
		StateDir:           s.manifestStateDir(),
		Logger:             log,
	}, nil
}

// dialRuntime connects to the CRI runtime and image services, logs the
// runtime's version (or that it is not usable yet: berth retries), and
// instruments both with metrics on reg.
func dialRuntime(ctx context.Context, s settings, reg prometheus.Registerer, log *slog.Logger) (internalapi.RuntimeService, internalapi.ImageManagerService, error) {
	rs, is, err := criclient.Dial(s.ContainerRuntimeEndpoint, s.ImageServiceEndpoint, s.RuntimeRequestTimeout.Duration)
	if err != nil {
		return nil, nil, err
	}
	if v, err := criclient.CheckVersion(ctx, rs, s.ContainerRuntimeEndpoint); err != nil {
		log.Error("container runtime not usable yet; berth keeps retrying", "err", err)
	} else {
		log.Info("container runtime", "name", v.RuntimeName, "version", v.RuntimeVersion, "cri", v.RuntimeApiVersion)
	}
	rs, is = criclient.Instrument(rs, is, reg)
	return rs, is, nil
}

// runtimeOptions are the runtime manager's options: it records into
// events and reads the pods' ConfigMaps and Secrets from store.
func (s settings) runtimeOptions(nodeName, hostIP string, events *podevents.Log, store *store.Store, log *slog.Logger) kuberuntime.Options {
	return kuberuntime.Options{
		NodeName:                nodeName,
		RootDir:                 s.RootDir,
		PodLogsDir:              s.PodLogsDir,
		ResolvConf:              s.ResolvConf,
		ClusterDNS:              s.ClusterDNS,
		ClusterDomain:           s.ClusterDomain,
		CrashLoopBackoffInitial: s.CrashLoopBackoffInitial.Duration,
		CrashLoopBackoffMax:     s.CrashLoopBackoffMax.Duration,
		HostIP:                  hostIP,
		Recorder:                events,
		Objects:                 podObjects(store),
		Logger:                  log,
	}
}

// agentSettings is the agent's configuration, but for OnReady.
func (s settings) agentSettings(nodeName, hostIP string, reg *prometheus.Registry, log *slog.Logger, status *statusreport.Config) syncloop.Config {
	return syncloop.Config{
		NodeName:             nodeName,
		HostIP:               hostIP,
		MaxPods:              s.MaxPods,
		MaxParallelPodStarts: s.MaxParallelPodStarts,
		SyncFrequency:        s.SyncFrequency.Duration,
		Metrics:              reg,
		Logger:               log,
		GC:                   s.gcConfig(),
		Rollback: rollback.Config{
			After: map[string]time.Duration{
				podspec.SourceFile: s.FileRollbackAfter.Duration,
				podspec.SourceHTTP: s.HTTPRollbackAfter.Duration,
			},
			MinReady: s.RollbackMinReady.Duration,
			StateDir: s.rollbackStateDir(),
		},
		Shutdown: s.shutdownSettings.agentConfig(),
		Status:   status,
		Version:  version,
	}
}

// nodeName is the kubelet's: the override, or the hostname, lower-cased.
func nodeName(override string) (string, error) {
	name := override
	if name == "" {
		h, err := os.Hostname()
		if err != nil {
			return "", fmt.Errorf("node name: %w (set --hostname-override)", err)
		}
		name = h
	}
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "" {
		return "", errors.New("node name is empty: set --hostname-override")
	}
	return name, nil
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

// rollbackStateDir is where the agent keeps each pod's last Ready version
// and the rollbacks in force across restarts; with no root dir, nowhere.
func (s *settings) rollbackStateDir() string {
	if s.RootDir == "" {
		return ""
	}
	return filepath.Join(s.RootDir, "rollback")
}

// manifestStateDir is where the sources keep each manifest's last good
// version across restarts; with no root dir they keep it in memory only
// (a relative "manifests" would land wherever berth was started).
func (s *settings) manifestStateDir() string {
	if s.RootDir == "" {
		return ""
	}
	return filepath.Join(s.RootDir, "manifests")
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
