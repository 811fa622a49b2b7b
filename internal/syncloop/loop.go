package syncloop

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/gc"
	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/mirror"
	"github.com/berth-agent/berth/internal/nodeshutdown"
	"github.com/berth-agent/berth/internal/nodestatus"
	"github.com/berth-agent/berth/internal/podevents"
	"github.com/berth-agent/berth/internal/podplan"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podstatus"
	"github.com/berth-agent/berth/internal/podworkers"
	"github.com/berth-agent/berth/internal/prober"
	"github.com/berth-agent/berth/internal/rollback"
	"github.com/berth-agent/berth/internal/statusreport"
	"github.com/berth-agent/berth/internal/store"
)

// Config is the sync loop's share of berth's settings.
type Config struct {
	// NodeName is the node's name, shown as spec.nodeName of pods berth
	// rejected before their manifest could be defaulted.
	NodeName string
	// HostIP is the node IP shown as status.hostIP and as the IP of
	// host-network pods.
	HostIP string
	// MaxPods caps the pods berth runs; more are rejected (kubelet: 110).
	MaxPods int
	// MaxParallelPodStarts bounds the pods being started at once (sandbox
	// and containers up to running); the limit adapts below it to the
	// runtime's start latency (podworkers). 0 is
	// DefaultMaxParallelPodStarts.
	MaxParallelPodStarts int
	// SyncFrequency is the periodic resync of every pod (kubelet: 1m).
	SyncFrequency time.Duration
	// RelistPeriod is how often the runtime is relisted for out-of-band
	// changes (kubelet's PLEG: 1s).
	RelistPeriod time.Duration
	// EventedRelistPeriod is the relist period while the runtime's
	// container event stream is up (a safety net for lost events; the
	// kubelet's Evented PLEG: 5m); negative never subscribes.
	EventedRelistPeriod time.Duration
	// HousekeepingPeriod is how often orphans are looked for and the
	// sd_notify status refreshed (kubelet: 2s).
	HousekeepingPeriod time.Duration
	// Events is set by New; tests of the agent alone may leave it nil
	// for a log of its own.
	Events *podevents.Log
	// Metrics is where the agent registers its series; nil keeps them
	// private.
	Metrics prometheus.Registerer
	// GC configures the garbage collection passes (gcloop.go); nil runs
	// none.
	GC *GCConfig
	// Rollback configures the automatic rollback of a bad edit
	// (package rollback); the zero value rolls nothing back.
	Rollback rollback.Config
	// Shutdown configures graceful node shutdown (package nodeshutdown); nil or a
	// zero grace period leaves it off.
	Shutdown *nodeshutdown.Config
	// Status configures the status report PUT to --status-url
	// (package statusreport); nil sends none. Its Clock, Logger and Metrics
	// are the agent's.
	Status *statusreport.Config
	// Node registers the Node and keeps its status and Lease (package
	// nodestatus); Mirror keeps the mirror pods (package mirror). Both
	// are nil unless --kubeconfig is set; their Clock, Logger and Metrics
	// are the agent's.
	Node   *nodestatus.Config
	Mirror *mirror.Config
	// Version is berth's version, for the status report.
	Version string
	// OnReady, when set, is called from the agent's goroutine each time
	// berth becomes ready (checkReady); it must not block.
	OnReady func()
	Clock   clock.WithTickerAndDelayedExecution
	Logger  *slog.Logger
}

