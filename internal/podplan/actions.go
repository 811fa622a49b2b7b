package podplan

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/podenv"
)

// Kill reasons ComputePodActions gives the runtime manager's KillContainer,
// for its Killing event and logs.
const (
	KillReasonSpecChanged   = "SpecChanged"
	KillReasonUnknown       = "Unknown"
	KillReasonNotInSpec     = "NotInSpec"
	KillReasonLivenessProbe = "LivenessProbe"
	KillReasonStartupProbe  = "StartupProbe"
)

// ContainerHealth is what the probes found of running containers, by
// runtime container ID: the kubelet's liveness and startup result managers
// as computePodActions consults them. Implementations must be safe for
// concurrent use.
type ContainerHealth interface {
	// LivenessFailed reports whether the container failed its liveness
	// probe past the failure threshold.
	LivenessFailed(containerID string) bool
	// StartupFailed reports whether the container failed its startup
	// probe past the failure threshold.
	StartupFailed(containerID string) bool
}

// probeKill is the kill a failed probe asks for, or ok false: liveness
// first, then startup, as the kubelet checks them. health may be nil.
func probeKill(health ContainerHealth, c *v1.Container, cs *ContainerStatus, restart bool) (ContainerToKill, bool) {
	if health == nil {
		return ContainerToKill{}, false
	}
	var k ContainerToKill
	switch {
	case health.LivenessFailed(cs.ID):
		k = ContainerToKill{Name: c.Name, Status: cs, Reason: KillReasonLivenessProbe, Message: fmt.Sprintf("Container %s failed liveness probe", c.Name)}
	case health.StartupFailed(cs.ID):
		k = ContainerToKill{Name: c.Name, Status: cs, Reason: KillReasonStartupProbe, Message: fmt.Sprintf("Container %s failed startup probe", c.Name)}
	default:
		return ContainerToKill{}, false
	}
	if restart {
		k.Message += ", will be restarted"
	}
	return k, true
}

// ProbeGracePeriod is the failed probe's own terminationGracePeriodSeconds
// for a liveness or startup kill, which replaces the pod's as in the
// kubelet.
func ProbeGracePeriod(pod *v1.Pod, name, reason string) (int64, bool) {
	if pod == nil {
		return 0, false
	}
	c := podenv.SpecContainer(pod, name)
	if c == nil {
		return 0, false
	}
	var p *v1.Probe
	switch reason {
	case KillReasonLivenessProbe:
		p = c.LivenessProbe
	case KillReasonStartupProbe:
		p = c.StartupProbe
	}
	if p == nil || p.TerminationGracePeriodSeconds == nil {
		return 0, false
	}
	return *p.TerminationGracePeriodSeconds, true
}

// PodActions are the steps that bring a pod's runtime state to its spec, in
// the order the runtime manager's SyncPod takes them: kill the pod or the
// containers to kill, create the sandbox, start the next init container,
// start app containers.
type PodActions struct {
	// KillPod stops every container and the sandbox first: the sandbox is
	// being replaced, or nothing in the pod should run any more.
	KillPod bool
	// CreateSandbox creates sandbox attempt Attempt (after KillPod). The
	// first sandbox of a pod is attempt 0, each replacement one more than
	// the newest.
	CreateSandbox bool
	Attempt       uint32
	// SandboxID is the ready sandbox the containers run in, or, with
	// CreateSandbox, the one being replaced ("" for a new pod).
	SandboxID string
	// NextInitContainer is the init container to start now: init containers
	// run one at a time, in order, each after the previous exited 0, or for
	// a sidecar (an init container with restartPolicy Always) once it runs.
	NextInitContainer *v1.Container
	// SidecarsToStart are indexes into pod.Spec.InitContainers of sidecars
	// to restart after initialization: a sidecar that exited is restarted
	// whatever the pod's restart policy, before app containers start.
	SidecarsToStart []int
	// ContainersToStart are indexes into pod.Spec.Containers, in spec order.
	ContainersToStart []int
	// ContainersToReset, with ResetTrigger, are a RestartAllContainers reset
	// (KEP-5532): every container of the pod is killed and removed, the
	// sandbox kept, and nothing else is done in this sync.
	ContainersToReset []*ContainerStatus
	ResetTrigger      *ContainerStatus
	// ContainersToKill are killed before anything is started, ignored when
	// KillPod is set (which kills everything).
	ContainersToKill []ContainerToKill
	// ContainersToRemove are containers created but never started (state
	// CREATED): a berth killed between CreateContainer and StartContainer
	// left them. They are removed first, and every other decision is taken
	// as if they did not exist: a container that never ran is not a
	// restart, so it neither counts in restart counts and crash-loop
	// back-off nor stands for its name's last run. Ignored when KillPod is
	// set (KillPod removes them).
	ContainersToRemove []*ContainerStatus
	// Terminal is set when no container of the pod will ever run again under
	// its restart policy: every app container is done under Never or
	// OnFailure, or an init container failed under Never. The agent moves
	// such a pod to terminating once this sync's KillPod is done.
	Terminal bool
	// Failed is set with Terminal when the pod ends in failure (phase
	// Failed): an init container failed, or an app container did not exit
	// 0. Terminal without Failed is phase Succeeded.
	Failed bool
}

