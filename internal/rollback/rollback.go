package rollback

import (
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/images"
	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/podrules"
	"github.com/berth-agent/berth/internal/podspec"
)

// Config configures the automatic rollback of a bad edit.
type Config struct {
	// After is, by source (podspec.SourceFile, podspec.SourceHTTP), how
	// long a new version of a pod may take to become Ready before berth
	// rolls back to the last version that was Ready; 0 (or a source not
	// in the map) disables it. The pod's berth.io/rollback-after
	// annotation overrides it.
	After map[string]time.Duration
	// MinReady is how long a new version must stay Ready, uninterrupted,
	// to become the last Ready version (Kubernetes' minReadySeconds): a
	// container that crashes a second after it started was Ready for that
	// second, and must not count as good.
	MinReady time.Duration
	// StateDir keeps the last Ready versions and the rollbacks in force
	// across restarts; "" keeps them in memory only.
	StateDir string
}

// crashLoopRestarts is how many restarts of one container make a new
// version a crash loop before its window ends. Restart counts are per UID,
// so they count since the version started, across berth restarts.
const crashLoopRestarts = 3

// Reasons of the rollback problems, events and condition.
const (
	// ReasonRolledBack: a new version failed and the last Ready version
	// runs in its place until the manifest changes.
	ReasonRolledBack = "RolledBack"
	// ReasonNoReadyVersion: a new version failed and no earlier version of
	// its pod was ever Ready; it keeps running as it is.
	ReasonNoReadyVersion = "NoReadyVersion"
)

// ConditionLatestVersion is False, with reason RolledBack and a message
// naming both versions, on a pod that runs its last Ready version in place
// of the newer one its source serves. Only such pods carry it.
const ConditionLatestVersion v1.PodConditionType = "berth.io/LatestVersion"

// Key is what a rollback target belongs to: the manifest that
// produced the version (its source, and its origin: the file path or URL)
// and the pod's full name.
//
// The rule: a new version is rolled back only to the last Ready version of
// its own key, never to one another manifest produced. Two manifests may
// serve one full name (a file and the URL, two files); when the operator
// removes one, its version must not come back as the other's rollback
// target. Once no source serves a pod of a key, the key's record is
// forgotten, on disk too, so a version whose manifest was removed is never
// run again. A renamed file is a removal and an add (its pods get new
// UIDs): the new name has no Ready version until one proves itself, and a
// bad version under it runs on with NoReadyVersion rather than bring back
// the removed name's version. A pod moved to another manifest under a fixed
// metadata.uid keeps its UID but not its record either: it is on trial
// again under its new key.
type Key struct {
	Source, Origin, FullName string
}

// KeyOf is the key of pod's versions.
func KeyOf(pod *v1.Pod) Key {
	return Key{Source: pod.Annotations[podspec.AnnotationSource], Origin: pod.Annotations[podspec.AnnotationOrigin],
		FullName: podspec.FullName(pod)}
}

// logKeys are the log keys of the key's pod, as the rest of berth logs a
// pod, with where its manifest is.
func (k Key) logKeys() []any {
	name, ns := splitFullName(k.FullName)
	return []any{"pod", name, "namespace", ns, "source", k.Source, "origin", k.Origin}
}

// Tracker watches every new version of a pod until it proves good (Ready
// for MinReady) or bad (not Ready when its window ends, a crash loop, or
// phase Failed), remembers each key's last Ready version (Key), and
// decides rollbacks, which the sync loop carries out (applyRollbacks). A
// bad version is never started again until the manifest changes, since
// its UID is the manifest's hash: a new manifest is a new UID, and a new
// trial.
//
// Pod lanes report statuses (observe), the sync loop does everything else;
// mu guards records, trials, failed and pending, and is held while a
// record is written, so what is on disk never goes backwards.
type Tracker struct {
	cfg    Config
	clock  clock.PassiveClock
	log    *slog.Logger
	events kuberuntime.Recorder
	state  *rollbackState
	// due has room for one signal: rollbacks are pending for the sync loop.
	due   chan struct{}
	total *prometheus.CounterVec

	mu      sync.Mutex
	records map[Key]*nameRecord
	trials  map[types.UID]*trial
	// failed are the versions that failed with no earlier Ready version
	// of their key to go back to: they run on, with a problem, until the
	// manifest changes. Not persisted: after a restart the version gets a
	// new trial and fails again.
	failed  map[Key]*rollback
	pending []Action
}

