package kuberuntime

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/podplan"
)

// restartAllKey is the crash-loop back-off key of a pod's
// RestartAllContainers resets: the containers start afresh after a reset
// (no status left to back off from), so the reset itself backs off, or a
// container whose exit asks for it would loop as fast as it can fail.
const restartAllKey = "<RestartAllContainers>"

// resetContainers carries out a RestartAllContainers reset (KEP-5532): it
// kills whatever still runs without a grace period (the kubelet's
// in-place restart gives none) and removes every container of the pod, so
// the next sync finds an empty sandbox and initializes the pod again from
// its first init container. Restart counts carry on from the containers'
// log files (nextRestartCount). Resets back off like a crash loop.
func (m *Manager) resetContainers(ctx context.Context, pod *v1.Pod, trigger *podplan.ContainerStatus, reset []*podplan.ContainerStatus) SyncResult {
	var result SyncResult
	key := crashKey(pod.UID, restartAllKey)
	if remaining := m.crashBackoff.Remaining(key, trigger.FinishedAt); remaining > 0 {
		msg := fmt.Sprintf("back-off %s restarting all containers of pod %s after container %s exited with code %d",
			m.crashBackoff.Delay(key), podRef(pod), trigger.Name, trigger.ExitCode)
		result.add(ActionStartContainer, trigger.Name, &SyncError{Reason: ReasonCrashLoopBackOff, Message: msg}, remaining)
		return result
	}
	m.crashBackoff.NextWithin(key, m.podCrashLoopCeiling(pod))
	m.event(pod, EventNormal, "RestartAllContainers",
		fmt.Sprintf("Container %s exited with code %d and a RestartAllContainers rule: restarting all containers in place", trigger.Name, trigger.ExitCode))
	zero := int64(0)
	for _, cs := range reset {
		if cs.State == podplan.ContainerStateRunning || cs.State == podplan.ContainerStateUnknown {
			err := m.KillContainer(ctx, pod, cs, podplan.KillReasonRestartAllContainers,
				fmt.Sprintf("Container %s is restarted with all containers of the pod", cs.Name), &zero)
			result.add(ActionKillContainer, cs.Name, asSyncError(err, ReasonKillContainerError), 0)
			if err != nil {
				return result
			}
		}
		err := m.removeKeepingLog(ctx, cs)
		result.add(ActionRemoveContainer, cs.Name, err, 0)
		if err != nil {
			return result
		}
	}
	return result
}

// removeKeepingLog removes one berth-owned container from the runtime but
// keeps its log file, unlike RemoveContainer: a reset is no crash loop to
// keep off the disk, `berth logs --previous` should still show the run
// that asked for the reset, and the next start numbers its log after it.
func (m *Manager) removeKeepingLog(ctx context.Context, cs *podplan.ContainerStatus) error {
	if !podplan.Owned(cs.Labels) {
		return fmt.Errorf("refusing to remove container %q (%s): it is not managed by berth", cs.Name, cs.ID)
	}
	if err := m.runtime.RemoveContainer(ctx, cs.ID); err != nil && !isNotFound(err) {
		return &SyncError{Reason: ReasonKillContainerError, Message: fmt.Sprintf("remove container %q (%s): %v", cs.Name, cs.ID, err), Err: err}
	}
	m.Forget([]string{cs.ID}, nil)
	return nil
}