// ContainerToKill is a container to stop, with why.
type ContainerToKill struct {
	Name    string
	Status  *ContainerStatus
	Reason  string // one of the KillReason constants
	Message string
}

// ComputePodActions decides what brings the observed status to the pod's
// spec, with the kubelet's computePodActions semantics. It is a pure
// function of its arguments: no runtime, no clock (crash-loop back-off is
// SyncPod's), so every decision is testable from a table. A nil status is a
// pod the runtime knows nothing about. health (nil: no probes) names the
// running containers that failed a liveness or startup probe: they are
// killed, and restarted unless the restart policy is Never.
func ComputePodActions(pod *v1.Pod, status *PodStatus, health ContainerHealth) PodActions {
	if status == nil {
		status = &PodStatus{UID: pod.UID}
	}
	status, neverStarted := SplitNeverStarted(status)
	create, attempt, sandboxID := sandboxChanged(pod, status)
	// Replacing a sandbox kills the old pod first; a pod the runtime knows
	// nothing of has nothing to kill.
	hasRuntimeState := len(status.Sandboxes) > 0 || len(status.Containers) > 0
	a := PodActions{KillPod: create && hasRuntimeState, CreateSandbox: create, Attempt: attempt, SandboxID: sandboxID, ContainersToRemove: neverStarted}
	if create {
		return newSandboxActions(pod, status, a)
	}
	if trigger := restartAllTrigger(pod, status, sandboxID); trigger != nil {
		a.ResetTrigger = trigger
		a.ContainersToReset = containersToReset(pod, status)
		return a
	}
	a.ContainersToKill = append(a.ContainersToKill, strayContainers(pod, status, sandboxID)...)
	last, next, done := nextInitContainer(pod, status, sandboxID)
	if !done {
		return initActions(pod, a, last, next)
	}
	return appActions(pod, status, health, a)
}

// newSandboxActions completes a, whose sandbox is created (attempt
// a.Attempt, replacing a.SandboxID): initialization runs again from the
// start, or the app containers that are to run again start, unless the
// pod is finished.
func newSandboxActions(pod *v1.Pod, status *PodStatus, a PodActions) PodActions {
	// Under Never a pod whose sandbox died after its containers ran is
	// finished: its containers would not be restarted anyway.
	if !restartsOnFailure(pod) && a.Attempt != 0 && len(status.Containers) != 0 {
		a.CreateSandbox = false
		a.Terminal = true
		a.Failed = !allSucceeded(pod, status)
		return a
	}
	var start []int
	for i := range pod.Spec.Containers {
		if runsOnce(pod, &pod.Spec.Containers[i]) && succeeded(status.FindContainer(pod.Spec.Containers[i].Name)) {
			continue
		}
		start = append(start, i)
	}
	if len(start) == 0 {
		// OnFailure and every app container succeeded: nothing to rerun.
		if _, _, done := nextInitContainer(pod, status, a.SandboxID); done {
			a.CreateSandbox = false
			a.Terminal = true
			return a
		}
	}
	if len(pod.Spec.InitContainers) != 0 {
		// A new sandbox runs initialization again from the start.
		a.NextInitContainer = &pod.Spec.InitContainers[0]
		return a
	}
	a.ContainersToStart = start
	return a
}