func (c *Config) setDefaults() {
	if c.MaxPods == 0 {
		c.MaxPods = 110
	}
	if c.MaxParallelPodStarts == 0 {
		c.MaxParallelPodStarts = podworkers.DefaultMaxParallelPodStarts()
	}
	if c.SyncFrequency == 0 {
		c.SyncFrequency = time.Minute
	}
	if c.RelistPeriod == 0 {
		c.RelistPeriod = time.Second
	}
	if c.EventedRelistPeriod == 0 {
		c.EventedRelistPeriod = 30 * time.Second
	}
	if c.HousekeepingPeriod == 0 {
		c.HousekeepingPeriod = 2 * time.Second
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Events == nil {
		c.Events = podevents.New(c.Clock, c.Logger)
	}
	if c.Metrics == nil {
		c.Metrics = prometheus.NewRegistry()
	}
}

// Loop runs the sync loop: it takes the merge store's updates, the PLEG's
// relists and its tickers, and dispatches work to the pod workers. It never
// calls the runtime itself, so a slow runtime never stalls it.
type Loop struct {
	cfg   Config
	log   *slog.Logger
	store *store.Store
	rt    podworkers.Runtime
	// status is the pods' statuses: the pod workers write them, the sync
	// loop only those of pods it holds back before a lane exists.
	status  *podstatus.Store
	health  *health
	notify  *notifier
	events  *podevents.Log
	pleg    *pleg
	metrics *metrics
	gc      *gcLoop // nil without Config.GC
	// rollback watches new versions and decides rollbacks, which the sync
	// loop carries out.
	rollback *rollback.Tracker
	// reporter PUTs the status report; nil without Config.Status.
	reporter *statusreport.Reporter
	// node and mirror join berth to a cluster; nil without Config.Node
	// and Config.Mirror.
	node   *nodestatus.Controller
	mirror *mirror.Mirrorer
	// workers runs the pods' lanes and their probes.
	workers *podworkers.Workers
	// changed fires when what Pods shows may have changed: a status in
	// the status store or a merge of the store (its problems). The
	// goroutine of forwardChanges fires it, beginning with the stores'
	// channels taken when the loop was built (firstChanges), so a change
	// before Run is not lost.
	changed      podstatus.Signal
	firstChanges [2]<-chan struct{}

	// Owned by the sync loop goroutine.
	rejected map[types.UID]bool // pods refused admission (max-pods)
	// warned holds, per pod version, the warnings recorded as its events.
	warned     map[types.UID]map[podspec.Problem]bool
	lastRelist relist
	// lastRelistAt is when the previous relist began, failed or not.
	lastRelistAt time.Time
	relisted     bool // a relist has succeeded since start
}

// New builds the sync loop over the merge store and the runtime side, each part
// passed explicitly so that none can be missing: events is the log the
// runtime manager records into (the kuberuntime.Options.Recorder it was built
// with), rt the runtime manager, which each sync hands the probes'
// verdicts; exec runs the exec probes (a handlers.Execer over the same
// runtime in berth); collector runs the garbage collection passes cfg.GC
// configures (a gc.Collector over the same runtime manager).
func New(cfg Config, store *store.Store, events *podevents.Log, rt *kuberuntime.Manager, exec prober.Execer, collector *gc.Collector) *Loop {
	cfg.Events = events
	a := newAgent(cfg, store, rt, exec)
	if cfg.GC != nil {
		a.gc = newGCLoop(collector, *cfg.GC, gcPods{sourcesReady: store.SourcesReady, desired: a.desiredPods, hasWorker: a.workers.Known, keepImages: a.keptImages},
			a.cfg.Clock, a.log, a.events, a.cfg.Metrics)
	}
	return a
}

// newAgent is New without the runtime manager's parts, for tests that
// stand in for the runtime. Every part is built here, before the sync loop
// runs, in the order they depend on each other.
func newAgent(cfg Config, store *store.Store, rt podworkers.Runtime, exec prober.Execer) *Loop {
	cfg.setDefaults()
	a := &Loop{
		cfg:      cfg,
		log:      cfg.Logger,
		store:    store,
		rt:       rt,
		status:   podstatus.NewStore(),
		health:   newHealth(cfg.Clock, 10*cfg.HousekeepingPeriod+cfg.RelistPeriod*10),
		notify:   newNotifier(cfg.Logger),
		events:   cfg.Events,
		pleg:     newPLEG(rt, cfg.Clock, cfg.RelistPeriod),
		rejected: map[types.UID]bool{},
		warned:   map[types.UID]map[podspec.Problem]bool{},
	}
	a.firstChanges = [2]<-chan struct{}{a.status.Changed(), store.Changed()}
	if src, ok := rt.(runtimeEvents); ok && cfg.EventedRelistPeriod > 0 {
		a.pleg.watchEvents(src, cfg.Clock, cfg.Logger, cfg.EventedRelistPeriod)
	}
	a.rollback = rollback.New(cfg.Rollback, cfg.NodeName, cfg.Clock, cfg.Logger, cfg.Events, cfg.Metrics)
	a.workers = podworkers.New(podworkers.Options{
		Runtime: rt, Status: a.status, HostIP: cfg.HostIP, MaxParallelStarts: cfg.MaxParallelPodStarts,
		Exec: exec, Recorder: cfg.Events, OnTerminated: cfg.Events.Forget, OnStatus: a.rollback.Observe,
		Metrics: cfg.Metrics, Clock: cfg.Clock, Logger: cfg.Logger,
	})
	a.metrics = newMetrics(cfg.Metrics, a)
	if cfg.Status != nil {
		sc := *cfg.Status
		sc.Clock, sc.Logger, sc.Metrics = cfg.Clock, cfg.Logger, cfg.Metrics
		a.reporter = statusreport.New(sc, a.statusReport)
	}
	if cfg.Node != nil {
		nc := *cfg.Node
		nc.Clock, nc.Logger, nc.Metrics = cfg.Clock, cfg.Logger, cfg.Metrics
		a.node = nodestatus.New(nc, a.nodeSnapshot)
	}
	if cfg.Mirror != nil {
		mc := *cfg.Mirror
		mc.Clock, mc.Logger, mc.Metrics, mc.Event = cfg.Clock, cfg.Logger, cfg.Metrics, a.mirrorEvent
		a.mirror = mirror.New(mc, a.mirrorPods)
	}
	return a
}

// Healthy returns nil while the sync loop turns and the runtime answers.
func (a *Loop) Healthy() error { return a.health.Healthy() }

// Ready returns nil once every source delivered and every desired pod was
// handed to its worker.
func (a *Loop) Ready() error { return a.health.Ready() }

// maxHeldUpdates bounds how many updates in a row the sync loop hands over
// while it holds pod starts, so a flood of updates cannot starve them.
const maxHeldUpdates = 64

// Run turns the sync loop until ctx is done. Stopping leaves every pod
// running: berth's own restart adopts them.
func (a *Loop) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	relists := make(chan relist)
	helpers := a.startHelpers(ctx, relists)
	resync := a.cfg.Clock.NewTicker(a.cfg.SyncFrequency)
	defer resync.Stop()
	housekeeping := a.cfg.Clock.NewTicker(a.cfg.HousekeepingPeriod)
	defer housekeeping.Stop()

	// Updates wait for the first relist, so pods already running (adoption)
	// and full names already held are known before anything starts.
	var updates <-chan store.PodUpdate
	held := 0 // updates handed over since starts were last released
	for {
		a.health.loopTurned()
		var trigger string
		var began time.Time
		select {
		case <-ctx.Done():
			a.stop(cancel, helpers)
			return nil
		case u := <-updates:
			trigger, began = "update", a.cfg.Clock.Now()
			held = a.handOver(u, updates, held)
		case r := <-relists:
			trigger, began = "relist", a.cfg.Clock.Now()
			a.handleRelist(r)
			if a.relisted && updates == nil {
				updates = a.store.Updates()
			}
		case <-a.rollback.Due():
			trigger, began = "rollback", a.cfg.Clock.Now()
			a.applyRollbacks()
		case <-resync.C():
			trigger, began = "resync", a.cfg.Clock.Now()
			a.workers.SyncAll()
		case <-housekeeping.C():
			trigger, began = "housekeeping", a.cfg.Clock.Now()
			a.housekeeping()
		case <-a.status.Phases():
			// systemctl status follows a pod's phase within a loop turn,
			// not a housekeeping period later: just after a restart,
			// adopted pods would show as pending for up to 2 s.
			trigger, began = "status", a.cfg.Clock.Now()
			a.notify.status(a.summary())
		}
		a.checkReady(updates)
		a.metrics.loopIterations.WithLabelValues(trigger).Inc()
		a.metrics.loopDuration.Observe(a.cfg.Clock.Since(began).Seconds())
	}
}

