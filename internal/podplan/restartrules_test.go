package podplan

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func restartRule(action v1.ContainerRestartRuleAction, op v1.ContainerRestartRuleOnExitCodesOperator, values ...int32) v1.ContainerRestartRule {
	return v1.ContainerRestartRule{Action: action, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: values}}
}

// TestContainerShouldRestart is upstream's ContainerShouldRestart table:
// rules first, in order, then the container's policy, then the pod's.
func TestContainerShouldRestart(t *testing.T) {
	pol := func(p v1.ContainerRestartPolicy) *v1.ContainerRestartPolicy { return &p }
	in42 := restartRule(v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleOnExitCodesOpIn, 42)
	notIn01 := restartRule(v1.ContainerRestartRuleActionRestartAllContainers, v1.ContainerRestartRuleOnExitCodesOpNotIn, 0, 1)
	tests := []struct {
		name   string
		pod    v1.RestartPolicy
		policy *v1.ContainerRestartPolicy
		rules  []v1.ContainerRestartRule
		exit   int32
		want   bool
	}{
		{"pod Always", v1.RestartPolicyAlways, nil, nil, 0, true},
		{"pod OnFailure, success", v1.RestartPolicyOnFailure, nil, nil, 0, false},
		{"pod OnFailure, failure", v1.RestartPolicyOnFailure, nil, nil, 3, true},
		{"pod Never", v1.RestartPolicyNever, nil, nil, 3, false},
		{"container Never beats pod Always", v1.RestartPolicyAlways, pol(v1.ContainerRestartPolicyNever), nil, 3, false},
		{"container Always beats pod Never", v1.RestartPolicyNever, pol(v1.ContainerRestartPolicyAlways), nil, 0, true},
		{"container OnFailure, success", v1.RestartPolicyAlways, pol(v1.ContainerRestartPolicyOnFailure), nil, 0, false},
		{"In rule matches", v1.RestartPolicyNever, pol(v1.ContainerRestartPolicyNever), []v1.ContainerRestartRule{in42}, 42, true},
		{"In rule misses, policy decides", v1.RestartPolicyNever, pol(v1.ContainerRestartPolicyNever), []v1.ContainerRestartRule{in42}, 41, false},
		{"NotIn rule matches", v1.RestartPolicyNever, pol(v1.ContainerRestartPolicyNever), []v1.ContainerRestartRule{notIn01}, 7, true},
		{"NotIn rule misses", v1.RestartPolicyNever, pol(v1.ContainerRestartPolicyNever), []v1.ContainerRestartRule{notIn01}, 1, false},
		{"rules ignored without a container policy", v1.RestartPolicyNever, nil, []v1.ContainerRestartRule{in42}, 42, false},
		{"rule without exitCodes never matches", v1.RestartPolicyNever, pol(v1.ContainerRestartPolicyNever), []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart}}, 42, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &v1.Container{Name: "c", RestartPolicy: tt.policy, RestartPolicyRules: tt.rules}
			if got := ContainerShouldRestart(c, &v1.PodSpec{RestartPolicy: tt.pod}, tt.exit); got != tt.want {
				t.Errorf("ContainerShouldRestart = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestFindRestartRuleFirstMatchWins: rules are evaluated in order.
func TestFindRestartRuleFirstMatchWins(t *testing.T) {
	never := v1.ContainerRestartPolicyNever
	c := &v1.Container{RestartPolicy: &never, RestartPolicyRules: []v1.ContainerRestartRule{
		restartRule(v1.ContainerRestartRuleActionRestartAllContainers, v1.ContainerRestartRuleOnExitCodesOpIn, 5),
		restartRule(v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleOnExitCodesOpNotIn, 0),
	}}
	for exit, want := range map[int32]v1.ContainerRestartRuleAction{5: v1.ContainerRestartRuleActionRestartAllContainers, 6: v1.ContainerRestartRuleActionRestart, 0: ""} {
		rule, ok := FindRestartRule(c, exit)
		if rule.Action != want || ok != (want != "") {
			t.Errorf("exit %d: rule %q (%v), want %q", exit, rule.Action, ok, want)
		}
	}
}

// withRules gives the named container of pod a restartPolicy and rules.
func withRules(pod *v1.Pod, name string, policy v1.ContainerRestartPolicy, rules ...v1.ContainerRestartRule) {
	for _, list := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				list[i].RestartPolicy = &policy
				list[i].RestartPolicyRules = rules
			}
		}
	}
}

