package podrules

import (
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// TestValidateContainerRestart checks the upstream rules of 1.36 one by
// one, with the messages the API server gives.
func TestValidateContainerRestart(t *testing.T) {
	policy := func(p v1.ContainerRestartPolicy) *v1.ContainerRestartPolicy { return &p }
	rule := func(action v1.ContainerRestartRuleAction, op v1.ContainerRestartRuleOnExitCodesOperator, values ...int32) v1.ContainerRestartRule {
		return v1.ContainerRestartRule{Action: action, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: values}}
	}
	many := func(n int) []int32 {
		out := make([]int32, n)
		for i := range out {
			out[i] = int32(i)
		}
		return out
	}
	tests := []struct {
		name  string
		init  bool
		c     v1.Container
		wants []string // "field: message fragment"
	}{
		{name: "nothing set", c: v1.Container{}},
		{name: "policy alone", c: v1.Container{RestartPolicy: policy(v1.ContainerRestartPolicyOnFailure)}},
		{name: "init sidecar with RestartAllContainers", init: true, c: v1.Container{
			RestartPolicy:      policy(v1.ContainerRestartPolicyAlways),
			RestartPolicyRules: []v1.ContainerRestartRule{rule(v1.ContainerRestartRuleActionRestartAllContainers, v1.ContainerRestartRuleOnExitCodesOpIn, 3)},
		}},
		{name: "rules without a policy", c: v1.Container{
			RestartPolicyRules: []v1.ContainerRestartRule{rule(v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleOnExitCodesOpIn, 1)},
		}, wants: []string{"c.restartPolicy: Required value: must specify restartPolicy when restart rules are used"}},
		{name: "init rules without a policy", init: true, c: v1.Container{
			RestartPolicyRules: []v1.ContainerRestartRule{rule(v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleOnExitCodesOpIn, 1)},
		}, wants: []string{"c.restartPolicy: Required value"}},
		{name: "unknown policy", c: v1.Container{RestartPolicy: policy("Sometimes")},
			wants: []string{`c.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "Never", "OnFailure"`}},
		{name: "unknown action and operator", c: v1.Container{
			RestartPolicy:      policy(v1.ContainerRestartPolicyNever),
			RestartPolicyRules: []v1.ContainerRestartRule{rule("Reboot", "Maybe", 1)},
		}, wants: []string{
			`c.restartPolicyRules[0].action: Unsupported value: "Reboot": supported values: "Restart", "RestartAllContainers"`,
			`c.restartPolicyRules[0].exitCodes.operator: Unsupported value: "Maybe": supported values: "In", "NotIn"`,
		}},
		{name: "no exitCodes", c: v1.Container{
			RestartPolicy:      policy(v1.ContainerRestartPolicyNever),
			RestartPolicyRules: []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart}},
		}, wants: []string{"c.restartPolicyRules[0].exitCodes: Required value: must be specified"}},
		{name: "too many rules", c: v1.Container{
			RestartPolicy:      policy(v1.ContainerRestartPolicyNever),
			RestartPolicyRules: slices.Repeat([]v1.ContainerRestartRule{rule(v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleOnExitCodesOpIn, 1)}, 21),
		}, wants: []string{"c.restartPolicyRules: Too many: 21: must have at most 20 items"}},
		{name: "too many values", c: v1.Container{
			RestartPolicy:      policy(v1.ContainerRestartPolicyNever),
			RestartPolicyRules: []v1.ContainerRestartRule{rule(v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleOnExitCodesOpIn, many(256)...)},
		}, wants: []string{"c.restartPolicyRules[0].exitCodes.values: Too many: 256: must have at most 255 items"}},
		{name: "255 values are fine", c: v1.Container{
			RestartPolicy:      policy(v1.ContainerRestartPolicyNever),
			RestartPolicyRules: []v1.ContainerRestartRule{rule(v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleOnExitCodesOpNotIn, many(255)...)},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var errs field.ErrorList
			if tt.init {
				errs = validateInitContainerRestart(&tt.c, field.NewPath("c"))
			} else {
				errs = validateContainerRestart(&tt.c, field.NewPath("c"))
			}
			if len(errs) != len(tt.wants) {
				t.Fatalf("got %d errors %v, want %d %v", len(errs), errs, len(tt.wants), tt.wants)
			}
			for i, want := range tt.wants {
				if got := errs[i].Error(); !strings.Contains(got, want) {
					t.Errorf("error %d = %q, want it to contain %q", i, got, want)
				}
			}
		})
	}
}