// trial is one new version on probation.
type trial struct {
	pod        *v1.Pod
	start      time.Time // when it passed the full-name gate
	window     time.Duration
	ready      bool
	readySince time.Time
	status     v1.PodStatus
	// restarts is the sum of the containers' restart counts last seen: a
	// container restarted within one sync (the first restart is
	// immediate) is never seen unready, yet it was not Ready throughout.
	restarts int32
}

// Action is a decided rollback for the sync loop: stop bad, run
// good in its place.
type Action struct {
	Bad, Good *v1.Pod
}

// New returns the rollbacks with the records persisted under
// cfg.StateDir loaded, so that a rollback decided before a restart holds
// from the first update on, before any pod is started.
func New(cfg Config, nodeName string, clk clock.PassiveClock, log *slog.Logger, events kuberuntime.Recorder, reg prometheus.Registerer) *Tracker {
	r := &Tracker{
		cfg: cfg, clock: clk, log: log, events: events,
		state:  &rollbackState{dir: cfg.StateDir, nodeName: nodeName, log: log},
		due:    make(chan struct{}, 1),
		trials: map[types.UID]*trial{},
		failed: map[Key]*rollback{},
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_rollbacks_total",
			Help: "Versions of pods that failed on probation, by what followed (RolledBack, NoReadyVersion).",
		}, []string{"reason"}),
	}
	reg.MustRegister(r.total)
	r.records = r.state.load()
	for k, rec := range r.records {
		if rb := rec.RolledBack; rb != nil {
			log.Info("a rollback is in force: the last Ready version runs in place of the failed one until the manifest changes",
				append(k.logKeys(), "uid", rb.Good, "failed_uid", rb.Bad, "reason", rb.Message)...)
		}
	}
	return r
}

// window is how long pod may take to become Ready, 0 for never rolled back.
func (r *Tracker) window(pod *v1.Pod) time.Duration {
	if d, ok, err := podrules.RollbackAfter(pod); ok && err == nil {
		return d
	}
	return r.cfg.After[pod.Annotations[podspec.AnnotationSource]]
}

// Admit is called by the sync loop with every pod a source delivers (ADD,
// UPDATE, RECONCILE) and returns the pod to run for it: the last Ready
// version while a rollback of this very version is in force, the pod
// itself otherwise. A delivered version other than the bad one ends the
// rollback: the manifest changed, and the new version gets a trial.
func (r *Tracker) Admit(pod *v1.Pod) *v1.Pod {
	k := KeyOf(pod)
	r.mu.Lock()
	defer r.mu.Unlock()
	if f := r.failed[k]; f != nil && f.Bad != pod.UID {
		delete(r.failed, k)
	}
	rec := r.records[k]
	if rec == nil || rec.RolledBack == nil {
		return pod
	}
	if rec.RolledBack.Bad == pod.UID {
		return rec.LastReady
	}
	r.log.Info("the manifest changed since the rollback; running the new version", append(k.logKeys(), "uid", pod.UID, "failed_uid", rec.RolledBack.Bad)...)
	rec.RolledBack = nil
	r.saveLocked(k, rec)
	return pod
}

// Substitute returns the pod that runs for the delivered pod, without
// changing anything: for listings of the desired pods.
func (r *Tracker) Substitute(pod *v1.Pod) *v1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec := r.records[KeyOf(pod)]; rec != nil && rec.RolledBack != nil && rec.RolledBack.Bad == pod.UID {
		return rec.LastReady
	}
	return pod
}