// initActions completes a while initialization is not done: next (nil:
// none now) is the init container to start after last, unless last failed
// for good, which ends the pod.
func initActions(pod *v1.Pod, a PodActions, last *ContainerStatus, next *v1.Container) PodActions {
	if next == nil {
		return a
	}
	if last != nil && initFailed(last) && !isSidecar(next) && !initRestarts(pod, next, last) {
		a.KillPod = true
		a.Terminal = true
		a.Failed = true
		return a
	}
	if last != nil && last.State == ContainerStateUnknown {
		a.ContainersToKill = append(a.ContainersToKill, ContainerToKill{
			Name: next.Name, Status: last, Reason: KillReasonUnknown,
			Message: fmt.Sprintf("Init container is in %q state, try killing it before restart", last.State),
		})
	}
	a.NextInitContainer = next
	return a
}

// appActions completes a once initialization is done: the sidecars and
// app containers to restart or kill, or, when nothing is left to run, the
// pod's end.
func appActions(pod *v1.Pod, status *PodStatus, health ContainerHealth, a PodActions) PodActions {
	sidecarStarts, sidecarKills := sidecarActions(pod, status, health)
	a.ContainersToKill = append(a.ContainersToKill, sidecarKills...)

	keep := 0
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		cs := status.FindContainer(c.Name)
		if cs == nil || cs.State != ContainerStateRunning {
			if shouldRestart(pod, c, cs) {
				a.ContainersToStart = append(a.ContainersToStart, i)
				if cs != nil && cs.State == ContainerStateUnknown {
					a.ContainersToKill = append(a.ContainersToKill, ContainerToKill{
						Name: c.Name, Status: cs, Reason: KillReasonUnknown,
						Message: fmt.Sprintf("Container is in %q state, try killing it before restart", cs.State),
					})
				}
			}
			continue
		}
		if cs.Hash == criconfig.HashContainer(c) {
			if k, ok := probeKill(health, c, cs, restartsOnFailureOf(pod, c)); ok {
				a.ContainersToKill = append(a.ContainersToKill, k)
				if restartsOnFailureOf(pod, c) {
					a.ContainersToStart = append(a.ContainersToStart, i)
				}
				continue
			}
			keep++
			continue
		}
		// A changed definition is restarted whatever the restart policy:
		// the container was running, so it has not finished its job.
		a.ContainersToStart = append(a.ContainersToStart, i)
		a.ContainersToKill = append(a.ContainersToKill, ContainerToKill{
			Name: c.Name, Status: cs, Reason: KillReasonSpecChanged,
			Message: fmt.Sprintf("Container %s definition changed, will be restarted", c.Name),
		})
	}
	if keep == 0 && len(a.ContainersToStart) == 0 {
		// Sidecars never keep a pod alive: they are killed with it.
		a.KillPod = true
		a.Terminal = true
		a.Failed = !allSucceeded(pod, status)
		a.ContainersToKill = nil
		return a
	}
	a.SidecarsToStart = sidecarStarts
	return a
}

// SplitNeverStarted separates the containers that were created but never
// started from the rest: status itself when there are none, else a copy
// without them, and them. A CREATED container may have a start in flight
// inside the runtime; the caller removes it, and the runtime refuses while
// the start is in flight, which keeps the caller from starting a second
// copy beside it.
func SplitNeverStarted(status *PodStatus) (*PodStatus, []*ContainerStatus) {
	var never []*ContainerStatus
	for _, c := range status.Containers {
		if neverStarted(c) {
			never = append(never, c)
		}
	}
	if len(never) == 0 {
		return status, nil
	}
	started := *status
	started.Containers = make([]*ContainerStatus, 0, len(status.Containers)-len(never))
	for _, c := range status.Containers {
		if !neverStarted(c) {
			started.Containers = append(started.Containers, c)
		}
	}
	return &started, never
}

// startErrorReason is the reason containerd (1.6 to 2.x) records on a
// container whose StartContainer failed. abandonedStartCauses are what its
// message then says when the start was cut short because the caller went
// away (berth killed mid-StartContainer): the request context's error, or
// the shim's start process killed by that context, as the crash test saw
// ("failed to create containerd task: failed to start shim: start failed:
// : signal: killed").
const startErrorReason = "StartError"

