package podworkers

import (
	"fmt"
	"strings"

	"github.com/berth-agent/berth/internal/podplan"
)

// Terminated is the full-name exclusivity rule (docs/architecture.md,
// Full-name exclusivity): a pod UID is terminated only when nothing of it can run any
// more, whatever berth was doing when it was last killed. Every sandbox must
// be stopped (NOTREADY) or removed, and every container removed or EXITED
// (with its sandbox stopped, which the first half already demands). A
// CREATED container counts as running: its StartContainer may still be in
// flight inside the runtime, sent by a berth that was killed right after.
// RUNNING and UNKNOWN count as running too. It is a pure function of the
// observed status, so it decides the same after any crash.
//
// When the pod is not terminated, reason names every object that still
// holds it, for the waiting pod's status and the logs.
func Terminated(status *podplan.PodStatus) (bool, string) {
	if status == nil {
		return true, ""
	}
	var holds []string
	for _, s := range status.Sandboxes {
		if s.State != podplan.SandboxStateNotReady {
			holds = append(holds, fmt.Sprintf("sandbox %s in state %s", shortID(s.ID), stateName(string(s.State))))
		}
	}
	for _, c := range status.Containers {
		if c.State != podplan.ContainerStateExited {
			holds = append(holds, fmt.Sprintf("container %s (%s) in state %s", c.Name, shortID(c.ID), stateName(string(c.State))))
		}
	}
	if len(holds) == 0 {
		return true, ""
	}
	return false, strings.Join(holds, ", ")
}

// stateName renders a runtime state the way crictl prints it (CREATED,
// NOTREADY), which is what an operator will compare it with; an empty state
// is one nobody reported, hence unknown.
func stateName(s string) string {
	if s == "" {
		return "UNKNOWN"
	}
	return strings.ToUpper(s)
}

// shortID is the 13-character prefix crictl shows of a runtime ID.
func shortID(id string) string {
	if len(id) > 13 {
		return id[:13]
	}
	return id
}