// Forget drops what is known of a key no source serves any more: a pod
// added again later starts afresh, and never comes back as an old version
// the operator removed.
func (r *Tracker) Forget(k Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.failed, k)
	if rec, ok := r.records[k]; ok {
		delete(r.records, k)
		r.log.Info("the pod's manifest is gone; forgetting its last Ready version", append(k.logKeys(), "uid", rec.LastReady.UID)...)
		r.saveLocked(k, nil)
	}
}

// Observe takes a status a lane just built for pod, which passed the
// full-name gate at start. Called from the lanes' goroutines.
func (r *Tracker) Observe(pod *v1.Pod, st v1.PodStatus, start time.Time) {
	k := KeyOf(pod)
	now := r.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.records[k]
	if rec != nil && rec.LastReady.UID == pod.UID {
		// The last Ready version is never on trial: once back after a
		// rollback, its failures are the restart policy's business.
		if rec.LastReady != pod && podReady(st) {
			// The store hands the same pod while its manifest is
			// unchanged, so this compares specs once per change (or
			// once after a restart), not on every sync. A different
			// spec under the same UID is a manifest with a fixed
			// metadata.uid edited in place.
			changed := !equality.Semantic.DeepEqual(rec.LastReady.Spec, pod.Spec)
			rec.LastReady = pod
			if changed {
				r.saveLocked(k, rec)
			}
		}
		return
	}
	if rec != nil && rec.RolledBack != nil && rec.RolledBack.Bad == pod.UID {
		return // being stopped
	}
	tr := r.trials[pod.UID]
	if tr == nil {
		tr = &trial{start: start, window: r.window(pod)}
		r.trials[pod.UID] = tr
	}
	tr.pod, tr.status = pod, st
	if st.Phase == v1.PodSucceeded {
		// A pod that ran to completion did its job: neither a good
		// version to return to nor a bad one.
		delete(r.trials, pod.UID)
		return
	}
	restarts := restartSum(st)
	tr.ready = podReady(st)
	switch {
	case !tr.ready:
		tr.readySince = time.Time{}
	case tr.readySince.IsZero() || restarts > tr.restarts:
		tr.readySince = now
	}
	tr.restarts = restarts
	r.judgeLocked(tr, now)
}

// Tick judges every trial against the clock (a window ending, a version
// Ready long enough) and drops the trials of lanes that are gone; the sync
// loop calls it at housekeeping.
func (r *Tracker) Tick(known func(types.UID) bool) {
	now := r.clock.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid, tr := range r.trials {
		if !known(uid) {
			delete(r.trials, uid)
			continue
		}
		r.judgeLocked(tr, now)
	}
}

// judgeLocked accepts tr's version as the last Ready one, or fails it.
func (r *Tracker) judgeLocked(tr *trial, now time.Time) {
	if tr.ready && now.Sub(tr.readySince) >= r.cfg.MinReady {
		r.acceptLocked(tr, now)
		return
	}
	if tr.window <= 0 {
		return
	}
	if why := trialFailure(tr, now); why != "" {
		r.failLocked(tr, why, now)
	}
}

// trialFailure says why a version on trial failed, or "".
func trialFailure(tr *trial, now time.Time) string {
	if tr.status.Phase == v1.PodFailed {
		return "its pod failed (phase Failed)"
	}
	for _, cs := range append(append([]v1.ContainerStatus{}, tr.status.InitContainerStatuses...), tr.status.ContainerStatuses...) {
		if cs.RestartCount >= crashLoopRestarts {
			return fmt.Sprintf("it crash-loops (container %q restarted %d times)", cs.Name, cs.RestartCount)
		}
	}
	if !tr.ready && now.Sub(tr.start) >= tr.window {
		return fmt.Sprintf("it was not Ready %s after it started", tr.window)
	}
	return ""
}