// TestComputePodActionsRestartRules covers the decisions that rules and
// container policies change, and the RestartAllContainers reset order.
func TestComputePodActionsRestartRules(t *testing.T) {
	restartOn42 := restartRule(v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleOnExitCodesOpIn, 42)
	allOn88 := restartRule(v1.ContainerRestartRuleActionRestartAllContainers, v1.ContainerRestartRuleOnExitCodesOpIn, 88)
	sb := []*SandboxStatus{readySandbox()}
	tests := []struct {
		name     string
		pod      func() *v1.Pod
		status   func(pod *v1.Pod) *PodStatus
		start    []int
		reset    []string // IDs in removal order
		terminal bool
		failed   bool
	}{
		{
			name: "pod Never, exit code in a Restart rule: restarted",
			pod: func() *v1.Pod {
				p := actPod(v1.RestartPolicyNever, nil, []string{"a"})
				withRules(p, "a", v1.ContainerRestartPolicyNever, restartOn42)
				return p
			},
			status: func(p *v1.Pod) *PodStatus { return podStatusOf(sb, cs(p, "a", ContainerStateExited, 42)) },
			start:  []int{0},
		},
		{
			name: "pod Never, other exit code: pod fails",
			pod: func() *v1.Pod {
				p := actPod(v1.RestartPolicyNever, nil, []string{"a"})
				withRules(p, "a", v1.ContainerRestartPolicyNever, restartOn42)
				return p
			},
			status:   func(p *v1.Pod) *PodStatus { return podStatusOf(sb, cs(p, "a", ContainerStateExited, 1)) },
			terminal: true, failed: true,
		},
		{
			name: "pod Always, container Never: the exited one stays down, the other runs",
			pod: func() *v1.Pod {
				p := actPod(v1.RestartPolicyAlways, nil, []string{"a", "b"})
				withRules(p, "a", v1.ContainerRestartPolicyNever)
				return p
			},
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf(sb, cs(p, "a", ContainerStateExited, 1), cs(p, "b", ContainerStateRunning, 0))
			},
		},
		{
			name: "pod Never, failed init container with OnFailure: rerun",
			pod: func() *v1.Pod {
				p := actPod(v1.RestartPolicyNever, []string{"i0"}, []string{"a"})
				withRules(p, "i0", v1.ContainerRestartPolicyOnFailure)
				return p
			},
			status: func(p *v1.Pod) *PodStatus { return podStatusOf(sb, cs(p, "i0", ContainerStateExited, 1)) },
		},
		{
			name: "app exits with a RestartAllContainers code: everything removed, trigger last",
			pod: func() *v1.Pod {
				p := actPod(v1.RestartPolicyAlways, []string{"i0", "side"}, []string{"a", "b"})
				withRules(p, "side", v1.ContainerRestartPolicyAlways)
				withRules(p, "a", v1.ContainerRestartPolicyNever, allOn88)
				return p
			},
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf(sb, cs(p, "i0", ContainerStateExited, 0), cs(p, "side", ContainerStateRunning, 0),
					cs(p, "a", ContainerStateExited, 88), cs(p, "b", ContainerStateRunning, 0))
			},
			reset: []string{"b-id", "i0-id", "side-id", "a-id"},
		},
		{
			name: "same app with another exit code: its own policy (Never) keeps it down",
			pod: func() *v1.Pod {
				p := actPod(v1.RestartPolicyAlways, nil, []string{"a", "b"})
				withRules(p, "a", v1.ContainerRestartPolicyNever, allOn88)
				return p
			},
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf(sb, cs(p, "a", ContainerStateExited, 1), cs(p, "b", ContainerStateRunning, 0))
			},
		},
		{
			name: "a sidecar's exit triggers the reset too",
			pod: func() *v1.Pod {
				p := actPod(v1.RestartPolicyAlways, []string{"side"}, []string{"a"})
				withRules(p, "side", v1.ContainerRestartPolicyAlways, allOn88)
				return p
			},
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf(sb, cs(p, "side", ContainerStateExited, 88), cs(p, "a", ContainerStateRunning, 0))
			},
			reset: []string{"a-id", "side-id"},
		},
		{
			name: "a trigger in an old sandbox does not count",
			pod: func() *v1.Pod {
				p := actPod(v1.RestartPolicyAlways, nil, []string{"a"})
				withRules(p, "a", v1.ContainerRestartPolicyAlways, allOn88)
				return p
			},
			status: func(p *v1.Pod) *PodStatus {
				old := cs(p, "a", ContainerStateExited, 88)
				old.SandboxID, old.ID = "sb0", "old"
				return podStatusOf(sb, cs(p, "a", ContainerStateRunning, 0), old)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := tt.pod()
			a := ComputePodActions(pod, tt.status(pod), nil)
			if !reflect.DeepEqual(a.ContainersToStart, tt.start) {
				t.Errorf("start = %v, want %v", a.ContainersToStart, tt.start)
			}
			var reset []string
			for _, c := range a.ContainersToReset {
				reset = append(reset, c.ID)
			}
			if !reflect.DeepEqual(reset, tt.reset) {
				t.Errorf("reset = %v, want %v", reset, tt.reset)
			}
			if (a.ResetTrigger != nil) != (tt.reset != nil) {
				t.Errorf("trigger = %v, want one: %v", a.ResetTrigger, tt.reset != nil)
			}
			if a.Terminal != tt.terminal || a.Failed != tt.failed {
				t.Errorf("terminal, failed = %v, %v, want %v, %v", a.Terminal, a.Failed, tt.terminal, tt.failed)
			}
		})
	}
}
