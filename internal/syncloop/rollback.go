package syncloop

import (
	"github.com/berth-agent/berth/internal/images"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/rollback"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// applyRollbacks carries out the rollbacks the lanes decided: the bad
// version's lane is told to stop and remove its pod, and the last Ready
// version gets a lane, which waits at the full-name gate until the bad one
// is terminated, as any new UID of a full name does. A rollback of a
// version the sources no longer serve (the manifest changed meanwhile) is
// dropped.
func (a *Loop) applyRollbacks() {
	for _, act := range a.rollback.Take() {
		if !a.served(act.Bad.UID) {
			a.rollback.Cancel(act.Bad)
			continue
		}
		// The bad version keeps running until the good one has its
		// images, as for any edit.
		a.workers.Replace(act.Bad.UID)
		a.add(act.Good, a.log.With("op", "ROLLBACK", "pod", act.Good.Name, "namespace", act.Good.Namespace, "uid", act.Good.UID, "failed_uid", act.Bad.UID))
	}
}

// removeRollback follows a source's removal of pod: the last Ready version
// running in its place stops too (unless a source serves that version
// itself), and once its manifest serves no pod of that full name (removed,
// renamed, or the pod dropped from it), what berth knew of its versions is
// forgotten, whatever other manifests serve the name (rollback.Key). An
// edit removes the old version too, but its manifest serves the new one.
func (a *Loop) removeRollback(pod *v1.Pod) {
	if run := a.rollback.Substitute(pod); run.UID != pod.UID && !a.desired(run.UID) {
		a.retire(run, a.log.With("op", "REMOVE", "pod", run.Name, "namespace", run.Namespace, "uid", run.UID))
	}
	k := rollback.KeyOf(pod)
	for _, p := range a.store.Pods() {
		if rollback.KeyOf(p) == k {
			return
		}
	}
	a.rollback.Forget(k)
}

// forgetRemovedTargets drops the records of keys no source serves, once
// every source has delivered.
func (a *Loop) forgetRemovedTargets() {
	if !a.store.SourcesReady() || !a.rollback.Remembers() {
		return
	}
	served := map[rollback.Key]bool{}
	for _, p := range a.store.Pods() {
		served[rollback.KeyOf(p)] = true
	}
	a.rollback.Retain(func(k rollback.Key) bool { return served[k] })
}

// served reports whether a source serves the pod of uid.
func (a *Loop) served(uid types.UID) bool {
	for _, p := range a.store.Pods() {
		if p.UID == uid {
			return true
		}
	}
	return false
}

// desiredPods are the pods berth runs for what the sources serve: each
// served pod, or the last Ready version running in its place.
func (a *Loop) desiredPods() []*v1.Pod {
	pods := a.store.Pods()
	for i, p := range pods {
		pods[i] = a.rollback.Substitute(p)
	}
	return pods
}

// keptImages are the images of every version of a pod berth may run: the
// sources' current versions, those rollbacks run in their place, and
// each manifest's last Ready version, a rollback's target. Image GC
// keeps them.
func (a *Loop) keptImages() []string {
	var out []string
	for _, p := range a.store.Pods() {
		out = append(out, images.PodImages(p)...)
		out = append(out, images.PodImages(a.rollback.Substitute(p))...)
	}
	return append(out, a.rollback.Images()...)
}

// Problems are the sources' manifest problems and the failed versions.
func (a *Loop) Problems() []podspec.Problem {
	return append(a.store.Problems(), a.rollback.Problems()...)
}
