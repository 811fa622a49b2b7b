package syncloop

import (
	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/mirror"
	"github.com/berth-agent/berth/internal/nodestatus"
)

// nodeSnapshot is what the Node's conditions say of berth: Ready while
// berth is ready (every source delivered, every pod handed over) and
// healthy (the sync loop turns, the runtime answers). It reads health
// under its lock, so the node controller's goroutine may call it.
func (a *Loop) nodeSnapshot() nodestatus.Snapshot {
	err := a.health.Healthy()
	if err == nil {
		err = a.health.Ready()
	}
	if err != nil {
		return nodestatus.Snapshot{NotReadyMessage: err.Error()}
	}
	return nodestatus.Snapshot{Ready: true}
}

// mirrorPods are the pods to mirror: ManagedPods.
func (a *Loop) mirrorPods() mirror.Snapshot {
	pods, complete := a.ManagedPods()
	return mirror.Snapshot{Pods: pods, Complete: complete}
}

// ManagedPods are the pods as a kubelet's pod manager and status manager
// have them, for the mirror pods and the kubelet's pods API: each pod
// berth runs for what the sources serve, with the status the pod workers
// last wrote (none before its first sync), and whether every source
// delivered. It reads the merge store, the rollbacks and the status
// store, each under its own lock, so any goroutine may call it; Changed
// fires when its answer may have changed.
func (a *Loop) ManagedPods() (pods []*v1.Pod, complete bool) {
	complete = a.store.SourcesReady()
	desired := a.desiredPods()
	out := make([]*v1.Pod, 0, len(desired))
	for _, p := range desired {
		cp := *p
		cp.Status = v1.PodStatus{}
		if st := a.status.Get(p.UID); st != nil {
			cp.Status = st.Status
		}
		out = append(out, &cp)
	}
	return out, complete
}

// mirrorEvent records why a pod has no mirror pod among its events.
func (a *Loop) mirrorEvent(pod *v1.Pod, reason, message string) {
	a.events.Event(pod.UID, pod.Name, pod.Namespace, kuberuntime.EventWarning, reason, message)
}

// NodeState returns the node controller's state accessor (for the API's
// /node), nil when berth joins no cluster.
func (a *Loop) NodeState() func() *nodestatus.State {
	if a.node == nil {
		return nil
	}
	return a.node.State
}