var abandonedStartCauses = []string{"context canceled", "signal: killed"}

// neverStarted reports whether c never ran: created and not (yet) started,
// or exited without ever starting because its start was abandoned when the
// berth that asked for it was killed mid-StartContainer. Neither is a
// restart. A start that failed on its own (a missing executable, a bad
// mount) is a real attempt and counts, as with the kubelet, so a broken
// container still backs off.
func neverStarted(c *ContainerStatus) bool {
	switch c.State {
	case ContainerStateCreated:
		return true
	case ContainerStateExited:
		if !c.StartedAt.IsZero() || c.Reason != startErrorReason {
			return false
		}
		for _, cause := range abandonedStartCauses {
			if strings.Contains(c.Message, cause) {
				return true
			}
		}
	}
	return false
}

// isSidecar reports whether an init container is a sidecar: restartPolicy
// Always makes it run beside the app containers instead of to completion.
func isSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// sidecarActions are, once initialization is done, the sidecars to restart
// (exited, never started, or unknown, whatever the pod's restart policy) and
// to kill (unknown state, running with a changed spec, or failed a liveness
// or startup probe, then restarted).
func sidecarActions(pod *v1.Pod, status *PodStatus, health ContainerHealth) (starts []int, kills []ContainerToKill) {
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if !isSidecar(c) {
			continue
		}
		cs := status.FindContainer(c.Name)
		switch {
		case cs == nil || cs.State == ContainerStateExited || cs.State == ContainerStateCreated:
			if pod.DeletionTimestamp == nil {
				starts = append(starts, i)
			}
		case cs.State == ContainerStateUnknown:
			starts = append(starts, i)
			kills = append(kills, ContainerToKill{
				Name: c.Name, Status: cs, Reason: KillReasonUnknown,
				Message: fmt.Sprintf("Init container is in %q state, try killing it before restart", cs.State),
			})
		case cs.Hash != criconfig.HashContainer(c):
			starts = append(starts, i)
			kills = append(kills, ContainerToKill{
				Name: c.Name, Status: cs, Reason: KillReasonSpecChanged,
				Message: fmt.Sprintf("Init container %s definition changed, will be restarted", c.Name),
			})
		case cs.State == ContainerStateRunning:
			// A sidecar restarts whatever the pod's restart policy.
			if k, ok := probeKill(health, c, cs, true); ok {
				starts = append(starts, i)
				kills = append(kills, k)
			}
		}
	}
	return starts, kills
}

// sandboxChanged reports whether the pod needs a new sandbox, the attempt
// number of the sandbox to use or create, and the ID of the newest sandbox:
// none yet, more than one ready, the newest not ready, its network mode
// differs from the spec's, or it has no IP on the pod network.
func sandboxChanged(pod *v1.Pod, status *PodStatus) (bool, uint32, string) {
	if len(status.Sandboxes) == 0 {
		return true, 0, ""
	}
	newest := status.Sandboxes[0]
	ready := 0
	for _, s := range status.Sandboxes {
		if s.State == SandboxStateReady {
			ready++
		}
	}
	switch {
	case ready > 1,
		newest.State != SandboxStateReady,
		newest.HostNetwork != pod.Spec.HostNetwork,
		!pod.Spec.HostNetwork && newest.IP == "":
		return true, newest.Attempt + 1, newest.ID
	}
	return false, newest.Attempt, newest.ID
}

// strayContainers are running containers of the current sandbox whose names
// the spec does not have: left by another berth version or started by hand
// with berth's labels. The kubelet never sees these (its specs cannot lose
// containers); berth adopts runtimes it did not start, so it must.
func strayContainers(pod *v1.Pod, status *PodStatus, sandboxID string) []ContainerToKill {
	var out []ContainerToKill
	seen := map[string]bool{}
	for _, cs := range status.Containers {
		if cs.SandboxID != sandboxID || cs.State != ContainerStateRunning || seen[cs.ID] {
			continue
		}
		seen[cs.ID] = true
		if podenv.SpecContainer(pod, cs.Name) != nil {
			continue
		}
		out = append(out, ContainerToKill{
			Name: cs.Name, Status: cs, Reason: KillReasonNotInSpec,
			Message: fmt.Sprintf("Container %s is not in the pod spec", cs.Name),
		})
	}
	return out
}

