package gc

import (
	"context"
	"fmt"

	"github.com/berth-agent/berth/internal/podplan"
)

// PlanSandboxGC decides which sandboxes to remove once the containers in
// removedContainers are gone, with the kubelet's evictSandboxes semantics:
// a sandbox is active while it is ready or still holds a container, and
// only inactive ones are removed. A pod that still exists keeps its newest
// sandbox whatever its state (the pod worker decides whether to replace
// it); a deleted pod, once all sources are ready, loses all of them. Only
// berth-owned sandboxes are ever planned.
func PlanSandboxes(in Input, removedContainers map[string]bool) []Removal {
	var out []Removal
	for _, uid := range sortedUIDs(in.Pods) {
		p := in.Pods[uid]
		deleted := in.AllSourcesReady && in.PodDeleted != nil && in.PodDeleted(uid)
		holds := map[string]bool{}
		for _, c := range p.Containers {
			if !removedContainers[c.ID] {
				holds[c.SandboxID] = true
			}
		}
		// p.Sandboxes is newest first; remove from the oldest.
		for i := len(p.Sandboxes) - 1; i >= 0; i-- {
			s := p.Sandboxes[i]
			if !podplan.Owned(s.Labels) || s.State == podplan.SandboxStateReady || holds[s.ID] || (i == 0 && !deleted) {
				continue
			}
			reason := ReasonOldSandbox
			if deleted {
				reason = ReasonDeletedPod
			}
			out = append(out, Removal{Kind: KindSandbox, UID: uid, Pod: p.Name, Namespace: p.Namespace, ID: s.ID, Reason: reason, PodExists: !deleted})
		}
	}
	return out
}

// removeDeadSandbox removes a not-ready sandbox that a relist saw. Like
// removeDeadContainer it reports false without a runtime call when the
// status cache has forgotten it (removed since), and false when the
// runtime no longer knows it.
func (c *Collector) removeDeadSandbox(ctx context.Context, id string) (bool, error) {
	if !c.manager.KnowsSandbox(id) {
		return false, nil
	}
	err := c.runtime.RemovePodSandbox(ctx, id)
	if err != nil && !isNotFound(err) {
		return false, fmt.Errorf("remove sandbox %q: %w", id, err)
	}
	c.manager.Forget(nil, []string{id})
	return err == nil, nil
}
