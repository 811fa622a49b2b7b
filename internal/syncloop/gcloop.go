package syncloop

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/gc"
	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/podplan"
)

// GCConfig is the garbage collection that keeps a device's disk from
// filling up (internal/gc):
// container and sandbox GC, log rotation, image GC and the sweep of
// leftover pod directories.
type GCConfig struct {
	// Containers is the kubelet's container GC policy.
	Containers gc.Policy
	// Logs is the container log rotation policy; LogMonitorInterval is how
	// often current log files are checked (kubelet: 10s).
	Logs               gc.LogRotationPolicy
	LogMonitorInterval time.Duration
	// Images is the image GC policy; ImagePeriod is how often the image
	// filesystem is checked (kubelet: 5m).
	Images      gc.ImagePolicy
	ImagePeriod time.Duration
	// DirSweepPeriod is how often the pod directories are swept for pods
	// that no longer exist; the first sweep runs once all sources are
	// ready.
	DirSweepPeriod time.Duration
}

func (c *GCConfig) setDefaults() {
	if c.Logs.MaxSize == 0 {
		c.Logs.MaxSize = 10 << 20
	}
	if c.Logs.MaxFiles == 0 {
		c.Logs.MaxFiles = 5
	}
	if c.Logs.Workers == 0 {
		c.Logs.Workers = 1
	}
	if c.LogMonitorInterval == 0 {
		c.LogMonitorInterval = 10 * time.Second
	}
	if c.Images.HighThresholdPercent == 0 && c.Images.LowThresholdPercent == 0 {
		c.Images.HighThresholdPercent, c.Images.LowThresholdPercent = 85, 80
	}
	if c.ImagePeriod == 0 {
		c.ImagePeriod = 5 * time.Minute
	}
	if c.DirSweepPeriod == 0 {
		c.DirSweepPeriod = time.Hour
	}
}

// gcRuntime is what the GC loop calls; *gc.Collector implements it.
type gcRuntime interface {
	GarbageCollect(ctx context.Context, in gc.Input) gc.Result
	SweepPodDirs(keep func(types.UID) bool) ([]gc.Removal, error)
	RotateLogs(ctx context.Context, containerIDs []string, policy gc.LogRotationPolicy) gc.LogRotationResult
	ImageGarbageCollect(ctx context.Context, policy gc.ImagePolicy, pods map[types.UID]*podplan.PodStatus, keep []string) gc.ImageResult
}

var _ gcRuntime = (*gc.Collector)(nil)

// gcPods is what the GC loop asks the agent about pods; every function
// must be safe to call from the GC loop's goroutines.
type gcPods struct {
	sourcesReady func() bool
	desired      func() []*v1.Pod
	// hasWorker reports a pod worker lane for the UID: such a pod is not
	// deleted yet, its lane removes it.
	hasWorker func(types.UID) bool
	// keepImages are the images image GC must keep beside those in use:
	// every version of a pod berth may run; nil keeps none.
	keepImages func() []string
}

// snapshot is a relist result handed over by the sync loop.
type snapshot struct {
	at   time.Time
	pods map[types.UID]*podplan.PodStatus
}

// gcLoop schedules berth's garbage collection in goroutines of its own, off
// the sync loop, which must never wait on the runtime. It calls the runtime
// only to remove or rotate something: what exists comes from the sync
// loop's latest relist (offer), not from lists of its own.
type gcLoop struct {
	rt      gcRuntime
	cfg     GCConfig
	pods    gcPods
	clock   clock.WithTicker
	log     *slog.Logger
	events  kuberuntime.Recorder
	metrics *gcMetrics

	mu     sync.Mutex // guards latest
	latest *snapshot
	// wake has room for one pending pass, so offers coalesce.
	wake chan struct{}

	// Owned by the GC goroutine.
	lastSweep time.Time
	// imagesChecked says an image pass ran: the first one follows the
	// first offer once every source is ready, the rest ImagePeriod apart.
	imagesChecked bool
}

func newGCLoop(rt gcRuntime, cfg GCConfig, pods gcPods, clk clock.WithTicker, log *slog.Logger, events kuberuntime.Recorder, reg prometheus.Registerer) *gcLoop {
	cfg.setDefaults()
	return &gcLoop{
		rt: rt, cfg: cfg, pods: pods, clock: clk, log: log.With("component", "gc"), events: events,
		metrics: newGCMetrics(reg),
		wake:    make(chan struct{}, 1),
	}
}

// offer hands over the sync loop's latest relist and wakes a container GC
// pass; it never blocks. A nil gcLoop ignores it.
func (h *gcLoop) offer(at time.Time, pods map[types.UID]*podplan.PodStatus) {
	if h == nil || pods == nil {
		return
	}
	h.mu.Lock()
	h.latest = &snapshot{at: at, pods: pods}
	h.mu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

func (h *gcLoop) snapshot() *snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.latest
}