// startHelpers starts the sync loop's helpers, each until ctx ends: the
// PLEG (relisting into relists), and, when configured, the garbage
// collection, the node shutdown watch, the status report, and the Node and
// mirror pods in a cluster.
func (a *Loop) startHelpers(ctx context.Context, relists chan<- relist) *sync.WaitGroup {
	var wg sync.WaitGroup
	wg.Go(func() { a.pleg.run(ctx, relists) })
	wg.Go(func() { a.forwardChanges(ctx) })
	wg.Go(func() { a.events.Run(ctx) })
	if a.gc != nil {
		wg.Go(func() { a.gc.run(ctx) })
	}
	if s := a.cfg.Shutdown; s != nil && s.GracePeriod > 0 {
		sm := nodeshutdown.New(*s, a.workers, a.cfg.Clock, a.log)
		wg.Go(func() { sm.Run(ctx) })
	}
	if a.reporter != nil {
		wg.Go(func() { a.reporter.Run(ctx) })
	}
	if a.node != nil {
		wg.Go(func() { a.node.Run(ctx) })
	}
	if a.mirror != nil {
		wg.Go(func() { a.mirror.Run(ctx) })
	}
	return &wg
}

// forwardChanges fires Changed whenever the status store or the merge
// store changed, until ctx ends. It takes the stores' next channels
// before it fires: a change after that closes them, and one before it is
// seen by every watcher, which reads the pods after the fire.
func (a *Loop) forwardChanges(ctx context.Context) {
	status, merged := a.firstChanges[0], a.firstChanges[1]
	for {
		select {
		case <-ctx.Done():
			return
		case <-status:
		case <-merged:
		}
		status, merged = a.status.Changed(), a.store.Changed()
		a.changed.Fire()
	}
}

