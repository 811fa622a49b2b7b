package podworkers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/podplan"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podstatus"
	"github.com/berth-agent/berth/internal/prober"
)

// workState is where a pod is in its life: syncing, then terminating, then
// terminated. It only moves forward.
type workState int

const (
	stateSyncing workState = iota
	stateTerminating
	stateTerminated
)

// podWorker is one pod UID's serialized lane. Only its goroutine calls the
// runtime for this UID; updates meanwhile replace each other (latest wins).
type podWorker struct {
	uid             types.UID
	name, namespace string
	fullName        string // name_namespace, the exclusivity key
	// priority and seq rank the pod's starts: higher spec.priority first,
	// then the order its lane was created in (the order berth saw it).
	priority int32
	seq      uint64
	// wake has room for one pending wake-up, so many updates between two
	// runs coalesce into one run that sees the latest state.
	wake chan struct{}

	// Guarded by Workers.mu.
	pod        *v1.Pod // latest desired pod; nil for an orphan
	observed   *podplan.PodStatus
	observedAt time.Time
	// observedOwn says observed is the lane's own read, not the PLEG's: on
	// a tie with lastActed only an own read is known to follow the action.
	observedOwn bool
	// observedRecv is when observed was handed to the lane.
	observedRecv time.Time
	// observedStale says two reads disagreed that cannot be ordered: the
	// next sync reads the runtime instead of using observed.
	observedStale bool
	state         workState
	terminate     bool   // termination requested
	remove        bool   // remove runtime objects once stopped
	grace         *int64 // grace period override for the kill
	started       bool   // passed the full-name gate
	startTime     time.Time
	readd         *v1.Pod // same UID added again while being removed
	timer         clock.Timer
	// holding says what of a terminating pod still runs, and why berth
	// could not stop it, while the lane keeps its full name; "" otherwise.
	holding string
	// replacing says the sources serve a new version of this started pod
	// (Replace): it keeps running until that version has its images
	// (prepull.go), and stops then; replaceSince is when it was asked.
	replacing    bool
	replaceSince time.Time
	// prePulled says this waiting pod made its images present while the
	// holder of its full name ran; prePullCancel ends a pre-pull in
	// flight (its removal), nil when none runs.
	prePulled     bool
	prePullCancel context.CancelFunc
	// active says a goroutine runs the lane's steps (run), or that the
	// lane ended: its last goroutine leaves it set, so a late wake-up (a
	// timer's) starts nothing.
	active bool

	// Owned by the lane's goroutine (run): one at a time.
	lastActed time.Time // when this worker last changed the runtime
	running   bool      // the pod has been seen Running since it started
	// looked says the lane has read the pod's runtime state once;
	// startup is then the pod start SLI's record (startup.go), nil for a
	// pod found on the runtime and once the start was recorded or the
	// pod ended before it.
	looked  bool
	startup *startup
	// teardownDelay is the back-off of the teardown retries of a pod that
	// is not terminated yet, or not removed yet.
	teardownDelay time.Duration
	// prePullDelay is the back-off of the retries of a failed pre-pull
	// that carried no pull back-off of its own (ErrImageNeverPull);
	// prePullRetryAt is when a failed pre-pull is tried again.
	prePullDelay   time.Duration
	prePullRetryAt time.Time
}

// Teardown retries of a pod that still holds its full name back off from
// teardownRetryInitial, doubling up to teardownRetryMax: a container whose
// start is in flight inside the runtime may take a while to settle, and a
// relist that sees it change wakes the lane earlier anyway.
const (
	teardownRetryInitial = time.Second
	teardownRetryMax     = 30 * time.Second
)

// backOffTeardown sets the delay before the next teardown retry: the
// first, or twice the last one, up to the maximum.
func (w *podWorker) backOffTeardown() {
	if w.teardownDelay == 0 {
		w.teardownDelay = teardownRetryInitial
	} else {
		w.teardownDelay = min(2*w.teardownDelay, teardownRetryMax)
	}
}

// Workers owns every pod's lane, the full-name gate, the start queue, the
// probes and the status store's writes. Work for different pods runs
// concurrently; work for one pod never.
type Workers struct {
	// ctx ends every lane; cancel is Stop's.
	ctx    context.Context
	cancel context.CancelFunc
	rt     Runtime
	clock  clock.WithTickerAndDelayedExecution
	status *podstatus.Store
	hostIP string
	log    *slog.Logger
	// retryAfterError is how soon a lane retries after a runtime error that
	// carried no back-off of its own.
	retryAfterError time.Duration
	metrics         *metrics
	// onTerminated is told about every lane that finished terminating
	// whose pod was not added back meanwhile (the sync loop forgets its
	// events); may be nil.
	onTerminated func(uid types.UID)
	// probes runs the pods' probes: each sync feeds it the pod's status and
	// reads readiness back; nil runs none.
	probes *prober.Manager
	// onStatus is told every status a sync built, with when the pod passed
	// the full-name gate, to judge new versions (the rollback tracker);
	// may be nil. It is called without mu held.
	onStatus func(pod *v1.Pod, st v1.PodStatus, start time.Time)
	// recorder takes the events of pulls before a stop (prepull.go); nil
	// drops them.
	recorder kuberuntime.Recorder

	mu      sync.Mutex // guards workers, gate, starts, soloWake, seen, finished and the guarded fields of each podWorker
	workers map[types.UID]*podWorker
	gate    *fullNameGate
	// starts bounds and orders the pods' starts (startqueue.go).
	starts *startQueue
	// soloWake wakes the start queue when a critical start stops keeping
	// the runtime to itself; nil when not armed.
	soloWake clock.Timer
	// seen numbers the lanes in the order they were created.
	seen uint64
	// finished records when each recently closed lane removed its pod.
	finished map[types.UID]time.Time
	wg       sync.WaitGroup
}

