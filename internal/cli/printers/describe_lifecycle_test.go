package printers

import (
	"strings"
	"testing"
	"text/tabwriter"

	v1 "k8s.io/api/core/v1"
)

func TestDescribeLifecycle(t *testing.T) {
	never := v1.ContainerRestartPolicyNever
	sig := v1.SIGUSR1
	c := v1.Container{
		RestartPolicy: &never,
		RestartPolicyRules: []v1.ContainerRestartRule{
			{Action: v1.ContainerRestartRuleActionRestart, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42, 43}}},
			{Action: v1.ContainerRestartRuleActionRestartAllContainers, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpNotIn, Values: []int32{0}}},
		},
		Lifecycle: &v1.Lifecycle{StopSignal: &sig},
	}
	var b strings.Builder
	d := &describer{tw: tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)}
	d.lifecycle(c)
	d.lifecycle(v1.Container{})
	d.tw.Flush()
	want := "" +
		"    Restart Policy:  Never\n" +
		"    Restart Rules:\n" +
		"      Restart on exit code In [42 43]\n" +
		"      RestartAllContainers on exit code NotIn [0]\n" +
		"    Stop Signal:  SIGUSR1\n"
	if b.String() != want {
		t.Errorf("got\n%q\nwant\n%q", b.String(), want)
	}
}
