package podrules

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Container restart rules, validated as the API server of Kubernetes 1.36
// does with its default gates: ContainerRestartRules (KEP-5307, beta and on
// since 1.35) and RestartAllContainersOnContainerExits (KEP-5532, beta and
// on since 1.36). The fields are containers[].restartPolicy,
// containers[].restartPolicyRules and the same on initContainers.
var (
	containerRestartPolicies = sets.New(v1.ContainerRestartPolicyAlways, v1.ContainerRestartPolicyNever, v1.ContainerRestartPolicyOnFailure)
	restartRuleActions       = sets.New(v1.ContainerRestartRuleActionRestart, v1.ContainerRestartRuleActionRestartAllContainers)
	restartRuleOperators     = sets.New(v1.ContainerRestartRuleOnExitCodesOpIn, v1.ContainerRestartRuleOnExitCodesOpNotIn)
)

// Upstream's bounds on the rules.
const (
	maxRestartRules          = 20
	maxRestartRuleExitCodes  = 255
	restartPolicyRequiredMsg = "must specify restartPolicy when restart rules are used"
)

// validateInitContainerRestart checks an init container's restartPolicy and
// rules: a restartPolicy is optional (Always makes it a sidecar, Never and
// OnFailure override the pod's policy for it), and rules need one.
func validateInitContainerRestart(c *v1.Container, p *field.Path) field.ErrorList {
	if c.RestartPolicy == nil {
		if len(c.RestartPolicyRules) > 0 {
			return field.ErrorList{field.Required(p.Child("restartPolicy"), restartPolicyRequiredMsg)}
		}
		return nil
	}
	return validateContainerRestart(c, p)
}

// validateContainerRestart checks a container's restartPolicy and
// restartPolicyRules the way upstream's validateContainerRestartPolicy
// does: a supported policy, present whenever rules are, at most 20 rules,
// each with a supported action and exitCodes with a supported operator and
// at most 255 values.
func validateContainerRestart(c *v1.Container, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	if c.RestartPolicy == nil {
		if len(c.RestartPolicyRules) == 0 {
			return nil
		}
		errs = append(errs, field.Required(p.Child("restartPolicy"), restartPolicyRequiredMsg))
	} else if !containerRestartPolicies.Has(*c.RestartPolicy) {
		errs = append(errs, field.NotSupported(p.Child("restartPolicy"), *c.RestartPolicy, sets.List(containerRestartPolicies)))
	}
	rp := p.Child("restartPolicyRules")
	if len(c.RestartPolicyRules) > maxRestartRules {
		errs = append(errs, field.TooMany(rp, len(c.RestartPolicyRules), maxRestartRules))
	}
	for i, rule := range c.RestartPolicyRules {
		ip := rp.Index(i)
		if !restartRuleActions.Has(rule.Action) {
			errs = append(errs, field.NotSupported(ip.Child("action"), rule.Action, sets.List(restartRuleActions)))
		}
		if rule.ExitCodes == nil {
			errs = append(errs, field.Required(ip.Child("exitCodes"), "must be specified"))
			continue
		}
		ep := ip.Child("exitCodes")
		if !restartRuleOperators.Has(rule.ExitCodes.Operator) {
			errs = append(errs, field.NotSupported(ep.Child("operator"), rule.ExitCodes.Operator, sets.List(restartRuleOperators)))
		}
		if len(rule.ExitCodes.Values) > maxRestartRuleExitCodes {
			errs = append(errs, field.TooMany(ep.Child("values"), len(rule.ExitCodes.Values), maxRestartRuleExitCodes))
		}
	}
	return errs
}
