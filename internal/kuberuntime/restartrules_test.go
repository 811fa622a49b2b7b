package kuberuntime

import (
	"context"
	"reflect"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeri "k8s.io/cri-api/pkg/apis/testing"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/podplan"
)

func restartRule(action v1.ContainerRestartRuleAction, op v1.ContainerRestartRuleOnExitCodesOperator, values ...int32) v1.ContainerRestartRule {
	return v1.ContainerRestartRule{Action: action, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: op, Values: values}}
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

// TestSyncPodRestartAllContainers: the reset kills what runs with no grace,
// removes every container (keeping their logs), keeps the sandbox, and a
// second trigger within the back-off waits instead of looping.
func TestSyncPodRestartAllContainers(t *testing.T) {
	f := newSyncFixture(t)
	pod := syncPod("a", "b")
	withRules(pod, "a", v1.ContainerRestartPolicyNever, restartRule(v1.ContainerRestartRuleActionRestartAllContainers, v1.ContainerRestartRuleOnExitCodesOpIn, 88))
	sb := f.runningSandbox(pod)
	f.rt.SetFakeContainers([]*fakeri.FakeContainer{
		{SandboxID: "sb1", ContainerStatus: runtimeapi.ContainerStatus{Id: "a1", State: runtimeapi.ContainerState_CONTAINER_EXITED, ExitCode: 88, Metadata: &runtimeapi.ContainerMetadata{Name: "a"}}},
		{SandboxID: "sb1", ContainerStatus: runtimeapi.ContainerStatus{Id: "b1", State: runtimeapi.ContainerState_CONTAINER_RUNNING, Metadata: &runtimeapi.ContainerMetadata{Name: "b"}}},
	})
	f.calls()
	f.m.preStop = func(context.Context, *v1.Pod, *podplan.ContainerStatus, time.Duration) {
		t.Error("a reset ran a preStop hook; the kubelet kills without one")
	}
	status := func(finished time.Time) *podplan.PodStatus {
		return &podplan.PodStatus{UID: pod.UID, IPs: []string{sb.IP}, Sandboxes: []*podplan.SandboxStatus{sb}, Containers: []*podplan.ContainerStatus{
			{ID: "a1", SandboxID: sb.ID, Name: "a", State: podplan.ContainerStateExited, ExitCode: 88, FinishedAt: finished, Hash: criconfig.HashContainer(&pod.Spec.Containers[0]), Labels: managed},
			{ID: "b1", SandboxID: sb.ID, Name: "b", State: podplan.ContainerStateRunning, Hash: criconfig.HashContainer(&pod.Spec.Containers[1]), Labels: managed},
		}}
	}
	res := syncPlanned(context.Background(), f.m, pod, status(f.clock.Now()))
	if err := res.Error(); err != nil {
		t.Fatal(err)
	}
	want := []string{"StopContainer", "RemoveContainer", "RemoveContainer"}
	if got := f.calls(); !reflect.DeepEqual(got, want) {
		t.Errorf("CRI calls = %v, want %v (no sandbox call, no start)", got, want)
	}
	if len(f.rt.Containers) != 0 {
		t.Errorf("containers left in the runtime: %v", f.rt.Containers)
	}
	if got, want := f.events.take(), []string{"RestartAllContainers", "Killing"}; !reflect.DeepEqual(got, want) {
		t.Errorf("events = %v, want %v", got, want)
	}

	// The pod comes back, and its container asks again at once: back-off.
	f.clock.Step(time.Second)
	res = syncPlanned(context.Background(), f.m, pod, status(f.clock.Now()))
	if got := f.calls(); len(got) != 0 {
		t.Errorf("CRI calls during the back-off = %v, want none", got)
	}
	if w := res.Waiting("a"); w == nil || w.Reason != ReasonCrashLoopBackOff {
		t.Errorf("waiting = %v, want CrashLoopBackOff", w)
	}
	if got := res.RetryAfter(); got != 10*time.Second {
		t.Errorf("retry after %v, want 10s (the first reset raised the back-off to 10s)", got)
	}
}