// run collects on every offer and rotates logs and collects images on
// their periods, until ctx is done. Log rotation has a goroutine of its
// own so that a slow removal never delays a rotation.
func (h *gcLoop) run(ctx context.Context) {
	// Both tickers exist before the first pass, so a pass's end marks
	// the point from which every period counts.
	images := h.clock.NewTicker(h.cfg.ImagePeriod)
	defer images.Stop()
	logs := h.clock.NewTicker(h.cfg.LogMonitorInterval)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer logs.Stop()
		h.runLogRotation(ctx, logs.C())
	}()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-h.wake:
			s := h.snapshot()
			if s == nil {
				continue
			}
			ready := h.collect(ctx, s)
			// The kubelet checks the image filesystem when it starts, not
			// one period later: a device that boots with a full disk must
			// not wait five minutes. Images are aged from when this berth
			// first saw them, so a fresh start removes nothing younger
			// than the minimum age.
			if ready && !h.imagesChecked {
				h.collectImages(ctx, s)
			}
		case <-images.C():
			if s := h.snapshot(); s != nil {
				h.collectImages(ctx, s)
			}
		}
	}
}

func (h *gcLoop) runLogRotation(ctx context.Context, tick <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			if s := h.snapshot(); s != nil {
				h.rotateLogs(ctx, s)
			}
		}
	}
}

// collect runs one container and sandbox GC pass over s, then, once all
// sources are ready, sweeps pod directories at start and every
// DirSweepPeriod. It reports whether the pass saw every source ready.
func (h *gcLoop) collect(ctx context.Context, s *snapshot) bool {
	began := h.clock.Now()
	ready := h.pods.sourcesReady()
	desired := map[types.UID]*v1.Pod{}
	initContainers := map[types.UID][]string{}
	for _, p := range h.pods.desired() {
		desired[p.UID] = p
		for _, c := range p.Spec.InitContainers {
			initContainers[p.UID] = append(initContainers[p.UID], c.Name)
		}
	}
	exists := func(uid types.UID) bool {
		_, ok := desired[uid]
		return ok || h.pods.hasWorker(uid)
	}
	res := h.rt.GarbageCollect(ctx, gc.Input{
		Pods: s.pods, Policy: h.cfg.Containers, AllSourcesReady: ready, Now: began,
		PodDeleted:     func(uid types.UID) bool { return !exists(uid) },
		InitContainers: initContainers,
	})
	h.report(res.Removed, res.Errors)
	if ready && (h.lastSweep.IsZero() || h.clock.Since(h.lastSweep) >= h.cfg.DirSweepPeriod) {
		removed, err := h.rt.SweepPodDirs(func(uid types.UID) bool {
			_, running := s.pods[uid]
			return running || exists(uid)
		})
		var errs []error
		if err != nil {
			errs = append(errs, err)
		} else {
			h.lastSweep = began
		}
		h.report(removed, errs)
	}
	if len(res.Removed) > 0 || len(res.Errors) > 0 {
		h.metrics.duration.Observe(h.clock.Since(began).Seconds())
	}
	return ready
}

// report counts removals, logs each, and records one event per pod,
// container and reason on pods that still exist, so `berth describe`
// shows what was collected. A repeat of the same message bumps the
// event's count instead of taking a slot of the pod's event ring.
func (h *gcLoop) report(removed []gc.Removal, errs []error) {
	type group struct {
		uid            types.UID
		pod, namespace string
		kind, what     string
		reason         string
	}
	counts := map[group]int{}
	for _, r := range removed {
		h.metrics.removed.WithLabelValues(r.Kind).Inc()
		// A pod that exists gets an event, logged once however often it
		// repeats (a crash loop for years); what is left of a deleted pod
		// is logged as it goes.
		level := slog.LevelInfo
		if r.PodExists {
			level = slog.LevelDebug
			counts[group{r.UID, r.Pod, r.Namespace, r.Kind, r.Container, r.Reason}]++
		}
		h.log.Log(context.Background(), level, "garbage collected", "kind", r.Kind, "pod", r.Pod, "namespace", r.Namespace, "uid", r.UID,
			"container", r.Container, "id", r.ID, "reason", r.Reason)
	}
	groups := make([]group, 0, len(counts))
	for g := range counts {
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b group) int {
		return cmp.Or(cmp.Compare(a.uid, b.uid), cmp.Compare(a.kind, b.kind), cmp.Compare(a.what, b.what), cmp.Compare(a.reason, b.reason))
	})
	for _, g := range groups {
		n := counts[g]
		var msg string
		switch g.kind {
		case gc.KindContainer:
			msg = fmt.Sprintf("Removed %d dead %s of container %s (%s)", n, plural(n, "run"), g.what, g.reason)
		default:
			msg = fmt.Sprintf("Removed %d %s (%s)", n, plural(n, "old sandbox"), g.reason)
		}
		h.events.Event(g.uid, g.pod, g.namespace, kuberuntime.EventNormal, "ContainerGC", msg)
	}
	for _, err := range errs {
		h.metrics.errors.Inc()
		h.log.Warn("garbage collection", "err", err)
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	if word[len(word)-1] == 'x' {
		return word + "es"
	}
	return word + "s"
}

