package cli

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/berth-agent/berth/internal/cli/printers"
)

func failingNode() *printers.NodeState {
	at := cliT0.Add(time.Hour)
	renewed, since, expiry := at.Add(-150*time.Second), at.Add(-2*time.Minute), at.Add(48*time.Hour)
	return &printers.NodeState{
		NodeName: "cp-node", NodeUID: "4f1c", Registered: true, APIServer: "https://10.0.0.1:6443",
		LastStatusUpdate: &renewed, LastLeaseRenewal: &renewed,
		Error: "renew lease kube-node-lease/cp-node: connection refused", ErrorSince: &since, ClientCertificateExpiry: &expiry,
	}
}

func healthyNode() *printers.NodeState {
	s := failingNode()
	s.Error, s.ErrorSince = "", nil
	return s
}

// TestPodsWarnsOfTheAPIServer checks berth pods' one stderr line while
// the node's API server fails, and none while it is healthy or the
// daemon joins no cluster; the pods are listed in every case.
func TestPodsWarnsOfTheAPIServer(t *testing.T) {
	pinClock(t)
	const warning = "Warning: node cp-node: API server https://10.0.0.1:6443 unreachable since 2m: renew lease kube-node-lease/cp-node: connection refused; pods keep running\n"
	for _, tc := range []struct {
		name string
		node *printers.NodeState
		want bool
	}{
		{"not joined", nil, false},
		{"healthy", healthyNode(), false},
		{"failing", failingNode(), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startFakeDaemon(t)
			d.setNode(tc.node)
			code, stdout, stderr := runCLI(t, d, "pods", "-A")
			if code != 0 || !strings.Contains(stdout, "web-node1") {
				t.Fatalf("exit %d, stdout %q", code, stdout)
			}
			if got := strings.Count(stderr, warning); got != map[bool]int{false: 0, true: 1}[tc.want] {
				t.Errorf("stderr holds the warning %d times:\n%s", got, stderr)
			}
			if !tc.want && strings.Contains(stderr, "API server") {
				t.Errorf("stderr warns of the API server:\n%s", stderr)
			}
		})
	}
}

func TestNodeCommand(t *testing.T) {
	pinClock(t)
	for _, tc := range []struct {
		name     string
		node     *printers.NodeState
		args     []string
		wantCode int
		want     []string // in stdout, or stderr when wantCode != 0
	}{
		{"failing", failingNode(), nil, 0, []string{
			"Name:                        cp-node\n", "API Server:                  https://10.0.0.1:6443\n", "Registered:                  True\n",
			"Last Lease Renewal:          2m30s ago\n", "(in 2d)", "Status:                      Failing for 2m; pods keep running\n",
			"Error:                       renew lease kube-node-lease/cp-node: connection refused\n",
		}},
		{"healthy", healthyNode(), nil, 0, []string{"Status:                      OK\n"}},
		{"not joined", nil, nil, 1, []string{"berth node: berth joins no cluster: it runs without --kubeconfig"}},
		{"yaml", failingNode(), []string{"-o", "yaml"}, 0, []string{"apiServer: https://10.0.0.1:6443\n", "registered: true\n"}},
		{"bad output", failingNode(), []string{"-o", "wide"}, 2, []string{"berth node:"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := startFakeDaemon(t)
			d.setNode(tc.node)
			code, stdout, stderr := runCLI(t, d, append([]string{"node"}, tc.args...)...)
			out := stdout
			if tc.wantCode != 0 {
				out = stderr
			}
			if code != tc.wantCode {
				t.Fatalf("exit %d, want %d; stdout %q stderr %q", code, tc.wantCode, stdout, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}

	d := startFakeDaemon(t)
	d.setNode(failingNode())
	code, stdout, _ := runCLI(t, d, "node", "-o", "json")
	var got printers.NodeState
	if err := json.Unmarshal([]byte(stdout), &got); code != 0 || err != nil || got.Error == "" || !got.ErrorSince.Equal(*failingNode().ErrorSince) {
		t.Errorf("node -o json: exit %d, %+v (%v)", code, got, err)
	}
}
