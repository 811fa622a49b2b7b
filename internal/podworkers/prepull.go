package podworkers

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/podstatus"
)

// Pull before stop (docs/architecture.md, Full-name exclusivity): a new
// version of a full name whose holder still runs makes its images present
// first, while it waits at the gate; a holder the sources replaced
// (Replace) keeps running until then, and only then stops. The new
// version still starts only once the old one is terminated. A pull that
// fails keeps the old version running and says so on the new one; it is
// retried with the image's pull back-off.

const (
	// ReasonPullingBeforeStop is the reason of a new version that pulls
	// its images while the old one runs.
	ReasonPullingBeforeStop = "PullingBeforeStop"
	// ReasonPullBeforeStopFailed is the reason of a new version whose
	// images could not be pulled; the old one keeps running.
	ReasonPullBeforeStopFailed = "PullBeforeStopFailed"
	// ReasonPulledBeforeStop is the event of a pre-pull that is done.
	ReasonPulledBeforeStop = "PulledBeforeStop"
	// ConditionPulledBeforeStop is the condition of a new version whose
	// pre-pull failed: False, with the pull's reason and message.
	ConditionPulledBeforeStop v1.PodConditionType = "PulledBeforeStop"
)

// replaceUnwaited is how long a replaced pod keeps running when no new
// version of its name waits: the ADD of the new version follows the
// REMOVE of the old one at once, so only a new version that never comes
// (refused at max-pods, superseded by the old one's own return) leaves it
// waiting, and it then stops as the removal asked.
const replaceUnwaited = 10 * time.Second

// The retries of a failed pre-pull that carries no pull back-off of its
// own (ErrImageNeverPull: someone may load the image by hand) back off
// from prePullRetryInitial, doubling up to prePullRetryMax.
const (
	prePullRetryInitial = 2 * time.Second
	prePullRetryMax     = 5 * time.Minute
)

// Replace is Remove for a pod whose full name the sources now serve under
// another UID (an edit, a rollback): a started pod keeps running (and
// syncing) until a new version of its name has made its images present,
// or none waits for replaceUnwaited, and is then stopped and removed as
// Remove does; a pod that has not started (a version superseded before it
// ran) is removed at once, ending its pre-pull.
func (p *Workers) Replace(uid types.UID) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.workers[uid]
	if !ok {
		return
	}
	if !w.started || w.terminate || w.pod == nil {
		p.removeLocked(w, nil)
		return
	}
	if w.replacing {
		return
	}
	if _, ready := p.waitersLocked(w.fullName, w.uid); ready {
		// The new version waited already, with its images.
		p.releaseReplacedLocked(w)
		return
	}
	// Its lane looks again when no new version came by then; the new one
	// stops it once it has its images (prePull).
	w.replacing, w.replaceSince = true, p.clock.Now()
	p.releaseStartLocked(w, false)
	p.requeueLocked(w, replaceUnwaited)
}

// checkReplacingLocked stops a replaced pod once a new version of its name
// made its images present, once it reached a terminal phase, or once no
// new version has waited for replaceUnwaited; until then it arms the lane's
// wake-up for that time.
func (p *Workers) checkReplacingLocked(w *podWorker) {
	live, ready := p.waitersLocked(w.fullName, w.uid)
	switch {
	case w.terminate && w.pod != nil, ready:
		p.releaseReplacedLocked(w)
	case live > 0:
	default:
		if left := replaceUnwaited - p.clock.Since(w.replaceSince); left > 0 {
			p.requeueLocked(w, left)
			return
		}
		p.releaseReplacedLocked(w)
	}
}

// waitersLocked counts the lanes of other UIDs of fullName that wait to
// start, and reports whether one of them has pulled its images.
func (p *Workers) waitersLocked(fullName string, self types.UID) (live int, ready bool) {
	for uid, o := range p.workers {
		if uid == self || o.fullName != fullName || o.started || o.terminate || o.pod == nil {
			continue
		}
		live++
		ready = ready || o.prePulled
	}
	return live, ready
}

// releaseUnwaitedLocked stops the replaced holder of fullName when no new
// version of it waits any more (the pending one was removed).
func (p *Workers) releaseUnwaitedLocked(fullName string) {
	holder, ok := p.gate.holder(fullName)
	if !ok {
		return
	}
	if h := p.workers[holder]; h != nil && h.replacing {
		if live, _ := p.waitersLocked(fullName, holder); live == 0 {
			p.releaseReplacedLocked(h)
		}
	}
}

// releaseReplacedLocked stops and removes a replaced pod now.
func (p *Workers) releaseReplacedLocked(w *podWorker) {
	w.replacing = false
	p.log.Info("stopping the replaced version", "pod", w.name, "namespace", w.namespace, "uid", w.uid)
	p.removeLocked(w, w.grace)
}