// Options are what the pod workers are built over.
type Options struct {
	// Runtime is the runtime manager the lanes call.
	Runtime Runtime
	// Status is the status store the lanes write each pod's status into.
	Status *podstatus.Store
	// HostIP is the node IP shown as status.hostIP.
	HostIP string
	// MaxParallelStarts bounds the pod starts in flight
	// (--max-parallel-pod-starts); 0 is DefaultMaxParallelPodStarts.
	MaxParallelStarts int
	// Exec runs the exec probes; Recorder records the probes' events and
	// those of pulls before a stop (prepull.go).
	Exec     prober.Execer
	Recorder kuberuntime.Recorder
	// OnTerminated and OnStatus: see the fields of Workers; either may
	// be nil.
	OnTerminated func(uid types.UID)
	OnStatus     func(pod *v1.Pod, st v1.PodStatus, start time.Time)
	// Metrics is where the lanes register their series; nil keeps them
	// private.
	Metrics prometheus.Registerer
	Clock   clock.WithTickerAndDelayedExecution
	Logger  *slog.Logger
}

// New builds the lanes' owner with the probes it feeds. Its lanes run
// until Stop.
func New(opts Options) *Workers {
	if opts.MaxParallelStarts == 0 {
		opts.MaxParallelStarts = DefaultMaxParallelPodStarts()
	}
	if opts.Metrics == nil {
		opts.Metrics = prometheus.NewRegistry()
	}
	m := newMetrics(opts.Metrics)
	m.startLimit.Set(float64(opts.MaxParallelStarts))
	return newWorkers(workerOptions{
		rt: opts.Runtime, clock: opts.Clock, status: opts.Status, hostIP: opts.HostIP, maxStarts: opts.MaxParallelStarts,
		log: opts.Logger, metrics: m, onTerminated: opts.OnTerminated, onStatus: opts.OnStatus, recorder: opts.Recorder,
		probes: &prober.Options{Exec: opts.Exec, Recorder: opts.Recorder, Metrics: opts.Metrics, Clock: opts.Clock, Logger: opts.Logger},
	})
}

// workerOptions are what the lanes' owner is built from, by New and by the
// tests of the lanes alone.
type workerOptions struct {
	rt     Runtime
	clock  clock.WithTickerAndDelayedExecution
	status *podstatus.Store
	hostIP string
	// maxStarts bounds the pod starts in flight (--max-parallel-pod-starts).
	maxStarts int
	log       *slog.Logger
	// metrics, onTerminated and onStatus are the Workers' own; each may be
	// nil.
	metrics      *metrics
	onTerminated func(uid types.UID)
	onStatus     func(pod *v1.Pod, st v1.PodStatus, start time.Time)
	// probes, when set, configures the pods' probes; their results wake
	// the pod's lane (its OnChange is the workers').
	probes *prober.Options
	// recorder takes the events of pulls before a stop; nil drops them.
	recorder kuberuntime.Recorder
}

// newWorkers builds the lanes' owner, with its prober when opts asks for
// one. Its lanes run until Stop.
func newWorkers(opts workerOptions) *Workers {
	ctx, cancel := context.WithCancel(context.Background())
	p := &Workers{
		ctx:             ctx,
		cancel:          cancel,
		rt:              opts.rt,
		clock:           opts.clock,
		status:          opts.status,
		hostIP:          opts.hostIP,
		log:             opts.log,
		retryAfterError: 2 * time.Second,
		metrics:         opts.metrics,
		onTerminated:    opts.onTerminated,
		onStatus:        opts.onStatus,
		recorder:        opts.recorder,
		workers:         map[types.UID]*podWorker{},
		gate:            newFullNameGate(),
		starts:          newStartQueue(opts.clock, newStartLimit(opts.maxStarts)),
		finished:        map[types.UID]time.Time{},
	}
	if opts.probes != nil {
		po := *opts.probes
		po.OnChange = p.Wake
		p.probes = prober.NewManager(po)
	}
	return p
}

// Probes is the prober the lanes feed, which the runtime manager consults
// as its podplan.ContainerHealth.
func (p *Workers) Probes() *prober.Manager { return p.probes }

// Stop ends every lane and the probes and waits for the lanes; the pods
// keep running.
func (p *Workers) Stop() {
	p.wait()
	if p.probes != nil {
		p.probes.Stop()
	}
}

// Update delivers the latest desired version of a pod (ADD, UPDATE or
// RECONCILE): it starts a lane for a new UID and wakes an existing one.
func (p *Workers) Update(pod *v1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.updateLocked(pod)
}

func (p *Workers) updateLocked(pod *v1.Pod) {
	w, ok := p.workers[pod.UID]
	if !ok {
		p.startWorkerLocked(pod.UID, pod.Name, pod.Namespace, pod)
		return
	}
	if w.terminate {
		if w.remove {
			w.readd = pod
		}
		return
	}
	// Served again (an edit reverted before its new version started):
	// it keeps running as it is.
	w.replacing = false
	w.pod = pod
	p.wakeLocked(w)
}

