package cri

import (
	"context"
	"fmt"
)

// PlanSandboxGC decides which sandboxes to remove once the containers in
// removedContainers are gone, with the kubelet's evictSandboxes semantics:
// a sandbox is active while it is ready or still holds a container, and
// only inactive ones are removed. A pod that still exists keeps its newest
// sandbox whatever its state (the pod worker decides whether to replace
// it); a deleted pod, once all sources are ready, loses all of them. Only
// berth-owned sandboxes are ever planned.
func PlanSandboxGC(in GCInput, removedContainers map[string]bool) []GCRemoval {
	var out []GCRemoval
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
			if !owned(s.Labels) || s.State == SandboxStateReady || holds[s.ID] || (i == 0 && !deleted) {
				continue
			}
			reason := GCReasonOldSandbox
			if deleted {
				reason = GCReasonDeletedPod
			}
			out = append(out, GCRemoval{Kind: GCKindSandbox, UID: uid, Pod: p.Name, Namespace: p.Namespace, ID: s.ID, Reason: reason, PodExists: !deleted})
		}
	}
	return out
}

// removeDeadSandbox removes a not-ready sandbox that a relist saw. Like
// removeDeadContainer it reports false without a runtime call when the
// status cache has forgotten it (removed since), and false when the
// runtime no longer knows it.
func (m *Manager) removeDeadSandbox(ctx context.Context, id string) (bool, error) {
	if !m.statusCache.knowsSandbox(id) {
		return false, nil
	}
	err := m.runtime.RemovePodSandbox(ctx, id)
	if err != nil && !isNotFound(err) {
		return false, fmt.Errorf("remove sandbox %q: %w", id, err)
	}
	m.statusCache.forget(nil, []string{id})
	return err == nil, nil
}

// knowsSandbox reports whether the sandbox is cached, that is, seen by the
// latest relist and not removed since.
func (c *statusCache) knowsSandbox(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.sandboxes[id]
	return ok
}
