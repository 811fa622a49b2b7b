package printers

import (
	"strings"
	"testing"
	"text/tabwriter"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestDescribeProbes(t *testing.T) {
	svc := "db"
	c := v1.Container{
		LivenessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}},
			PeriodSeconds: 5, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
		ReadinessProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Scheme: v1.URISchemeHTTP, Path: "/ready", Port: intstr.FromString("http")}},
			InitialDelaySeconds: 2, PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
		StartupProbe: &v1.Probe{ProbeHandler: v1.ProbeHandler{GRPC: &v1.GRPCAction{Port: 9090, Service: &svc}},
			PeriodSeconds: 1, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 30},
	}
	var b strings.Builder
	d := &describer{tw: tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)}
	d.probes(c)
	d.tw.Flush()
	want := "" +
		"    Liveness:   exec [cat /tmp/healthy] delay=0s timeout=1s period=5s #success=1 #failure=3\n" +
		"    Readiness:  http-get http://:http/ready delay=2s timeout=1s period=10s #success=1 #failure=3\n" +
		"    Startup:    grpc <pod>:9090 db delay=0s timeout=1s period=1s #success=1 #failure=30\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	tcp := &v1.Probe{ProbeHandler: v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt(9000)}}, PeriodSeconds: 1}
	if got, want := describeProbe(tcp), "tcp-socket :9000 delay=0s timeout=0s period=1s #success=0 #failure=0"; got != want {
		t.Errorf("tcp = %q, want %q", got, want)
	}
}