// Add starts the lane of a new pod, shown Pending from now on (not only
// once its first sync has finished). The last relist, at at, already says
// what the runtime holds of this UID (observed; nil: nothing): unless a
// lane of it finished since, the pod starts (or is adopted) from that
// observation, without a list of its own; otherwise its lane reads the
// runtime.
func (p *Workers) Add(pod *v1.Pod, observed *podplan.PodStatus, at time.Time) {
	if p.status.Get(pod.UID) == nil {
		p.status.Set(pod, podstatus.Pending(pod, "", "", p.clock.Now()))
	}
	if !p.FinishedSince(pod.UID, at) {
		p.addObserved(pod, observed, at)
		return
	}
	p.Update(pod)
}

// addObserved starts the lane of a new pod with what the runtime held of
// it when it was relisted at at (nil: nothing), so its first sync acts
// without listing the runtime again: two lists fewer for a new pod on the
// path from the manifest to the running container, and for each pod
// adopted or brought back after a restart. Only a lane of this UID acts
// on its objects, and none ran since (the caller checked), so the
// observation still holds but for what the runtime does on its own (a
// container that exits), which the next relist hands over as for any
// lane. A pod whose lane exists is updated.
func (p *Workers) addObserved(pod *v1.Pod, status *podplan.PodStatus, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.workers[pod.UID]; ok {
		p.updateLocked(pod)
		return
	}
	w := p.startWorkerLocked(pod.UID, pod.Name, pod.Namespace, pod)
	if status == nil {
		status = &podplan.PodStatus{UID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	w.observed, w.observedAt = status, at
}

// Remove asks the lane of uid to stop its pod and remove it from the
// runtime (REMOVE). A pod still waiting for its full name never starts.
func (p *Workers) Remove(uid types.UID, grace *int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.workers[uid]
	if !ok {
		return
	}
	p.removeLocked(w, grace)
	// A pending version removed with no other waiting (the manifest
	// deleted during the pre-pull): the version it would have replaced
	// stops now.
	if !w.started {
		p.releaseUnwaitedLocked(w.fullName)
	}
}

// removeLocked asks w's lane to stop and remove its pod, ending a
// pre-pull in flight and any wait for a successor's.
func (p *Workers) removeLocked(w *podWorker, grace *int64) {
	w.terminate, w.remove, w.grace, w.readd, w.replacing = true, true, grace, nil, false
	if w.prePullCancel != nil {
		w.prePullCancel()
	}
	p.releaseStartLocked(w, false)
	if grace == nil && w.pod != nil {
		grace = w.pod.Spec.TerminationGracePeriodSeconds
	}
	p.status.MarkDeleting(w.uid, p.clock.Now(), grace)
	p.wakeLocked(w)
}

// TerminateOrphan starts a lane that stops and removes a berth-owned pod no
// source asks for. The caller has checked that every source is ready.
// replaced says a source serves another UID of its full name (berth
// restarted during an edit): the orphan then runs on as a replaced pod does
// (Replace) until that version has its images.
func (p *Workers) TerminateOrphan(status *podplan.PodStatus, replaced bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.workers[status.UID]; ok {
		return
	}
	w := p.startWorkerLocked(status.UID, status.Name, status.Namespace, nil)
	w.terminate, w.remove, w.started = true, true, true
	w.observed = status
	if _, ready := p.waitersLocked(w.fullName, w.uid); replaced && !ready {
		w.replacing, w.replaceSince = true, p.clock.Now()
		p.requeueLocked(w, replaceUnwaited)
	}
	// Until it is terminated, the orphan holds its full name like any pod:
	// a new UID of that name must not start beside it.
	p.gate.hold(w.fullName, w.uid)
}

// Observe hands the lane of uid a fresh runtime observation and wakes it.
// It reports whether such a lane exists.
func (p *Workers) Observe(uid types.UID, status *podplan.PodStatus, at time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.workers[uid]
	if !ok {
		return false
	}
	p.recordLocked(w, status, at, p.clock.Now(), false)
	p.wakeLocked(w)
	return true
}

// record keeps status, read by the lane's own goroutine at at, as the
// lane's observation: the next sync (a resync, a probe's wake-up) then
// needs no runtime call of its own while nothing changed, and the PLEG
// delivers a newer observation when something does.
func (p *Workers) record(w *podWorker, status *podplan.PodStatus, at time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.recordLocked(w, status, at, p.clock.Now(), true) {
		p.wakeLocked(w) // sync again, from a read of its own
	}
}

// recordLocked replaces the lane's observation only with a newer one: a
// relist that began before the worker's own read but arrives after it must
// not put back what the worker has since changed. On a tie (a fake or
// coarse clock) the worker's own read wins, since it was taken after
// whatever the worker did at that instant. at is when the read began, now
// when it is handed over.
//
// Which of two reads saw the runtime last is known only when one ended
// before the other began; when they may overlap and show different states,
// the one kept may be the older: a relist that began before the worker's
// read can end after a container exited, while the worker's read saw it
// running. Dropping the relist then would lose the exit for good (the next
// relists see no change and deliver nothing), so the observation is marked
// stale instead, and the next sync reads the runtime. recordLocked reports
// whether it marked it.
func (p *Workers) recordLocked(w *podWorker, status *podplan.PodStatus, at, now time.Time, own bool) bool {
	if w.observed != nil && !at.After(w.observedAt) && !(own && at.Equal(w.observedAt)) {
		// Rejected, but its read may have ended after the kept one's.
		if Fingerprint(status) != Fingerprint(w.observed) {
			w.observedStale = true
			return true
		}
		return false
	}
	// The observation replaced was handed over after this read began: its
	// read may have ended after this one.
	stale := w.observed != nil && w.observedRecv.After(at) && Fingerprint(status) != Fingerprint(w.observed)
	w.observed, w.observedAt, w.observedOwn, w.observedRecv = status, at, own, now
	w.observedStale = w.observedStale || stale
	return stale
}

// Wake wakes the lane of uid, if any: a probe result of its pod changed.
func (p *Workers) Wake(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.wakeUIDLocked(uid)
}

// SyncAll wakes every lane, for the periodic resync and after a runtime
// outage.
func (p *Workers) SyncAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.workers {
		p.wakeLocked(w)
	}
}

// Hold records each pod found in the runtime at start-up that is not
// terminated (Terminated) as the holder of its full name, so a new UID of
// that name waits for it.
func (p *Workers) Hold(pods map[types.UID]*podplan.PodStatus) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for uid, st := range pods {
		if done, _ := Terminated(st); !done {
			p.gate.hold(podspec.JoinFullName(st.Name, st.Namespace), uid)
		}
	}
}

