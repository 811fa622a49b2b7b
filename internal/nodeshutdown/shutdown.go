package nodeshutdown

import (
	"context"
	"log/slog"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/podrules"
)

// Config is the kubelet's graceful node shutdown settings.
type Config struct {
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
		groups = append(groups, shutdownGroup{priority: prio, critical: prio >= podrules.CriticalPriority, pods: ps})
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

// Manager holds the inhibitor lock and runs the shutdown.
type Manager struct {
	cfg   Config
	dial  func() (logind, error)
	pods  Pods
	clock clock.Clock
	log   *slog.Logger
}

// Pods is what the manager stops: berth's pod workers.
type Pods interface {
	// ActivePods are the pods that may be running.
	ActivePods() []*v1.Pod
	// Shutdown stops the pod with grace seconds and keeps it stopped.
	Shutdown(uid types.UID, grace int64)
	// Stopped reports whether the pod's containers are all stopped.
	Stopped(uid types.UID) bool
}

// New returns the manager of a node shutdown over pods, which talks to
// the system's logind.
func New(cfg Config, pods Pods, clk clock.Clock, log *slog.Logger) *Manager {
	return &Manager{cfg: cfg, dial: systemLogind(log), pods: pods, clock: clk, log: log}
}

// Run takes the lock and waits for logind's signal until ctx ends. A
// machine without logind (a container, no system bus) only loses graceful
// shutdown: it is logged once and berth goes on.
func (s *Manager) Run(ctx context.Context) {
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
func (s *Manager) stopPods(ctx context.Context, total time.Duration) {
	critical := min(s.cfg.CriticalPods, total)
	budgets := map[bool]time.Time{}
	start := s.clock.Now()
	budgets[false] = start.Add(total - critical)
	plan := shutdownPlan(s.pods.ActivePods())
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
			s.pods.Shutdown(p.UID, grace)
		}
		if !s.waitStopped(ctx, g.pods, deadline) {
			s.log.Warn("node shutdown: pods of a priority group still running when its time ran out", "group", i, "priority", g.priority)
		}
	}
}

// waitStopped polls until every pod of the group is stopped, the deadline
// passes or ctx ends.
func (s *Manager) waitStopped(ctx context.Context, pods []*v1.Pod, deadline time.Time) bool {
	for {
		all := true
		for _, p := range pods {
			if !s.pods.Stopped(p.UID) {
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