// nextInitContainer finds where initialization stands: done, or the next
// init container to run, with last the status of a failed (or never started)
// init container that next restarts. Init containers run in order: a regular
// one must exit 0 before the next starts, a sidecar must be running. Only
// the statuses in the current sandbox count: a new sandbox initializes from
// the start, as the kubelet does by purging the old init containers. An app
// container created in the sandbox means initialization finished earlier,
// even if the runtime has since removed the init containers.
func nextInitContainer(pod *v1.Pod, status *PodStatus, sandboxID string) (last *ContainerStatus, next *v1.Container, done bool) {
	inits := pod.Spec.InitContainers
	if len(inits) == 0 {
		return nil, nil, true
	}
	for _, c := range pod.Spec.Containers {
		if findInSandbox(status, c.Name, sandboxID) != nil {
			return nil, nil, true
		}
	}
	for i := range inits {
		c := &inits[i]
		cs := findInSandbox(status, c.Name, sandboxID)
		switch {
		case cs == nil:
			return nil, c, false
		case isSidecar(c):
			if cs.State != ContainerStateRunning {
				return cs, c, false
			}
		case cs.State == ContainerStateRunning:
			return nil, nil, false
		case cs.State == ContainerStateExited && !initFailed(cs):
		default:
			// Failed, unknown, or created but never started (its start
			// failed): run it again, or fail the pod.
			return cs, c, false
		}
	}
	return nil, nil, true
}

// findInSandbox is the newest status of the named container in one sandbox.
func findInSandbox(status *PodStatus, name, sandboxID string) *ContainerStatus {
	for _, c := range status.Containers {
		if c.Name == name && c.SandboxID == sandboxID {
			return c
		}
	}
	return nil
}

// initFailed reports whether an init container's run failed: a non-zero
// exit, an OOM kill, or a state nobody knows.
func initFailed(cs *ContainerStatus) bool {
	switch cs.State {
	case ContainerStateUnknown:
		return true
	case ContainerStateExited:
		return cs.ExitCode != 0 || cs.Reason == "OOMKilled"
	}
	return false
}

// restartsOnFailure is true unless the restart policy is Never.
func restartsOnFailure(pod *v1.Pod) bool {
	return pod.Spec.RestartPolicy != v1.RestartPolicyNever
}

// succeeded reports whether a container's newest run exited 0.
func succeeded(cs *ContainerStatus) bool {
	return cs != nil && cs.State == ContainerStateExited && cs.ExitCode == 0
}

// allSucceeded reports whether every app container's newest run exited 0.
func allSucceeded(pod *v1.Pod, status *PodStatus) bool {
	for _, c := range pod.Spec.Containers {
		if !succeeded(status.FindContainer(c.Name)) {
			return false
		}
	}
	return true
}

// shouldRestart is the kubelet's ShouldContainerBeRestarted for a container
// that is not running: never started (or its record is gone), created but
// not started, or in an unknown state always start; an exited one per its
// restart rules and policies (ContainerShouldRestart). A pod being deleted
// starts nothing.
func shouldRestart(pod *v1.Pod, c *v1.Container, cs *ContainerStatus) bool {
	if pod.DeletionTimestamp != nil {
		return false
	}
	if cs == nil {
		return true
	}
	switch cs.State {
	case ContainerStateRunning:
		return false
	case ContainerStateUnknown, ContainerStateCreated:
		return true
	}
	return ContainerShouldRestart(c, &pod.Spec, cs.ExitCode)
}

// initRestarts is whether a failed init container runs again or fails the
// pod: by its rules and policies when it exited, by its restartPolicy
// (else the pod's) when its state is unknown and there is no exit code to
// match rules against, as the kubelet decides.
func initRestarts(pod *v1.Pod, c *v1.Container, cs *ContainerStatus) bool {
	if cs.State == ContainerStateExited {
		return ContainerShouldRestart(c, &pod.Spec, cs.ExitCode)
	}
	return restartsOnFailureOf(pod, c)
}
