package printers

import (
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// lifecycle prints what decides when a container is restarted and how it
// is stopped: its own restartPolicy and restartPolicyRules (KEP-5307,
// KEP-5532) and its stop signal (KEP-4960). kubectl describe has no
// lines for them yet; the names follow its style.
func (d *describer) lifecycle(c v1.Container) {
	if c.RestartPolicy != nil {
		d.line(2, "Restart Policy", string(*c.RestartPolicy))
	}
	if len(c.RestartPolicyRules) > 0 {
		d.header(2, "Restart Rules")
		for _, r := range c.RestartPolicyRules {
			d.line(3, "", describeRestartRule(r))
		}
	}
	if c.Lifecycle != nil && c.Lifecycle.StopSignal != nil {
		d.line(2, "Stop Signal", string(*c.Lifecycle.StopSignal))
	}
}

// describeRestartRule is one rule on one line: "Restart on exit code In
// [42]".
func describeRestartRule(r v1.ContainerRestartRule) string {
	if r.ExitCodes == nil {
		return string(r.Action)
	}
	codes := make([]string, len(r.ExitCodes.Values))
	for i, v := range r.ExitCodes.Values {
		codes[i] = fmt.Sprint(v)
	}
	return fmt.Sprintf("%s on exit code %s [%s]", r.Action, r.ExitCodes.Operator, strings.Join(codes, " "))
}
