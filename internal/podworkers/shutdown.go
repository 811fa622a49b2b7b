package podworkers

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ActivePods lists the desired pods of lanes still syncing.
func (p *Workers) ActivePods() []*v1.Pod {
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

// Shutdown asks the pod's lane to stop it with grace seconds and keep it
// stopped: its runtime objects stay, and the next berth (after the
// reboot) starts it again from its manifest.
func (p *Workers) Shutdown(uid types.UID, grace int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.workers[uid]
	if !ok || w.terminate {
		return
	}
	w.terminate, w.remove, w.grace, w.replacing = true, false, &grace, false
	if w.prePullCancel != nil {
		w.prePullCancel() // a version that never started has nothing to stop
	}
	p.status.MarkDeleting(uid, p.clock.Now(), &grace)
	p.wakeLocked(w)
}

// Stopped reports whether the lane of uid finished stopping its pod (or
// is gone).
func (p *Workers) Stopped(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.workers[uid]
	return !ok || w.state == stateTerminated
}
