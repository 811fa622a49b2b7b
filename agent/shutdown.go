package agent

import (
	"context"
	"log/slog"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// Graceful node shutdown for static pods (the kubelet's
// shutdownGracePeriod and shutdownGracePeriodCriticalPods; k/k#133442 and
// #113940: the kubelet kills static pods first, or not gracefully). berth
// holds a systemd-logind delay inhibitor lock; when logind announces a
// shutdown (PrepareForShutdown true), berth stops its pods lowest priority
// first, the critical ones (priority >= system-cluster-critical) last
// within their own share of the time, then releases the lock so the
// shutdown proceeds. Stopping berth itself (systemctl stop, an upgrade)
// still leaves every pod running: only a shutdown of the machine stops
// them.

// criticalPriority is system-cluster-critical's priority: pods at or
// above it are stopped last, within ShutdownGracePeriodCriticalPods.
const criticalPriority = 2000000000

// ShutdownConfig is the kubelet's graceful node shutdown settings.
type ShutdownConfig struct {
	// GracePeriod is the whole time pods get (shutdownGracePeriod); zero
	// disables graceful node shutdown, as with the kubelet.
	GracePeriod time.Duration
	// CriticalPods is the part of GracePeriod kept for critical pods
	// (shutdownGracePeriodCriticalPods).
	CriticalPods time.Duration
}

// shutdownGroup is pods of one priority, stopped together.
type shutdownGroup struct {
	priority int32
	critical bool
	pods     []*v1.Pod
}

// shutdownPlan orders pods for a node shutdown: groups of equal priority,
// lowest first, every critical group after every other.
func shutdownPlan(pods []*v1.Pod) []shutdownGroup {
	byPriority := map[int32][]*v1.Pod{}
	for _, p := range pods {
		byPriority[podPriority(p)] = append(byPriority[podPriority(p)], p)
	}
	var groups []shutdownGroup
	for prio, ps := range byPriority {
		sort.Slice(ps, func(i, j int) bool { return ps[i].Name < ps[j].Name })
		groups = append(groups, shutdownGroup{priority: prio, critical: prio >= criticalPriority, pods: ps})
	}
	sort.Slice(groups, func(i, j int) bool { return groups[i].priority < groups[j].priority })
	return groups
}

func podPriority(p *v1.Pod) int32 {
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	return 0
}

// podGrace is the grace period a pod gets when its share of the shutdown
// has left remaining: its own terminationGracePeriodSeconds, cut to what
// is left (at least one second, so its preStop hook and SIGTERM come).
func podGrace(p *v1.Pod, remaining time.Duration) int64 {
	grace := int64(30)
	if g := p.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = *g
	}
	left := int64(remaining / time.Second)
	if left < 1 {
		left = 1
	}
	return min(grace, left)
}

// shutdownManager holds the inhibitor lock and runs the shutdown.
type shutdownManager struct {
	cfg   ShutdownConfig
	dial  func() (logind, error)
	pods  shutdownTarget
	clock clock.Clock
	log   *slog.Logger
}

// shutdownTarget is what the manager stops: the agent's pod workers.
type shutdownTarget interface {
	// activePods are the pods that may be running.
	activePods() []*v1.Pod
	// shutdown stops the pod with grace seconds and keeps it stopped.
	shutdown(uid types.UID, grace int64)
	// stopped reports whether the pod's containers are all stopped.
	stopped(uid types.UID) bool
}