// Known reports whether a lane exists for uid.
func (p *Workers) Known(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.workers[uid]
	return ok
}

// Count returns the number of lanes, and how many of them are not being
// terminated (the pods counted against max-pods).
func (p *Workers) Count() (all, active int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, w := range p.workers {
		if !w.terminate && !w.replacing {
			active++
		}
	}
	return len(p.workers), active
}

// wait ends the lanes: it cancels their context and blocks until every
// lane's goroutine has returned. Once it holds p.mu, wakeLocked sees the
// context done and starts no goroutine, so none is added to the group it
// waits for.
func (p *Workers) wait() {
	p.cancel()
	p.mu.Lock()
	for _, w := range p.workers {
		if w.timer != nil {
			w.timer.Stop()
		}
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Workers) startWorkerLocked(uid types.UID, name, namespace string, pod *v1.Pod) *podWorker {
	w := &podWorker{uid: uid, name: name, namespace: namespace, fullName: podspec.JoinFullName(name, namespace), pod: pod, wake: make(chan struct{}, 1)}
	p.seen++
	w.seq = p.seen
	if pod != nil {
		if pod.Spec.Priority != nil {
			w.priority = *pod.Spec.Priority
		}
		// A candidate for a start from now on, so it holds its rank
		// against pods of the same batch whose lanes run first.
		p.starts.add(uid, w.priority, w.seq)
		p.reportStartsLocked()
	}
	p.workers[uid] = w
	p.wakeLocked(w)
	return w
}

// wakeLocked makes w's lane step, starting its goroutine if none runs:
// an idle lane keeps none, which is most of them on a machine whose pods
// all run.
func (p *Workers) wakeLocked(w *podWorker) {
	if p.ctx.Err() != nil {
		return
	}
	select {
	case w.wake <- struct{}{}:
	default:
	}
	if !w.active {
		w.active = true
		p.wg.Add(1)
		go p.run(w)
	}
}

// requeue wakes w after d, replacing an earlier pending requeue so a lane
// has at most one timer.
func (p *Workers) requeue(w *podWorker, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requeueLocked(w, d)
}

func (p *Workers) requeueLocked(w *podWorker, d time.Duration) {
	if w.timer != nil {
		w.timer.Stop()
	}
	w.timer = p.clock.AfterFunc(d, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.wakeLocked(w)
	})
}