// rotateLogs checks the log files of the running containers of s.
func (h *gcLoop) rotateLogs(ctx context.Context, s *snapshot) {
	var ids []string
	for _, p := range s.pods {
		for _, c := range p.Containers {
			if c.State == podplan.ContainerStateRunning {
				ids = append(ids, c.ID)
			}
		}
	}
	slices.Sort(ids)
	res := h.rt.RotateLogs(ctx, ids, h.cfg.Logs)
	h.metrics.rotations.Add(float64(len(res.Rotated)))
	for _, path := range res.Rotated {
		h.log.Debug("rotated container log", "path", path)
	}
	if ctx.Err() != nil {
		return // stopping: a rotation cut short is retried after restart
	}
	for _, err := range res.Errors {
		h.metrics.rotationErrors.Inc()
		h.log.Warn("container log rotation", "err", err)
	}
}

// collectImages runs one image GC pass, with s telling which images are in
// use.
func (h *gcLoop) collectImages(ctx context.Context, s *snapshot) {
	h.imagesChecked = true
	var keep []string
	if h.pods.keepImages != nil {
		keep = h.pods.keepImages()
	}
	res := h.rt.ImageGarbageCollect(ctx, h.cfg.Images, s.pods, keep)
	if res.UsagePercent >= 0 {
		h.metrics.imageFsUsage.Set(float64(res.UsagePercent) / 100)
		h.metrics.imageFsUsagePercent.Set(float64(res.UsagePercent))
	}
	for _, img := range res.Removed {
		h.metrics.imagesRemoved.Inc()
		h.metrics.imageBytesFreed.Add(float64(img.Size))
		h.log.Info("image garbage collected", "image", img.ID, "tags", img.Tags, "size", img.Size, "usagePercent", res.UsagePercent)
	}
	for _, err := range res.Errors {
		h.metrics.errors.Inc()
		h.log.Warn("image garbage collection", "err", err)
	}
}

// gcMetrics are the GC loop's Prometheus series.
type gcMetrics struct {
	removed         *prometheus.CounterVec
	errors          prometheus.Counter
	duration        prometheus.Histogram
	rotations       prometheus.Counter
	rotationErrors  prometheus.Counter
	imagesRemoved   prometheus.Counter
	imageBytesFreed prometheus.Counter
	imageFsUsage    prometheus.Gauge
	// imageFsUsagePercent is the gauge imageFsUsage replaced, kept one
	// release for the dashboards and alerts that use it.
	imageFsUsagePercent prometheus.Gauge
}

func newGCMetrics(reg prometheus.Registerer) *gcMetrics {
	m := &gcMetrics{
		removed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_container_gc_removed_total", Help: "Objects removed by garbage collection, by kind (container, sandbox, pod_log_dir, pod_dir).",
		}, []string{"kind"}),
		errors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_gc_errors_total", Help: "Removals by container, sandbox, directory or image garbage collection that failed (retried on the next pass).",
		}),
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "berth_container_gc_duration_seconds", Help: "Duration of container GC passes that removed something.", Buckets: latencyBuckets,
		}),
		rotations: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_log_rotations_total", Help: "Container log files rotated.",
		}),
		rotationErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_log_rotation_errors_total", Help: "Container log rotations that failed (retried on the next check).",
		}),
		imagesRemoved: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_image_gc_removed_total", Help: "Images removed by image garbage collection.",
		}),
		imageBytesFreed: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "berth_image_gc_freed_bytes_total", Help: "Bytes of images removed by image garbage collection.",
		}),
		imageFsUsage: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_image_fs_usage_ratio", Help: "Use of the image filesystem at the last image GC check, from 0 to 1 (the whole percent image GC compares with its thresholds, over 100).",
		}),
		imageFsUsagePercent: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_image_fs_usage_percent", Help: "Deprecated: use berth_image_fs_usage_ratio. Use of the image filesystem at the last image GC check, in percent.",
		}),
	}
	for _, kind := range []string{gc.KindContainer, gc.KindSandbox, gc.KindPodLogDir, gc.KindPodDir} {
		m.removed.WithLabelValues(kind)
	}
	reg.MustRegister(m.removed, m.errors, m.duration, m.rotations, m.rotationErrors, m.imagesRemoved, m.imageBytesFreed, m.imageFsUsage, m.imageFsUsagePercent)
	return m
}