func (r *Tracker) acceptLocked(tr *trial, now time.Time) {
	k := KeyOf(tr.pod)
	delete(r.trials, tr.pod.UID)
	delete(r.failed, k)
	rec := r.records[k]
	if rec == nil {
		rec = &nameRecord{}
		r.records[k] = rec
	}
	rec.LastReady, rec.ReadyAt, rec.RolledBack = tr.pod, now, nil
	r.log.Info("pod version is Ready; it is the version a failed edit of its manifest rolls back to", append(k.logKeys(), "uid", tr.pod.UID)...)
	r.saveLocked(k, rec)
}

// failLocked records tr's version as bad. With an earlier Ready version of
// its key (Key: never another manifest's), the rollback is
// persisted before the sync loop is told, so a kill at any point after
// runs the good version after the restart, never the bad one again;
// without, the version runs on, with a problem.
func (r *Tracker) failLocked(tr *trial, why string, now time.Time) {
	pod := tr.pod
	k := KeyOf(pod)
	fn := k.FullName
	delete(r.trials, pod.UID)
	rb := &rollback{Bad: pod.UID, BadSource: k.Source, BadOrigin: k.Origin, At: now.UTC()}
	rec := r.records[k]
	if rec == nil {
		rb.Reason = ReasonNoReadyVersion
		rb.Message = fmt.Sprintf("version %s of pod %s failed: %s; no earlier version of it was Ready from its manifest (%s %s), so it keeps running as it is until the manifest changes",
			pod.UID, fn, why, k.Source, k.Origin)
		r.failed[k] = rb
		// It stays on trial without a window: should it become Ready
		// after all, it is the version later edits roll back to.
		tr.window = 0
		r.trials[pod.UID] = tr
		r.total.WithLabelValues(rb.Reason).Inc()
		r.events.Event(pod.UID, pod.Name, pod.Namespace, kuberuntime.EventWarning, rb.Reason, rb.Message)
		return
	}
	rb.Reason, rb.Good = ReasonRolledBack, rec.LastReady.UID
	rb.Message = fmt.Sprintf("version %s of pod %s failed: %s; running the last Ready version %s again (Ready since %s) until the manifest changes",
		pod.UID, fn, why, rec.LastReady.UID, rec.ReadyAt.UTC().Format(time.RFC3339))
	rec.RolledBack = rb
	r.saveLocked(k, rec)
	r.total.WithLabelValues(rb.Reason).Inc()
	r.events.Event(pod.UID, pod.Name, pod.Namespace, kuberuntime.EventWarning, rb.Reason, rb.Message)
	r.events.Event(rec.LastReady.UID, pod.Name, pod.Namespace, kuberuntime.EventWarning, rb.Reason, rb.Message)
	r.pending = append(r.pending, Action{Bad: pod, Good: rec.LastReady})
	select {
	case r.due <- struct{}{}:
	default:
	}
}

// Due has a signal when rollbacks are pending: the sync loop then Takes
// them.
func (r *Tracker) Due() <-chan struct{} { return r.due }

// Take hands the sync loop the rollbacks decided since it last asked.
func (r *Tracker) Take() []Action {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.pending
	r.pending = nil
	return out
}

// Cancel drops the rollback of bad decided by a lane after the sync loop
// had already replaced that version: the manifest changed meanwhile, and
// the rollback is moot.
func (r *Tracker) Cancel(bad *v1.Pod) {
	k := KeyOf(bad)
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec := r.records[k]; rec != nil && rec.RolledBack != nil && rec.RolledBack.Bad == bad.UID {
		rec.RolledBack = nil
		r.saveLocked(k, rec)
	}
}