// AllEvents returns every pod's recent events, oldest first.
func (a *Loop) AllEvents() []podevents.Record { return a.events.All() }

// EventsChanged returns a channel closed at the next event recorded.
func (a *Loop) EventsChanged() <-chan struct{} { return a.events.Changed() }

// Changed returns a channel closed at the next change of what Pods shows:
// take it before calling Pods, then wait on it.
func (a *Loop) Changed() <-chan struct{} { return a.changed.C() }

// stop ends the sync loop: the helpers, the lanes and the probes; the pods
// are left running.
func (a *Loop) stop(cancel context.CancelFunc, helpers *sync.WaitGroup) {
	a.notify.stopping()
	a.log.Info("sync loop stopping; pods are left running")
	cancel()
	a.workers.Stop()
	helpers.Wait()
}

// handOver hands update u to the workers. Starts wait until every update
// queued now in updates is handed over (at boot, all the manifests read),
// so they go in priority order, not in the order the lanes happen to run;
// a flood of updates holds them for maxHeldUpdates at most. held counts
// the updates handed over since starts were last released; handOver
// returns the new count.
func (a *Loop) handOver(u store.PodUpdate, updates <-chan store.PodUpdate, held int) int {
	a.workers.HoldStarts()
	a.handleUpdate(u)
	if held++; len(updates) == 0 || held >= maxHeldUpdates {
		a.workers.ReleaseStarts()
		return 0
	}
	return held
}

// handleUpdate dispatches one merge-store update to the workers.
func (a *Loop) handleUpdate(u store.PodUpdate) {
	defer a.warnPods()
	for _, pod := range u.Pods {
		if u.Op != store.OpRemove {
			// While a rollback of this version is in force, its last
			// Ready version runs in its place.
			pod = a.rollback.Admit(pod)
		}
		log := a.log.With("op", u.Op.String(), "source", u.Source, "pod", pod.Name, "namespace", pod.Namespace, "uid", pod.UID)
		switch u.Op {
		case store.OpAdd:
			a.add(pod, log)
		case store.OpUpdate, store.OpReconcile:
			if a.rejected[pod.UID] {
				continue
			}
			log.Info("pod updated")
			a.workers.Update(pod)
		case store.OpRemove:
			delete(a.warned, pod.UID)
			if a.rejected[pod.UID] {
				delete(a.rejected, pod.UID)
				a.status.Delete(pod.UID)
				continue
			}
			a.retire(pod, log)
			a.removeRollback(pod)
		}
	}
}

