package podplan

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

// KillReasonRestartAllContainers is the kill reason of the containers a
// RestartAllContainers rule takes down.
const KillReasonRestartAllContainers = "RestartAllContainers"

// FindRestartRule is the first of c's restartPolicyRules that matches an
// exit with exitCode, in order, as the kubelet evaluates them (KEP-5307):
// In matches when the code is one of the values, NotIn when it is none of
// them; a rule without exitCodes never matches.
func FindRestartRule(c *v1.Container, exitCode int32) (v1.ContainerRestartRule, bool) {
	for _, rule := range c.RestartPolicyRules {
		if rule.ExitCodes == nil {
			continue
		}
		in := slices.Contains(rule.ExitCodes.Values, exitCode)
		switch rule.ExitCodes.Operator {
		case v1.ContainerRestartRuleOnExitCodesOpIn:
			if in {
				return rule, true
			}
		case v1.ContainerRestartRuleOnExitCodesOpNotIn:
			if !in {
				return rule, true
			}
		}
	}
	return v1.ContainerRestartRule{}, false
}

// ContainerShouldRestart reports whether a container that exited with
// exitCode runs again, the kubelet's ContainerShouldRestart with the
// ContainerRestartRules (KEP-5307) and RestartAllContainersOnContainerExits
// (KEP-5532) gates on, as in Kubernetes 1.36: a matching rule restarts it
// (RestartAllContainers restarts the whole pod, this container included);
// otherwise the container's own restartPolicy decides, and without one the
// pod's. A sidecar (an init container with restartPolicy Always) therefore
// always restarts.
func ContainerShouldRestart(c *v1.Container, spec *v1.PodSpec, exitCode int32) bool {
	if c.RestartPolicy != nil {
		if rule, ok := FindRestartRule(c, exitCode); ok {
			switch rule.Action {
			case v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleActionRestartAllContainers:
				return true
			}
		}
		switch *c.RestartPolicy {
		case v1.ContainerRestartPolicyAlways:
			return true
		case v1.ContainerRestartPolicyOnFailure:
			return exitCode != 0
		case v1.ContainerRestartPolicyNever:
			return false
		}
	}
	switch spec.RestartPolicy {
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	case v1.RestartPolicyNever:
		return false
	}
	return true
}

// restartsOnFailureOf is whether a container that failed without an exit
// code to match rules against (its state is unknown, or a probe killed it
// while running) is restarted: its own restartPolicy unless Never, without
// one the pod's, as the kubelet decides with ContainerRestartRules on.
func restartsOnFailureOf(pod *v1.Pod, c *v1.Container) bool {
	if c.RestartPolicy != nil {
		return *c.RestartPolicy != v1.ContainerRestartPolicyNever
	}
	return restartsOnFailure(pod)
}

// runsOnce is whether a container that exited 0 stays done when the pod
// gets a new sandbox: OnFailure, its own or else the pod's.
func runsOnce(pod *v1.Pod, c *v1.Container) bool {
	if c.RestartPolicy != nil {
		return *c.RestartPolicy == v1.ContainerRestartPolicyOnFailure
	}
	return pod.Spec.RestartPolicy == v1.RestartPolicyOnFailure
}

// restartAllTrigger is the newest exit in the current sandbox of a container
// (init, sidecar or app) whose restartPolicyRules match it with action
// RestartAllContainers, or nil (KEP-5532). The trigger lives in the
// runtime's state only: the runtime manager's reset removes the triggering
// containers last, so a berth killed halfway through a reset finds the
// trigger again and finishes it. A pod being deleted restarts nothing.
func restartAllTrigger(pod *v1.Pod, status *PodStatus, sandboxID string) *ContainerStatus {
	if pod.DeletionTimestamp != nil || sandboxID == "" {
		return nil
	}
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := &list[i]
			cs := findInSandbox(status, c.Name, sandboxID)
			if cs == nil || cs.State != ContainerStateExited {
				continue
			}
			if rule, ok := FindRestartRule(c, cs.ExitCode); ok && rule.Action == v1.ContainerRestartRuleActionRestartAllContainers {
				return cs
			}
		}
	}
	return nil
}

// containersToReset are, for a RestartAllContainers reset, every container
// of the pod's spec the runtime still has, in the order the kubelet removes
// them: the others first (app, then init containers), the ones whose exit
// triggered the reset last. The sandbox stays, so the pod keeps its IP and
// volumes and reruns its init containers in it.
func containersToReset(pod *v1.Pod, status *PodStatus) []*ContainerStatus {
	var sources, targets []*ContainerStatus
	collect := func(list []v1.Container, srcs, tgts *[]*ContainerStatus) {
		for i := range list {
			c := &list[i]
			for _, cs := range status.Containers {
				if cs.Name != c.Name {
					continue
				}
				if rule, ok := FindRestartRule(c, cs.ExitCode); ok && cs.State == ContainerStateExited && rule.Action == v1.ContainerRestartRuleActionRestartAllContainers {
					*srcs = append(*srcs, cs)
				} else {
					*tgts = append(*tgts, cs)
				}
			}
		}
	}
	var initSources, initTargets []*ContainerStatus
	collect(pod.Spec.Containers, &sources, &targets)
	collect(pod.Spec.InitContainers, &initSources, &initTargets)
	out := append(targets, initTargets...)
	out = append(out, sources...)
	return append(out, initSources...)
}
