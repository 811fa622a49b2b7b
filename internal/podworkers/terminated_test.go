package podworkers

import (
	"strings"
	"testing"

	"github.com/berth-agent/berth/internal/podplan"
)

func TestTerminated(t *testing.T) {
	sandbox := func(id string, state podplan.SandboxState) *podplan.SandboxStatus {
		return &podplan.SandboxStatus{ID: id, State: state}
	}
	container := func(name, id string, state podplan.ContainerState) *podplan.ContainerStatus {
		return &podplan.ContainerStatus{Name: name, ID: id, SandboxID: "s1", State: state}
	}
	cases := []struct {
		name   string
		status *podplan.PodStatus
		want   bool
		// reason must contain each of these when the pod is not terminated.
		reason []string
	}{
		{name: "nil status: the runtime knows nothing of the pod", want: true},
		{name: "no objects: everything removed", status: &podplan.PodStatus{}, want: true},
		{name: "sandbox stopped, no containers", status: &podplan.PodStatus{Sandboxes: []*podplan.SandboxStatus{sandbox("s1", podplan.SandboxStateNotReady)}}, want: true},
		{name: "sandbox stopped, container exited", status: &podplan.PodStatus{
			Sandboxes:  []*podplan.SandboxStatus{sandbox("s1", podplan.SandboxStateNotReady)},
			Containers: []*podplan.ContainerStatus{container("app", "c1", podplan.ContainerStateExited)},
		}, want: true},
		{name: "sandbox removed, container exited", status: &podplan.PodStatus{
			Containers: []*podplan.ContainerStatus{container("app", "c1", podplan.ContainerStateExited)},
		}, want: true},
		{name: "every sandbox stopped, several exited attempts", status: &podplan.PodStatus{
			Sandboxes: []*podplan.SandboxStatus{sandbox("s2", podplan.SandboxStateNotReady), sandbox("s1", podplan.SandboxStateNotReady)},
			Containers: []*podplan.ContainerStatus{
				container("app", "c2", podplan.ContainerStateExited), container("app", "c1", podplan.ContainerStateExited),
				container("init", "c0", podplan.ContainerStateExited),
			},
		}, want: true},
		{name: "sandbox ready, no containers", status: &podplan.PodStatus{
			Sandboxes: []*podplan.SandboxStatus{sandbox("s1", podplan.SandboxStateReady)},
		}, reason: []string{"sandbox s1 in state READY"}},
		{name: "sandbox ready, container exited", status: &podplan.PodStatus{
			Sandboxes:  []*podplan.SandboxStatus{sandbox("s1", podplan.SandboxStateReady)},
			Containers: []*podplan.ContainerStatus{container("app", "c1", podplan.ContainerStateExited)},
		}, reason: []string{"sandbox s1 in state READY"}},
		{name: "older sandbox still ready, newest stopped", status: &podplan.PodStatus{
			Sandboxes: []*podplan.SandboxStatus{sandbox("s2", podplan.SandboxStateNotReady), sandbox("s1", podplan.SandboxStateReady)},
		}, reason: []string{"sandbox s1 in state READY"}},
		{name: "sandbox in a state nobody reported", status: &podplan.PodStatus{
			Sandboxes: []*podplan.SandboxStatus{sandbox("s1", "")},
		}, reason: []string{"sandbox s1 in state UNKNOWN"}},
		{name: "container running, sandbox stopped", status: &podplan.PodStatus{
			Sandboxes:  []*podplan.SandboxStatus{sandbox("s1", podplan.SandboxStateNotReady)},
			Containers: []*podplan.ContainerStatus{container("app", "c1", podplan.ContainerStateRunning)},
		}, reason: []string{"container app (c1) in state RUNNING"}},
		{name: "container created (start maybe in flight), sandbox stopped", status: &podplan.PodStatus{
			Sandboxes:  []*podplan.SandboxStatus{sandbox("s1", podplan.SandboxStateNotReady)},
			Containers: []*podplan.ContainerStatus{container("app", "c1", podplan.ContainerStateCreated)},
		}, reason: []string{"container app (c1) in state CREATED"}},
		{name: "container created, sandbox removed", status: &podplan.PodStatus{
			Containers: []*podplan.ContainerStatus{container("app", "c1", podplan.ContainerStateCreated)},
		}, reason: []string{"container app (c1) in state CREATED"}},
		{name: "container unknown, sandbox stopped", status: &podplan.PodStatus{
			Sandboxes:  []*podplan.SandboxStatus{sandbox("s1", podplan.SandboxStateNotReady)},
			Containers: []*podplan.ContainerStatus{container("app", "c1", podplan.ContainerStateUnknown)},
		}, reason: []string{"container app (c1) in state UNKNOWN"}},
		{name: "older attempt exited, newest created", status: &podplan.PodStatus{
			Sandboxes:  []*podplan.SandboxStatus{sandbox("s1", podplan.SandboxStateNotReady)},
			Containers: []*podplan.ContainerStatus{container("app", "c2", podplan.ContainerStateCreated), container("app", "c1", podplan.ContainerStateExited)},
		}, reason: []string{"container app (c2) in state CREATED"}},
		{name: "every holder is named, long IDs shortened", status: &podplan.PodStatus{
			Sandboxes: []*podplan.SandboxStatus{sandbox("0123456789abcdef0123", podplan.SandboxStateReady)},
			Containers: []*podplan.ContainerStatus{
				container("app", "fedcba9876543210fedc", podplan.ContainerStateRunning),
				container("side", "c2", podplan.ContainerStateCreated),
				container("old", "c3", podplan.ContainerStateExited),
			},
		}, reason: []string{"sandbox 0123456789abc in state READY", "container app (fedcba9876543) in state RUNNING", "container side (c2) in state CREATED"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, reason := Terminated(tc.status)
			if got != tc.want {
				t.Fatalf("terminated = %v (%q), want %v", got, reason, tc.want)
			}
			if got && reason != "" {
				t.Errorf("a terminated pod has no reason, got %q", reason)
			}
			for _, want := range tc.reason {
				if !strings.Contains(reason, want) {
					t.Errorf("reason %q does not name %q", reason, want)
				}
			}
			if strings.Contains(reason, "old") {
				t.Errorf("reason %q names an exited container", reason)
			}
		})
	}
}
