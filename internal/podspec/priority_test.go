package podspec

import (
	"fmt"
	"strings"
	"testing"

	"github.com/berth-agent/berth/internal/podspec/podspectest"
)

func TestPriority(t *testing.T) {
	for _, tt := range []struct {
		name, spec string
		want       int32
		wantProbs  []string
		wantMsg    string
	}{
		{name: "none", want: 0},
		{name: "node critical class fills the priority", spec: "  priorityClassName: system-node-critical\n", want: 2000001000},
		{name: "cluster critical class fills the priority", spec: "  priorityClassName: system-cluster-critical\n", want: 2000000000},
		{name: "class with its own value (kubeadm writes both)", spec: "  priorityClassName: system-node-critical\n  priority: 2000001000\n", want: 2000001000},
		{name: "bare priority is taken as given", spec: "  priority: 1000\n", want: 1000},
		{name: "negative bare priority", spec: "  priority: -5\n", want: -5},
		{name: "bare priority at the user limit", spec: "  priority: 1000000000\n", want: 1000000000},
		{
			name: "class with another value", spec: "  priorityClassName: system-cluster-critical\n  priority: 7\n",
			wantProbs: []string{"7 spec.priority Invalid"}, wantMsg: "must not differ from the value of priorityClassName system-cluster-critical (2000000000)",
		},
		{
			name: "unknown class", spec: "  priorityClassName: high\n",
			wantProbs: []string{"6 spec.priorityClassName Invalid"}, wantMsg: "no API server to define priority classes",
		},
		{
			name: "bare priority in the system range", spec: "  priority: 2000001000\n",
			wantProbs: []string{"6 spec.priority Invalid"}, wantMsg: "must not exceed 1000000000 without a priorityClassName",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			in := strings.Replace(podspectest.Manifest("web", "nginx:1"), "spec:\n", "spec:\n"+tt.spec, 1)
			res := Parse([]byte(in), webOrigin, podspectest.Node)
			var probs []string
			for _, p := range res.Problems {
				probs = append(probs, fmt.Sprintf("%d %s %s", p.Line, p.Field, p.Reason))
			}
			if strings.Join(probs, "\n") != strings.Join(tt.wantProbs, "\n") {
				t.Fatalf("problems:\n%s\nwant:\n%s\nfull: %v", strings.Join(probs, "\n"), strings.Join(tt.wantProbs, "\n"), res.Problems)
			}
			if tt.wantMsg != "" {
				if !strings.Contains(res.Problems[0].Error(), tt.wantMsg) {
					t.Errorf("problem %q does not contain %q", res.Problems[0].Error(), tt.wantMsg)
				}
				return
			}
			if got := *res.Pods[0].Spec.Priority; got != tt.want {
				t.Errorf("priority = %d, want %d", got, tt.want)
			}
		})
	}
}