// run is the lane's goroutine: one step per wake-up, until no wake-up is
// pending (the next one starts a goroutine again), the pod is gone (active
// stays set) or the workers stop. One goroutine at most runs a lane: the
// next starts only after this one said under p.mu that it returns, so the
// fields the lane's goroutine owns pass from one to the next.
func (p *Workers) run(w *podWorker) {
	defer p.wg.Done()
	for {
		p.mu.Lock()
		pending := false
		select {
		case <-w.wake:
			pending = p.ctx.Err() == nil
		default:
		}
		if !pending {
			w.active = false
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
		if p.step(w) {
			return
		}
	}
}

// step does one unit of work for w and reports whether the lane is finished.
func (p *Workers) step(w *podWorker) bool {
	p.mu.Lock()
	if w.terminate && w.state == stateSyncing {
		w.state = stateTerminating
	}
	if w.replacing {
		p.checkReplacingLocked(w)
		if w.replacing && w.terminate {
			// An orphan whose successor still pulls: nothing to do yet.
			p.mu.Unlock()
			return false
		}
		if w.terminate && w.state == stateSyncing {
			w.state = stateTerminating
		}
	}
	// Every wake is sent under p.mu after the change it announces, so a
	// wake pending now is covered by what this step reads from here on.
	// Taking it later would repeat the step at once, ahead of the lane's
	// back-off: releaseReplacedLocked above wakes the lane it runs in.
	select {
	case <-w.wake:
	default:
	}
	state, pod, remove, grace := w.state, w.pod, w.remove, w.grace
	obs, obsAt, obsOwn := w.observed, w.observedAt, w.observedOwn
	if w.observedStale {
		obs, w.observedStale = nil, false // this sync reads the runtime
	}
	if state == stateSyncing && !w.started {
		if !p.gate.tryStart(w.fullName, w.uid) {
			// Not a candidate for a start while the name is taken; it
			// comes back with its rank when the gate lets it through.
			p.releaseStartLocked(w, false)
			holder, _ := p.gate.holder(w.fullName)
			if !w.prePulled {
				if p.clock.Now().Before(w.prePullRetryAt) {
					// A failed pre-pull waits for its retry: its status
					// says why, and another try now would only find the
					// image's back-off.
					p.mu.Unlock()
					return false
				}
				ctx, cancel := context.WithCancel(p.ctx)
				w.prePullCancel = cancel
				p.mu.Unlock()
				p.prePull(ctx, w, pod, holder)
				cancel()
				return false
			}
			msg := fmt.Sprintf("waiting for pod %s (uid %s) of the same name to terminate", w.fullName, holder)
			if hw, ok := p.workers[holder]; ok && hw.holding != "" {
				msg += ": " + hw.holding
			}
			p.mu.Unlock()
			p.status.Set(pod, podstatus.Pending(pod, "WaitingForPreviousPod", msg, p.clock.Now()))
			return false
		}
		w.started = true
		w.startTime = p.clock.Now()
		p.starts.add(w.uid, w.priority, w.seq)
		p.reportStartsLocked()
	}
	startTime := w.startTime
	p.mu.Unlock()

	began := p.clock.Now()
	switch state {
	case stateSyncing:
		p.sync(w, pod, obs, obsAt, obsOwn, startTime)
		p.observeStep("sync", began)
		return false
	case stateTerminating:
		done := p.terminate(w, pod, grace, remove, startTime, obs, obsAt, obsOwn)
		p.observeStep("terminate", began)
		return done
	default:
		if !remove {
			return false
		}
		done := p.finish(w, nil)
		p.observeStep("remove", began)
		return done
	}
}

// warnUnlessUnreachable logs a worker's failed runtime call at Warn, or at
// Debug when it only says the runtime is unreachable: the sync loop logs an
// outage once when it begins and once when it ends, and every worker
// retrying every few seconds must not repeat it.
func warnUnlessUnreachable(log *slog.Logger, msg string, err error) {
	if status.Code(err) == codes.Unavailable {
		log.Debug(msg+" (runtime unreachable)", "err", err)
		return
	}
	log.Warn(msg, "err", err)
}

func (p *Workers) observeStep(op string, began time.Time) {
	if p.metrics != nil {
		p.metrics.workerDuration.WithLabelValues(op).Observe(p.clock.Since(began).Seconds())
	}
}

// sync brings a desired pod to its spec and records its status.
// obs is the lane's latest observation, taken at obsAt, by the lane itself
// when obsOwn; it is used instead of a runtime call when it is known to
// follow the worker's last change of the runtime.
func (p *Workers) sync(w *podWorker, pod *v1.Pod, obs *podplan.PodStatus, obsAt time.Time, obsOwn bool, startTime time.Time) {
	log := p.log.With("pod", pod.Name, "namespace", pod.Namespace, "uid", pod.UID)
	status, ok := p.currentStatus(w, obs, obsAt, obsOwn, log)
	if !ok {
		return
	}
	if !w.looked {
		w.looked = true
		w.startup = newStartup(status)
	}
	// A pod without a ready sandbox is started under the start limit;
	// every other sync (restarts of single containers, kills) runs at once.
	// The plan that decided it is the one the sync carries out.
	actions := p.rt.PlanPod(pod, status, p.health())
	start := actions.CreateSandbox
	if !p.takeStartSlot(w, pod, status, start) {
		return
	}
	res := p.rt.SyncPod(p.ctx, pod, status, &actions, kuberuntime.SyncOptions{BeforePostStart: func() { p.StartDone(w.uid) }})
	if w.startup != nil {
		w.startup.pulling += res.Pulling()
	}
	if start {
		p.mu.Lock()
		p.releaseStartLocked(w, res.Error() == nil)
		p.mu.Unlock()
	}
	if len(res.Results) > 0 {
		status = p.reread(w, status)
	}
	logSyncError(p.ctx, log, res)
	st := p.syncedStatus(pod, status, res, startTime)
	p.publish(w, pod, st, res, startTime)
	p.scheduleNext(w, st, res, log)
}

// health is the probes' verdicts for a plan; nil without probes.
func (p *Workers) health() podplan.ContainerHealth {
	if p.probes == nil {
		return nil
	}
	return p.probes
}

// currentStatus is the pod's runtime status the sync starts from: the
// lane's observation when it follows the worker's last change of the
// runtime, else a fresh read, kept as the observation. A failed read drops
// the pod's start rank and requeues the lane; ok is false then.
func (p *Workers) currentStatus(w *podWorker, obs *podplan.PodStatus, obsAt time.Time, obsOwn bool, log *slog.Logger) (*podplan.PodStatus, bool) {
	if followsLastAct(w, obs, obsAt, obsOwn) {
		return obs, true
	}
	readAt := p.clock.Now()
	status, err := p.rt.PodStatus(p.ctx, w.uid)
	if err != nil {
		// Not a candidate while it cannot tell whether it needs a start:
		// a rank kept meanwhile would hold a slot from others.
		p.mu.Lock()
		p.releaseStartLocked(w, false)
		p.mu.Unlock()
		if p.ctx.Err() == nil {
			warnUnlessUnreachable(log, "read pod status", err)
			p.requeue(w, p.retryAfterError)
		}
		return nil, false
	}
	p.record(w, status, readAt)
	return status, true
}

// followsLastAct reports whether the observation obs, taken at obsAt (by
// the lane itself when own), is known to follow the worker's last change
// of the runtime: only the worker creates and starts the pod's objects,
// so such an observation lists every one the worker saw made (a start it
// gave up on may still come out of the runtime later).
func followsLastAct(w *podWorker, obs *podplan.PodStatus, obsAt time.Time, own bool) bool {
	return obs != nil && (obsAt.After(w.lastActed) || obsAt.Equal(w.lastActed) && own)
}

// takeStartSlot takes the start slots of a sync that starts a sandbox
// (start), and reports whether the sync may go on; a sync that starts none
// withdraws the pod from the start queue and goes on at once.
func (p *Workers) takeStartSlot(w *podWorker, pod *v1.Pod, status *podplan.PodStatus, start bool) bool {
	if start {
		return p.acquireStart(w, pod, status)
	}
	p.mu.Lock()
	p.releaseStartLocked(w, false)
	p.mu.Unlock()
	return true
}

// reread reads the pod's status after a sync acted, keeping it as the
// lane's observation; on a failed read the status the sync began from
// stands.
func (p *Workers) reread(w *podWorker, status *podplan.PodStatus) *podplan.PodStatus {
	w.lastActed = p.clock.Now()
	fresh, err := p.rt.PodStatus(p.ctx, w.uid)
	if err != nil {
		return status
	}
	p.record(w, fresh, w.lastActed)
	return fresh
}

// logSyncError logs a sync's failure. One the runtime manager made an
// event of (a crash-loop back-off, a failed pull or start) is logged with
// that event; only the others are logged here.
func logSyncError(ctx context.Context, log *slog.Logger, res kuberuntime.SyncResult) {
	if err := res.UnrecordedError(); err != nil && ctx.Err() == nil {
		warnUnlessUnreachable(log, "sync pod", err)
	} else if err := res.Error(); err != nil {
		log.Debug("sync pod", "err", err)
	}
}

// syncedStatus builds the pod's status after a sync: the runtime's state,
// why containers wait, and the probes' readiness (fed the runtime status
// first).
func (p *Workers) syncedStatus(pod *v1.Pod, status *podplan.PodStatus, res kuberuntime.SyncResult, startTime time.Time) v1.PodStatus {
	waiting := map[string]podstatus.Waiting{}
	for _, c := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if e := res.Waiting(c.Name); e != nil {
			waiting[c.Name] = podstatus.Waiting{Reason: e.Reason, Message: e.Message}
		}
	}
	in := podstatus.Input{Pod: pod, Runtime: status, Waiting: waiting, HostIP: p.hostIP, StartTime: startTime, Now: p.clock.Now()}
	if p.probes == nil {
		return podstatus.Build(in)
	}
	p.probes.UpdatePod(pod, status, p.hostIP)
	in.Ready = func(container string) bool { return p.probes.Ready(pod.UID, container) }
	st := podstatus.Build(in)
	p.probes.AnnotateStatus(pod.UID, &st)
	return st
}