// run takes the lock and waits for logind's signal until ctx ends. A
// machine without logind (a container, no system bus) only loses graceful
// shutdown: it is logged once and berth goes on.
func (s *shutdownManager) run(ctx context.Context) {
	l, err := s.dial()
	if err != nil {
		s.log.Warn("graceful node shutdown is off: logind is not reachable", "err", err)
		return
	}
	defer l.Close()
	total := s.cfg.GracePeriod
	if max, err := l.MaxDelay(); err == nil && max < total {
		if err := l.RaiseMaxDelay(total); err != nil {
			s.log.Warn("cannot raise logind's InhibitDelayMaxSec", "want", total, "err", err)
		}
		if max, err = waitMaxDelay(ctx, s.clock, l, total); err == nil && max < total {
			s.log.Warn("logind waits less than shutdownGracePeriod for berth; pods get that much less", "InhibitDelayMaxSec", max, "shutdownGracePeriod", total)
			total = max
		}
	}
	lock, err := l.Inhibit("berth", "berth stops its static pods, critical ones last")
	if err != nil {
		s.log.Warn("graceful node shutdown is off", "err", err)
		return
	}
	s.log.Info("graceful node shutdown: holding a logind delay lock", "shutdownGracePeriod", total, "shutdownGracePeriodCriticalPods", s.cfg.CriticalPods)
	defer func() {
		if lock != nil {
			lock.Close()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case starting := <-l.PrepareForShutdown():
			if !starting {
				// A cancelled shutdown: take the lock again for the next.
				// Pods stopped meanwhile stay stopped until berth restarts.
				s.log.Info("node shutdown: logind cancelled the shutdown")
				if lock == nil {
					if lock, err = l.Inhibit("berth", "berth stops its static pods, critical ones last"); err != nil {
						s.log.Warn("graceful node shutdown is off after a cancelled shutdown", "err", err)
					}
				}
				continue
			}
			s.stopPods(ctx, total)
			if lock != nil {
				s.log.Info("node shutdown: pods stopped, releasing the logind lock")
				lock.Close()
				lock = nil
			}
		}
	}
}

// stopPods stops every active pod per shutdownPlan: the non-critical
// groups in turn within total minus CriticalPods, then the critical ones
// within CriticalPods. A group whose pods are not stopped when its share
// runs out does not hold back the next.
func (s *shutdownManager) stopPods(ctx context.Context, total time.Duration) {
	critical := min(s.cfg.CriticalPods, total)
	budgets := map[bool]time.Time{}
	start := s.clock.Now()
	budgets[false] = start.Add(total - critical)
	plan := shutdownPlan(s.pods.activePods())
	s.log.Info("node shutdown: stopping pods", "groups", len(plan))
	for i, g := range plan {
		if g.critical {
			if _, ok := budgets[true]; !ok {
				budgets[true] = s.clock.Now().Add(critical)
			}
		}
		deadline := budgets[g.critical]
		for _, p := range g.pods {
			grace := podGrace(p, deadline.Sub(s.clock.Now()))
			s.log.Info("node shutdown: stopping pod", "pod", p.Namespace+"/"+p.Name, "uid", p.UID, "priority", g.priority, "gracePeriod", grace)
			s.pods.shutdown(p.UID, grace)
		}
		if !s.waitStopped(ctx, g.pods, deadline) {
			s.log.Warn("node shutdown: pods of a priority group still running when its time ran out", "group", i, "priority", g.priority)
		}
	}
}

// waitStopped polls until every pod of the group is stopped, the deadline
// passes or ctx ends.
func (s *shutdownManager) waitStopped(ctx context.Context, pods []*v1.Pod, deadline time.Time) bool {
	for {
		all := true
		for _, p := range pods {
			if !s.pods.stopped(p.UID) {
				all = false
				break
			}
		}
		if all {
			return true
		}
		if !s.clock.Now().Before(deadline) {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-s.clock.After(100 * time.Millisecond):
		}
	}
}

// activePods lists the desired pods of lanes still syncing.
func (p *podWorkers) activePods() []*v1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []*v1.Pod
	for _, w := range p.workers {
		if w.pod != nil && !w.terminate && w.state == stateSyncing {
			out = append(out, w.pod)
		}
	}
	return out
}

// shutdown asks the pod's lane to stop it with grace seconds and keep it
// stopped: its runtime objects stay, and the next berth (after the
// reboot) starts it again from its manifest.
func (p *podWorkers) shutdown(uid types.UID, grace int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.workers[uid]
	if !ok || w.terminate {
		return
	}
	w.terminate, w.remove, w.grace = true, false, &grace
	p.status.markDeleting(uid, p.clock.Now(), &grace)
	p.wakeLocked(w)
}

// stopped reports whether the lane of uid finished stopping its pod (or
// is gone).
func (p *podWorkers) stopped(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.workers[uid]
	return !ok || w.state == stateTerminated
}