// retire stops and removes pod, which no source serves any more. When a
// source serves a new version of its full name (an edit), it keeps
// running until that version has pulled its images (podworkers.Replace);
// otherwise it stops now.
func (a *Loop) retire(pod *v1.Pod, log *slog.Logger) {
	if a.replaced(pod) {
		log.Info("pod replaced by a new version; it keeps running until the new version has its images")
		a.workers.Replace(pod.UID)
		return
	}
	log.Info("pod removed from its source; stopping it")
	a.workers.Remove(pod.UID, nil)
}

// replaced reports whether the sources serve a version of pod's full name
// under another UID that berth admitted (after rollbacks).
func (a *Loop) replaced(pod *v1.Pod) bool { return a.servesName(pod.Name, pod.Namespace, pod.UID) }

// servesName reports whether the sources serve the full name
// name_namespace under a UID other than uid that berth admitted (after
// rollbacks).
func (a *Loop) servesName(name, namespace string, uid types.UID) bool {
	for _, p := range a.desiredPods() {
		if p.UID != uid && p.Name == name && p.Namespace == namespace && !a.rejected[p.UID] {
			return true
		}
	}
	return false
}

// warnPods records each of the store's warnings (a field berth ignores, a
// host port an earlier pod claims too) as a Warning event of the pod it
// names, once per pod version, so berth describe and the log show why a
// pod may not work as its manifest says. The pods run all the same. It
// looks at every pod after each update: a clash can come to a pod that
// did not change, when a manifest sorted before its own claims the port.
func (a *Loop) warnPods() {
	warnings := a.store.Warnings()
	if len(warnings) == 0 {
		return
	}
	for _, pod := range a.store.Pods() {
		a.warnPod(pod, warnings)
	}
}

// warnPod records the warnings naming pod, from its manifest, that its
// version has not had yet.
func (a *Loop) warnPod(pod *v1.Pod, warnings []podspec.Problem) {
	for _, w := range warnings {
		if w.Name != pod.Name || w.Namespace != pod.Namespace || w.Origin != pod.Annotations[podspec.AnnotationOrigin] || a.warned[pod.UID][w] {
			continue
		}
		if a.warned[pod.UID] == nil {
			a.warned[pod.UID] = map[podspec.Problem]bool{}
		}
		a.warned[pod.UID][w] = true
		a.events.Event(pod.UID, pod.Name, pod.Namespace, kuberuntime.EventWarning, w.Reason, w.Error())
	}
}

// add starts the lane of a new pod, unless max-pods is reached.
func (a *Loop) add(pod *v1.Pod, log *slog.Logger) {
	if a.workers.Known(pod.UID) {
		a.workers.Update(pod)
		return
	}
	if _, active := a.workers.Count(); active >= a.cfg.MaxPods {
		a.reject(pod, active)
		return
	}
	log.Info("pod added")
	a.workers.Add(pod, a.lastRelist.pods[pod.UID], a.lastRelist.at)
}

// reject refuses a pod beyond max-pods, as the kubelet's admission does: it
// is shown Failed with reason OutOfpods and never started.
func (a *Loop) reject(pod *v1.Pod, used int) {
	a.rejected[pod.UID] = true
	msg := fmt.Sprintf("Node didn't have enough resource: pods, requested: 1, used: %d, capacity: %d", used, a.cfg.MaxPods)
	st := podstatus.Pending(pod, "OutOfpods", msg, a.cfg.Clock.Now())
	st.Phase = v1.PodFailed
	a.status.Set(pod, st)
	a.events.Event(pod.UID, pod.Name, pod.Namespace, kuberuntime.EventWarning, "OutOfpods", msg)
}

// handleRelist takes one PLEG turn: runtime health, start-up holds, and the
// changed pods to their workers (or to orphan cleanup).
func (a *Loop) handleRelist(r relist) {
	a.metrics.relistDuration.Observe(r.duration.Seconds())
	if !a.lastRelistAt.IsZero() {
		a.metrics.relistInterval.Observe(r.at.Sub(a.lastRelistAt).Seconds())
	}
	a.lastRelistAt = r.at
	if changed := a.health.setRuntime(r.err); changed {
		if r.err != nil {
			a.log.Error("container runtime unreachable; pods keep running, berth retries every relist", "err", r.err)
		} else if a.relisted {
			a.log.Info("container runtime is back; resyncing every pod")
			a.workers.SyncAll()
		}
	}
	if r.err != nil {
		return
	}
	if !a.relisted {
		a.relisted = true
		a.workers.Hold(r.pods)
	}
	a.lastRelist = r
	if len(r.changed) > 0 {
		a.gc.offer(r.at, r.pods) // a container that just died may exceed the GC policy
	}
	for _, uid := range r.changed {
		st := r.pods[uid]
		if a.workers.Observe(uid, st, r.at) || st == nil {
			continue
		}
		a.cleanupOrphan(st, r.at)
	}
}