// publish hands a synced pod's status to the rollback tracker, then to the
// status store, and counts the sync and the pod's first time Running.
func (p *Workers) publish(w *podWorker, pod *v1.Pod, st v1.PodStatus, res kuberuntime.SyncResult, startTime time.Time) {
	// The rollback tracker hears of a status before readers can see it:
	// whoever sees a pod Ready may count on its trial having begun.
	if p.onStatus != nil {
		p.onStatus(pod, st, startTime)
	}
	p.status.Set(pod, st)
	if p.metrics == nil {
		return
	}
	p.metrics.observeSync(pod, res)
	if !w.running && st.Phase == v1.PodRunning {
		w.running = true
		p.metrics.observeStarted(pod, p.clock.Now())
	}
	if w.startup != nil {
		switch {
		case st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed:
			w.startup = nil
		case podStarted(pod, st):
			p.metrics.observeStartup(pod, st, p.clock.Now(), w.startup.pulling)
			w.startup = nil
		}
	}
}

// scheduleNext moves a pod that reached a terminal phase to terminating,
// or requeues the lane when the sync asked to be retried.
func (p *Workers) scheduleNext(w *podWorker, st v1.PodStatus, res kuberuntime.SyncResult, log *slog.Logger) {
	switch {
	case st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed:
		log.Info("pod reached a terminal phase", "phase", st.Phase)
		p.mu.Lock()
		w.terminate = true
		p.wakeLocked(w)
		p.mu.Unlock()
	case res.RetryAfter() > 0:
		p.requeue(w, res.RetryAfter())
	case res.Error() != nil:
		p.requeue(w, p.retryAfterError)
	}
}

