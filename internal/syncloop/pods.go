package syncloop

import (
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/mirror"
	"github.com/berth-agent/berth/internal/podevents"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podstatus"
	"github.com/berth-agent/berth/internal/podworkers"
	"github.com/berth-agent/berth/internal/store"
)

// Pods returns every pod berth knows, with status, sorted by namespace and
// name: the pods it runs, and the manifests it rejected (as Failed pods whose
// reason and message say why), so nothing is silently dropped. A pod whose
// manifest is currently broken (its last good version keeps running) shows
// it in podstatus.ConditionManifestValid.
func (a *Loop) Pods() []*v1.Pod {
	pods := a.status.List()
	problems := a.store.Problems()
	now := a.cfg.Clock.Now()
	byName := make(map[string]bool, len(pods))
	for _, p := range pods {
		byName[podspec.JoinFullName(p.Name, p.Namespace)] = true
	}
	for _, prob := range problems {
		if prob.Name == "" {
			continue
		}
		fn := podspec.JoinFullName(prob.Name, prob.Namespace)
		if byName[fn] {
			continue
		}
		byName[fn] = true
		pods = append(pods, rejectedPod(prob, a.cfg.NodeName, now))
	}
	ix := indexProblems(problems)
	pulls := failedPulls(pods)
	for i, p := range pods {
		pods[i] = a.decorate(p, ix, pulls, now)
	}
	store.SortPods(pods)
	return pods
}

// failedPulls are, by full name, the PulledBeforeStop conditions of new
// versions whose images could not be pulled while an old version runs.
func failedPulls(pods []*v1.Pod) map[string]v1.PodCondition {
	var out map[string]v1.PodCondition
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type == podworkers.ConditionPulledBeforeStop && c.Status == v1.ConditionFalse {
				if out == nil {
					out = map[string]v1.PodCondition{}
				}
				c.Message = fmt.Sprintf("new version (uid %s) cannot start: %s", p.UID, c.Message)
				out[podspec.JoinFullName(p.Name, p.Namespace)] = c
			}
		}
	}
	return out
}

// decorate returns a copy of p as readers see it: typed, with its
// manifest's problems, a rollback and a new version's failed pull (pulls,
// by full name: the old version that runs on shows it too) as
// conditions. The status store's pods are shared with every reader, so
// they are never written into.
func (a *Loop) decorate(p *v1.Pod, ix problemIndex, pulls map[string]v1.PodCondition, now time.Time) *v1.Pod {
	cp := *p
	cp.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	if probs := ix.of(p); len(probs) > 0 {
		cp.Status.Conditions = setCondition(p.Status.Conditions, podstatus.ManifestCondition(probs, now))
	}
	if c, ok := pulls[podspec.JoinFullName(p.Name, p.Namespace)]; ok && !hasCondition(p, podworkers.ConditionPulledBeforeStop) {
		cp.Status.Conditions = setCondition(cp.Status.Conditions, c)
	}
	if c, ok := a.rollback.Condition(p); ok {
		cp.Status.Conditions = setCondition(cp.Status.Conditions, c)
	}
	if a.mirror != nil {
		if c, ok := mirror.Condition(p, now); ok {
			cp.Status.Conditions = setCondition(cp.Status.Conditions, c)
		}
	}
	return &cp
}

// Pod returns the pod namespace/name, or nil: of an old UID still running
// and its replacement, which share the name, the one that is not Pending
// (its logs are there), else the first Pods lists. It copies and sorts
// only that name's pods: `berth logs -f` asks every 100 ms, whatever the
// number of pods.
func (a *Loop) Pod(namespace, name string) *v1.Pod {
	pods := a.status.Named(namespace, name)
	problems := a.store.Problems()
	now := a.cfg.Clock.Now()
	if len(pods) == 0 {
		for _, prob := range problems {
			if prob.Name == name && prob.Namespace == namespace {
				pods = append(pods, rejectedPod(prob, a.cfg.NodeName, now))
				break
			}
		}
	}
	if len(pods) == 0 {
		return nil
	}
	store.SortPods(pods)
	first := pods[0]
	for _, p := range pods {
		if p.Status.Phase != v1.PodPending {
			first = p
			break
		}
	}
	return a.decorate(first, indexProblems(problems), failedPulls(pods), now)
}

// hasCondition reports whether p's status has a condition of type typ.
func hasCondition(p *v1.Pod, typ v1.PodConditionType) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == typ {
			return true
		}
	}
	return false
}

// Events returns the recent events of the pod uid, oldest first.
func (a *Loop) Events(uid types.UID) []podevents.Event { return a.events.List(uid) }

// rejectedPod shows a manifest berth refused as a pod that never started.
func rejectedPod(prob podspec.Problem, nodeName string, now time.Time) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:        prob.Name,
			Namespace:   prob.Namespace,
			Annotations: map[string]string{podspec.AnnotationSource: prob.Source, podspec.AnnotationOrigin: prob.Origin},
		},
		Spec: v1.PodSpec{NodeName: nodeName},
		Status: v1.PodStatus{
			Phase:   v1.PodFailed,
			Reason:  prob.Reason,
			Message: prob.Error(),
			Conditions: []v1.PodCondition{{
				Type: v1.PodReady, Status: v1.ConditionFalse, Reason: prob.Reason, Message: prob.Error(),
				LastTransitionTime: metav1.NewTime(now),
			}},
		},
	}
}