// housekeeping finds orphans that did not change lately and refreshes what
// berth tells systemd.
func (a *Loop) housekeeping() {
	if a.relisted {
		for _, st := range a.lastRelist.pods {
			if !a.workers.Known(st.UID) {
				a.cleanupOrphan(st, a.lastRelist.at)
			}
		}
		a.workers.ForgetFinished(a.lastRelist.at)
		a.gc.offer(a.lastRelist.at, a.lastRelist.pods)
	}
	a.events.GC()
	a.rt.ForgetStaleBackoffs()
	a.rollback.Tick(a.workers.Known)
	a.forgetRemovedTargets()
	// The watchdog proves the sync loop turns (this runs inside it); a
	// runtime outage is reported by /healthz and STATUS=, but restarting
	// berth would not bring containerd back.
	a.notify.watchdog()
	a.notify.status(a.summary())
}

// cleanupOrphan stops and removes a berth-owned runtime pod that no source
// asks for, but only once every source has delivered: before that, an
// unknown pod may simply not have been read yet. seen is when the runtime
// was read: a pod removed by its lane since then is a stale sighting.
func (a *Loop) cleanupOrphan(st *podplan.PodStatus, seen time.Time) {
	if !a.store.SourcesReady() || a.desired(st.UID) || a.rejected[st.UID] || a.workers.FinishedSince(st.UID, seen) {
		return
	}
	log := a.log.With("pod", st.Name, "namespace", st.Namespace, "uid", st.UID)
	replaced := a.servesName(st.Name, st.Namespace, st.UID)
	if replaced {
		log.Info("orphaned pod replaced by a new version; it keeps running until the new version has its images")
	} else {
		log.Info("stopping and removing orphaned pod")
	}
	a.workers.TerminateOrphan(st, replaced)
}

func (a *Loop) desired(uid types.UID) bool {
	for _, p := range a.desiredPods() {
		if p.UID == uid {
			return true
		}
	}
	return false
}

// checkReady marks berth ready once every source has delivered, the runtime
// was read, and every desired pod has been handed to a worker.
func (a *Loop) checkReady(updates <-chan store.PodUpdate) {
	if a.health.Ready() == nil {
		return
	}
	switch {
	case !a.relisted:
		a.health.setPending("container runtime not read yet")
		return
	case !a.store.SourcesReady():
		a.health.setPending("waiting for every pod source to deliver")
		return
	case len(updates) > 0:
		return
	}
	for _, p := range a.desiredPods() {
		if !a.workers.Known(p.UID) && !a.rejected[p.UID] {
			return
		}
	}
	if a.health.setReady() {
		all, _ := a.workers.Count()
		a.log.Info("berth is ready", "pods", all)
		a.notify.ready()
		a.notify.status(a.summary())
		if a.cfg.OnReady != nil {
			a.cfg.OnReady()
		}
	}
}

// summary is the one-line STATUS= for systemd.
func (a *Loop) summary() string {
	var running, pending, failed int
	for _, p := range a.status.List() {
		switch p.Status.Phase {
		case v1.PodRunning, v1.PodSucceeded:
			running++
		case v1.PodFailed:
			failed++
		default:
			pending++
		}
	}
	s := fmt.Sprintf("%d pods running, %d pending, %d failed", running, pending, failed)
	if n := len(a.store.Problems()); n > 0 {
		s += fmt.Sprintf(", %d manifest problems", n)
	}
	if n := len(a.rollback.Problems()); n > 0 {
		s += fmt.Sprintf(", %d failed versions", n)
	}
	if err := a.health.Healthy(); err != nil {
		s += "; " + err.Error()
	}
	return s
}