// acquireStart takes the start slots w's pod needs (startSlots of
// status), or records why its pod waits for them (ContainerCreating, with
// its place in the queue) and keeps status as the lane's observation, so
// the sync that follows the grant starts from it instead of reading the
// runtime again.
func (p *Workers) acquireStart(w *podWorker, pod *v1.Pod, status *podplan.PodStatus) bool {
	p.mu.Lock()
	granted := p.starts.acquire(w.uid, w.priority, w.seq, startSlots(status))
	p.reportStartsLocked()
	if granted {
		p.mu.Unlock()
		return true
	}
	msg := p.starts.waitReason(w.uid)
	p.wakeStartsLocked()
	if !w.observedAt.After(w.lastActed) || w.observed == nil {
		w.observed, w.observedAt = status, p.clock.Now()
	}
	startTime := w.startTime
	p.mu.Unlock()
	waiting := map[string]podstatus.Waiting{}
	for _, c := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		waiting[c.Name] = podstatus.Waiting{Reason: "ContainerCreating", Message: msg}
	}
	p.status.Set(pod, podstatus.Build(podstatus.Input{Pod: pod, Runtime: status, Waiting: waiting, HostIP: p.hostIP, StartTime: startTime, Now: p.clock.Now()}))
	return false
}

// HoldStarts grants no start slot until releaseStarts: the sync loop
// holds them while it hands over a batch of pods.
func (p *Workers) HoldStarts() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.starts.held = true
}

// ReleaseStarts grants start slots again, best ranked first, and wakes
// the lanes whose turn it is.
func (p *Workers) ReleaseStarts() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.starts.held {
		return
	}
	p.starts.held = false
	p.wakeStartsLocked()
}

// StartDone gives back uid's start slot once its first container runs and
// a postStart hook is about to run: the hook is the pod's own business and
// may take long; the start it follows was a success.
func (p *Workers) StartDone(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w, ok := p.workers[uid]; ok {
		p.releaseStartLocked(w, true)
	}
}

// releaseStartLocked gives back w's start slot, or withdraws it from the
// start queue, and wakes the lanes whose turn it now is. observe feeds a
// completed start's latency to the adaptive limit.
func (p *Workers) releaseStartLocked(w *podWorker, observe bool) {
	was := p.starts.limit.current()
	p.starts.release(w.uid, observe)
	if now := p.starts.limit.current(); now != was {
		p.log.Debug("pod start limit changed", "limit", now, "was", was)
	}
	p.reportStartsLocked()
	p.wakeStartsLocked()
}

// reportStartsLocked sets the start queue's gauges (metrics.go) after a
// change of it; without metrics (tests of the lanes alone) it does nothing.
func (p *Workers) reportStartsLocked() {
	if p.metrics == nil {
		return
	}
	p.metrics.startLimit.Set(float64(p.starts.limit.current()))
	p.metrics.startsInFlight.Set(float64(len(p.starts.inflight)))
	p.metrics.startsQueued.Set(float64(len(p.starts.entries)))
}

// wakeStartsLocked wakes the lanes whose turn to start it now is, and,
// while lanes wait only because a critical pod starts alone, wakes the
// queue again once that time is up: nothing else would.
func (p *Workers) wakeStartsLocked() {
	for _, uid := range p.starts.wakeable() {
		p.wakeUIDLocked(uid)
	}
	if d := p.starts.soloLeft(); d > 0 && p.soloWake == nil {
		p.soloWake = p.clock.AfterFunc(d, func() {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.soloWake = nil
			p.wakeStartsLocked()
		})
	}
}

// terminate stops every container and sandbox of the pod, removes
// containers that never started, and frees its full name once the pod is
// terminated by the rule of terminated (a replacement may start while the
// stopped objects are removed); then it finishes the lane (removed pods) or
// parks it as terminated (completed pods). Until the rule holds, the name
// stays taken, the waiting pod says why, and the lane retries with
// back-off: a failed stop or removal, a start still in flight, or an
// unreadable status never lets the next UID through.
//
// The kill starts from the lane's observation (obs, taken at obsAt, by the
// lane itself when obsOwn) when it follows the worker's last change, as a
// sync does, so no runtime read stands between a removal and the first
// stop. The read after the kill decides whether the pod is terminated;
// when it finds what the observation could not list (a start the worker
// gave up on that the runtime carried out later), the kill runs again at
// once from that read, as it would have without the observation.
func (p *Workers) terminate(w *podWorker, pod *v1.Pod, grace *int64, remove bool, startTime time.Time, obs *podplan.PodStatus, obsAt time.Time, obsOwn bool) bool {
	log := p.log.With("pod", w.name, "namespace", w.namespace, "uid", w.uid)
	if p.probes != nil {
		p.probes.RemovePod(w.uid)
	}
	var killErr error
	status, err := obs, error(nil)
	read := !followsLastAct(w, obs, obsAt, obsOwn)
	if read {
		status, err = p.rt.PodStatus(p.ctx, w.uid)
	}
	for err == nil {
		killErr = p.rt.KillPod(p.ctx, pod, status, grace)
		w.lastActed = p.clock.Now()
		status, err = p.rt.PodStatus(p.ctx, w.uid)
		if err != nil || read {
			break
		}
		if done, _ := Terminated(status); done {
			break
		}
		read = true
	}
	if p.ctx.Err() != nil {
		return false
	}
	var done bool
	var why string
	if err != nil {
		why = "cannot read its state: " + oneLine(err)
	} else if done, why = Terminated(status); !done && killErr != nil {
		why += ": " + oneLine(killErr)
	}
	if !done {
		p.holdName(w, why)
		w.backOffTeardown()
		logErr := err
		if logErr == nil {
			logErr = errors.New(why)
		}
		warnUnlessUnreachable(log, "pod not terminated yet; its full name stays taken, retrying in "+w.teardownDelay.String(), logErr)
		p.requeue(w, w.teardownDelay)
		return false
	}
	if killErr != nil {
		// Whatever failed left nothing that can run: log it and go on.
		log.Warn("terminate pod", "err", killErr)
	}
	w.teardownDelay = 0
	p.mu.Lock()
	w.holding = ""
	p.wakeUIDLocked(p.gate.release(w.fullName, w.uid))
	// A removal that fails is retried from here: the pod is not stopped
	// again, and its retries keep backing off.
	w.state = stateTerminated
	p.mu.Unlock()
	if remove {
		return p.finish(w, status)
	}
	st := podstatus.Build(podstatus.Input{Pod: pod, Runtime: status, HostIP: p.hostIP, StartTime: startTime, Now: p.clock.Now()})
	p.status.Set(pod, st)
	log.Info("pod terminated", "phase", st.Phase)
	return false
}

