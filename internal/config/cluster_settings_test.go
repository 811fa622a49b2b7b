package config

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

func TestClusterSettings(t *testing.T) {
	s, _, err := Parse([]string{
		"--kubeconfig", "/etc/berth/node.kubeconfig",
		"--node-labels", "site=lyon,node.kubernetes.io/role=edge", "--node-labels", "ring=canary",
		"--register-with-taints", "berth.io/edge=true:NoSchedule,dedicated:NoExecute",
		"--node-status-report-frequency", "1m",
	}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s.Kubeconfig != "/etc/berth/node.kubeconfig" || s.NodeStatusReportFrequency.Duration != time.Minute {
		t.Errorf("settings = %+v", s.ClusterSettings)
	}
	if len(s.NodeLabels) != 3 || s.NodeLabels["node.kubernetes.io/role"] != "edge" || s.NodeLabels["ring"] != "canary" {
		t.Errorf("node labels = %v", s.NodeLabels)
	}
	want := []v1.Taint{{Key: "berth.io/edge", Value: "true", Effect: v1.TaintEffectNoSchedule}, {Key: "dedicated", Effect: v1.TaintEffectNoExecute}}
	if len(s.RegisterWithTaints) != 2 || s.RegisterWithTaints[0] != want[0] || s.RegisterWithTaints[1] != want[1] {
		t.Errorf("taints = %v, want %v", s.RegisterWithTaints, want)
	}
	nc := s.NodeConfig("edge-1", "192.0.2.1")
	if nc.Labels["site"] != "lyon" || nc.NodeIP != "192.0.2.1" || nc.MaxPods != 110 || nc.ReportFrequency != time.Minute {
		t.Errorf("node config = %+v", nc)
	}
}

func TestClusterSettingsFromTheConfigFiles(t *testing.T) {
	dir := t.TempDir()
	berth := filepath.Join(dir, "berth.yaml")
	kubelet := filepath.Join(dir, "kubelet.yaml")
	write := func(path, text string) {
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(kubelet, "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nregisterWithTaints:\n- key: a\n  effect: NoSchedule\nnodeStatusReportFrequency: 2m\n")
	write(berth, "kind: BerthConfiguration\nkubeletConfig: "+kubelet+"\nkubeconfig: /k\nlabels:\n  site: north\nnodeLabels:\n  site: south\n")
	s, _, err := Parse([]string{"--config", berth, "--register-with-taints", "b:NoExecute"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if s.NodeStatusReportFrequency.Duration != 2*time.Minute {
		t.Errorf("report frequency = %s, want the kubelet file's 2m", s.NodeStatusReportFrequency.Duration)
	}
	if len(s.RegisterWithTaints) != 1 || s.RegisterWithTaints[0].Key != "b" {
		t.Errorf("taints = %v, want the flag's only", s.RegisterWithTaints)
	}
	if nc := s.NodeConfig("n", ""); nc.Labels["site"] != "south" {
		t.Errorf("label site = %q, want nodeLabels to win over labels", nc.Labels["site"])
	}
}

func TestClusterSettingsErrors(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--kubeconfig", "k", "--node-labels", "novalue"}, `label "novalue" is not key=value`},
		{[]string{"--kubeconfig", "k", "--node-labels", "kubernetes.io/role=x"}, "--node-labels: kubernetes.io/role: a node may set no label"},
		{[]string{"--kubeconfig", "k", "--node-labels", "node-restriction.kubernetes.io/x=y"}, "NodeRestriction"},
		{[]string{"--kubeconfig", "k", "--node-labels", "a=b c"}, `--node-labels: a: value "b c"`},
		{[]string{"--kubeconfig", "k", "--register-with-taints", "a:Sometimes"}, `effect "Sometimes"`},
		{[]string{"--kubeconfig", "k", "--register-with-taints", "noeffect"}, "is not key[=value]:Effect"},
		{[]string{"--kubeconfig", "k", "--node-status-report-frequency", "1s"}, "--node-status-report-frequency must be at least 10s"},
		{[]string{"--node-labels", "a=b"}, "need a --kubeconfig"},
		{[]string{"--bootstrap-kubeconfig", "b"}, "--bootstrap-kubeconfig needs a --kubeconfig"},
		{[]string{"--kubeconfig", "k", "--healthz-port", "70000"}, "--healthz-port must be between 0 and 65535"},
		{[]string{"--kubeconfig", "k", "--healthz-bind-address", "localhost"}, `--healthz-bind-address "localhost" is no IP address`},
	}
	for _, tc := range tests {
		_, _, err := Parse(tc.args, io.Discard)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", tc.args, err, tc.want)
		}
	}
	for _, ok := range []string{"kubelet.kubernetes.io/x=y", "node.kubernetes.io/exclude-from-external-load-balancers=true", "topology.kubernetes.io/zone=a", "example.com/x=y"} {
		if _, _, err := Parse([]string{"--kubeconfig", "k", "--node-labels", ok}, io.Discard); err != nil {
			t.Errorf("--node-labels %s: %v", ok, err)
		}
	}
}

// TestHealthzAddress: the kubelet's healthz endpoint is served with a
// kubeconfig only, on 127.0.0.1:10248 unless set, and port 0 disables it.
func TestHealthzAddress(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{nil, ""},
		{[]string{"--kubeconfig", "k"}, "127.0.0.1:10248"},
		{[]string{"--kubeconfig", "k", "--healthz-port", "0"}, ""},
		{[]string{"--kubeconfig", "k", "--healthz-bind-address", "::1", "--healthz-port", "1"}, "[::1]:1"},
	}
	for _, tc := range tests {
		s, _, err := Parse(tc.args, io.Discard)
		if err != nil {
			t.Fatalf("Parse(%q): %v", tc.args, err)
		}
		if got := s.HealthzAddress(); got != tc.want {
			t.Errorf("Parse(%q).HealthzAddress() = %q, want %q", tc.args, got, tc.want)
		}
		if !s.RotateCertificates {
			t.Errorf("Parse(%q): rotateCertificates is off by default", tc.args)
		}
	}
}