// prePull makes pod's images present while the holder of its full name
// runs, then lets a replaced holder stop. A failure leaves the holder
// running, shows the problem on pod (its status, a condition, an event)
// and retries when the image's back-off ends. A pre-pull cut short (the
// pod removed, berth stopping) does nothing more.
func (p *Workers) prePull(ctx context.Context, w *podWorker, pod *v1.Pod, holder types.UID) {
	log := p.log.With("pod", pod.Name, "namespace", pod.Namespace, "uid", pod.UID, "old_uid", holder)
	old := "the old version"
	if holder != "" {
		old = fmt.Sprintf("the old version (uid %s)", holder)
	}
	res := p.rt.PrePull(ctx, pod, func(images []string) {
		msg := fmt.Sprintf("Pulling %s before stopping %s, which keeps running meanwhile: %s", plural(len(images), "image"), old, strings.Join(images, ", "))
		p.event(pod, kuberuntime.EventNormal, ReasonPullingBeforeStop, msg)
		log.Info("pulling images before stopping the old version", "images", len(images))
		p.status.Set(pod, podstatus.Pending(pod, ReasonPullingBeforeStop, "pulling images before stopping "+old, p.clock.Now()))
	})
	p.mu.Lock()
	w.prePullCancel = nil
	if ctx.Err() != nil || w.terminate {
		p.mu.Unlock()
		return
	}
	if err := res.Err(); err != nil {
		delay := res.RetryAfter
		if delay == 0 {
			if w.prePullDelay == 0 {
				w.prePullDelay = prePullRetryInitial
			} else {
				w.prePullDelay = min(2*w.prePullDelay, prePullRetryMax)
			}
			delay = w.prePullDelay
		}
		w.prePullRetryAt = p.clock.Now().Add(delay)
		p.mu.Unlock()
		msg := fmt.Sprintf("%s keeps running: %s", old, oneLine(err))
		p.event(pod, kuberuntime.EventWarning, ReasonPullBeforeStopFailed, fmt.Sprintf("%s; retrying in %s", msg, delay.Round(time.Second)))
		log.Warn("pull before stop failed; the old version keeps running", "err", err, "retry_in", delay)
		p.status.Set(pod, prePullFailedStatus(pod, res, msg, p.hostIP, p.clock.Now()))
		p.requeue(w, delay)
		return
	}
	w.prePulled, w.prePullDelay = true, 0
	if cur, ok := p.gate.holder(w.fullName); ok {
		holder = cur
		if h := p.workers[cur]; h != nil && h.replacing {
			p.releaseReplacedLocked(h)
		}
	}
	p.wakeLocked(w) // on to the gate: it says what it waits for now
	p.mu.Unlock()
	if res.Needed > 0 {
		p.event(pod, kuberuntime.EventNormal, ReasonPulledBeforeStop, fmt.Sprintf("Pulled %s in %s; stopping %s", plural(res.Pulled, "image"), res.Pulling.Round(time.Millisecond), old))
		log.Info("pulled images before stopping the old version", "images", res.Pulled, "took", res.Pulling)
	}
}

// prePullFailedStatus is the status of a new version whose pre-pull
// failed: Pending, each container of a missing image waiting with the
// pull's reason, and ConditionPulledBeforeStop False.
func prePullFailedStatus(pod *v1.Pod, res kuberuntime.PrePullResult, msg, hostIP string, now time.Time) v1.PodStatus {
	waiting := map[string]podstatus.Waiting{}
	for _, f := range res.Failed {
		for _, c := range f.Containers {
			name, _, _ := strings.Cut(c, "/")
			waiting[name] = podstatus.Waiting{Reason: f.Err.Reason, Message: f.Err.Message}
		}
	}
	st := podstatus.Build(podstatus.Input{Pod: pod, Waiting: waiting, HostIP: hostIP, Now: now})
	st.Phase, st.Reason, st.Message = v1.PodPending, ReasonPullBeforeStopFailed, msg
	st.Conditions = append(st.Conditions, v1.PodCondition{
		Type: ConditionPulledBeforeStop, Status: v1.ConditionFalse, Reason: res.Failed[0].Err.Reason, Message: msg, LastTransitionTime: metav1.NewTime(now),
	})
	return st
}

// event records an event of pod, when the workers have a recorder.
func (p *Workers) event(pod *v1.Pod, typ kuberuntime.EventType, reason, msg string) {
	if p.recorder != nil {
		p.recorder.Event(pod.UID, pod.Name, pod.Namespace, typ, reason, msg)
	}
}

// plural is "1 image" or "n images".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