// holdName records why w still holds its full name and wakes the pods
// waiting for it, so their status says so.
func (p *Workers) holdName(w *podWorker, why string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.holding == why {
		return
	}
	w.holding = why
	for _, uid := range p.gate.waiters(w.fullName) {
		p.wakeUIDLocked(uid)
	}
}

// oneLine flattens a joined error for a one-line status message.
func oneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

// finish removes a stopped pod's runtime objects and directory and closes
// the lane. status may be nil when the caller has not just read it.
func (p *Workers) finish(w *podWorker, status *podplan.PodStatus) bool {
	log := p.log.With("pod", w.name, "namespace", w.namespace, "uid", w.uid)
	var err error
	if status == nil {
		status, err = p.rt.PodStatus(p.ctx, w.uid)
	}
	if err == nil {
		err = p.rt.RemovePod(p.ctx, status)
	}
	if err != nil {
		if p.ctx.Err() != nil {
			return false
		}
		if p.handOver(w, log, err) {
			return true
		}
		// A runtime may refuse for good (a sandbox whose network it
		// cannot tear down): retries back off like the teardown's.
		w.backOffTeardown()
		warnUnlessUnreachable(log, "remove pod; retrying in "+w.teardownDelay.String(), err)
		p.requeue(w, w.teardownDelay)
		return false
	}
	if err := p.rt.CleanupPodDir(w.uid); err != nil {
		log.Warn("remove pod directory", "err", err)
	}
	p.status.Delete(w.uid)
	p.mu.Lock()
	back := w.readd != nil
	p.endLaneLocked(w)
	p.finished[w.uid] = p.clock.Now()
	p.mu.Unlock()
	log.Info("pod removed")
	// A pod added back meanwhile goes on with its story: what was said of
	// it while this run ended (a rollback to it, for one) stays.
	if p.onTerminated != nil && !back {
		p.onTerminated(w.uid)
	}
	return true
}

// handOver ends the lane of a stopped pod whose removal failed when the
// pod is back (re-added with the same UID), and starts the lane of its new
// run, which takes over what the runtime would not remove, as a pod whose
// sandbox died does: nothing of the stopped run can run any more, and a
// runtime that refuses for good must not keep the pod down. The pod's
// directory stays, for the new run; the garbage collector removes the old
// sandboxes once the runtime lets it. It reports whether it handed over.
func (p *Workers) handOver(w *podWorker, log *slog.Logger, removeErr error) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	readd := w.readd
	if readd == nil {
		return false
	}
	warnUnlessUnreachable(log, "remove pod; it is back, and its new run takes over what is left", removeErr)
	p.status.Delete(w.uid)
	p.endLaneLocked(w)
	return true
}

// endLaneLocked forgets w's lane and starts the lane of the pod added back
// meanwhile, if any.
func (p *Workers) endLaneLocked(w *podWorker) {
	if w.timer != nil {
		w.timer.Stop()
	}
	delete(p.workers, w.uid)
	if readd := w.readd; readd != nil {
		p.startWorkerLocked(readd.UID, readd.Name, readd.Namespace, readd)
	}
}

// FinishedSince reports whether the lane of uid removed its pod at or after
// t: a relist taken before then may still show the pod, which is then no
// orphan but a leftover of a stale snapshot.
func (p *Workers) FinishedSince(uid types.UID, t time.Time) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.finished[uid]
	return ok && !at.Before(t)
}

// ForgetFinished drops records of lanes finished before t, so the record
// does not grow over years of pod churn.
func (p *Workers) ForgetFinished(t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for uid, at := range p.finished {
		if at.Before(t) {
			delete(p.finished, uid)
		}
	}
}

func (p *Workers) wakeUIDLocked(uid types.UID) {
	if uid == "" {
		return
	}
	if w, ok := p.workers[uid]; ok {
		p.wakeLocked(w)
	}
}

// Fingerprint captures what makes a pod's runtime state different for its
// worker: the set of sandboxes and containers and their states. A relist
// hands a pod it no longer finds as nil: nothing, an empty fingerprint.
func Fingerprint(st *podplan.PodStatus) string {
	if st == nil {
		return ""
	}
	parts := make([]string, 0, len(st.Sandboxes)+len(st.Containers))
	for _, s := range st.Sandboxes {
		parts = append(parts, "s:"+s.ID+":"+string(s.State))
	}
	for _, c := range st.Containers {
		parts = append(parts, "c:"+c.ID+":"+string(c.State))
	}
	sort.Strings(parts)
	return strings.Join(parts, ",")
}