// saveLocked persists k's record, logging a failure: berth goes on, and
// a restart would then give the version in question a new trial.
func (r *Tracker) saveLocked(k Key, rec *nameRecord) {
	if err := r.state.save(k, rec); err != nil {
		r.log.Error("cannot persist the rollback state; after a restart it is lost", append(k.logKeys(), "err", err)...)
	}
}

// Problems are the failed versions, for /problems, metrics, STATUS= and
// `berth pods`, ordered by full name, source and origin.
func (r *Tracker) Problems() []podspec.Problem {
	r.mu.Lock()
	var out []podspec.Problem
	add := func(k Key, rb *rollback) {
		name, ns := splitFullName(k.FullName)
		out = append(out, podspec.Problem{Source: rb.BadSource, Origin: rb.BadOrigin, Reason: rb.Reason,
			Message: rb.Message, Name: name, Namespace: ns})
	}
	for k, rec := range r.records {
		if rec.RolledBack != nil {
			add(k, rec.RolledBack)
		}
	}
	for k, rb := range r.failed {
		add(k, rb)
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if fa, fb := podspec.JoinFullName(a.Name, a.Namespace), podspec.JoinFullName(b.Name, b.Namespace); fa != fb {
			return fa < fb
		}
		if a.Source != b.Source {
			return a.Source < b.Source
		}
		return a.Origin < b.Origin
	})
	return out
}

// Condition is the ConditionLatestVersion of pod, if it runs in place of
// a failed version.
func (r *Tracker) Condition(pod *v1.Pod) (v1.PodCondition, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := r.records[KeyOf(pod)]
	if rec == nil || rec.RolledBack == nil || rec.RolledBack.Good != pod.UID {
		return v1.PodCondition{}, false
	}
	rb := rec.RolledBack
	return v1.PodCondition{Type: ConditionLatestVersion, Status: v1.ConditionFalse, Reason: rb.Reason,
		Message: rb.Message, LastTransitionTime: metav1.NewTime(rb.At)}, true
}

// splitFullName undoes podspec.JoinFullName: namespaces hold no "_".
func splitFullName(fn string) (name, namespace string) {
	for i := len(fn) - 1; i >= 0; i-- {
		if fn[i] == '_' {
			return fn[:i], fn[i+1:]
		}
	}
	return fn, ""
}

// restartSum adds up the restart counts of every container of the pod.
func restartSum(st v1.PodStatus) int32 {
	var n int32
	for _, cs := range append(append([]v1.ContainerStatus{}, st.InitContainerStatuses...), st.ContainerStatuses...) {
		n += cs.RestartCount
	}
	return n
}

// podReady reports the pod's Ready condition.
func podReady(st v1.PodStatus) bool {
	for _, c := range st.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// Retain forgets the keys keep rejects. The sync loop calls it once every
// source has delivered, for manifests that went away while berth was down
// or whose pods moved to another origin under a fixed metadata.uid (an
// UPDATE, not a removal).
func (r *Tracker) Retain(keep func(Key) bool) {
	r.mu.Lock()
	var gone []Key
	for k := range r.records {
		if !keep(k) {
			gone = append(gone, k)
		}
	}
	r.mu.Unlock()
	for _, k := range gone {
		r.Forget(k)
	}
}

// Remembers reports whether any key has a record, so housekeeping copies
// the store's pods only when there is something to forget.
func (r *Tracker) Remembers() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.records) > 0
}

// LastReady is the UID of the last Ready version of k, "" when none
// proved itself.
func (r *Tracker) LastReady(k Key) types.UID {
	r.mu.Lock()
	defer r.mu.Unlock()
	if rec := r.records[k]; rec != nil {
		return rec.LastReady.UID
	}
	return ""
}

// Images are the images of every manifest's last Ready version, which a
// rollback would run: image GC keeps them.
func (r *Tracker) Images() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, rec := range r.records {
		if rec.LastReady != nil {
			out = append(out, images.PodImages(rec.LastReady)...)
		}
	}
	return out
}
