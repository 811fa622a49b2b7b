package podstatus

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-agent/berth/internal/podplan"
	"github.com/berth-agent/berth/internal/podtest"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func testPod(policy v1.RestartPolicy, init []string, apps ...string) *v1.Pod {
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-node", Namespace: "default", UID: "uid1"},
		Spec:       v1.PodSpec{RestartPolicy: policy},
	}
	for _, n := range init {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: n, Image: "busybox:1.36"})
	}
	for _, n := range apps {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: n, Image: "busybox:1.36"})
	}
	return p
}

func running(name string, restarts int) *podplan.ContainerStatus {
	return &podplan.ContainerStatus{ID: name + "-r", Runtime: "containerd", Name: name, State: podplan.ContainerStateRunning, StartedAt: t0, RestartCount: restarts, ImageRef: "sha256:abc"}
}

func exited(name string, code int32) *podplan.ContainerStatus {
	return &podplan.ContainerStatus{ID: name + "-x", Runtime: "containerd", Name: name, State: podplan.ContainerStateExited, ExitCode: code, StartedAt: t0, FinishedAt: t0.Add(time.Second)}
}

func TestBuildPodStatusPhase(t *testing.T) {
	tests := []struct {
		name    string
		pod     *v1.Pod
		conts   []*podplan.ContainerStatus
		waiting map[string]Waiting
		want    v1.PodPhase
		ready   bool
	}{
		{"nothing yet", testPod(v1.RestartPolicyAlways, nil, "app"), nil, nil, v1.PodPending, false},
		{"running", testPod(v1.RestartPolicyAlways, nil, "app"), []*podplan.ContainerStatus{running("app", 0)}, nil, v1.PodRunning, true},
		{"one of two running", testPod(v1.RestartPolicyAlways, nil, "a", "b"), []*podplan.ContainerStatus{running("a", 0)}, nil, v1.PodPending, false},
		{"always: exited and backing off is still running", testPod(v1.RestartPolicyAlways, nil, "app"),
			[]*podplan.ContainerStatus{exited("app", 1)}, map[string]Waiting{"app": {Reason: "CrashLoopBackOff"}}, v1.PodRunning, false},
		{"never: success", testPod(v1.RestartPolicyNever, nil, "app"), []*podplan.ContainerStatus{exited("app", 0)}, nil, v1.PodSucceeded, false},
		{"never: failure", testPod(v1.RestartPolicyNever, nil, "app"), []*podplan.ContainerStatus{exited("app", 2)}, nil, v1.PodFailed, false},
		{"onfailure: success completes", testPod(v1.RestartPolicyOnFailure, nil, "app"), []*podplan.ContainerStatus{exited("app", 0)}, nil, v1.PodSucceeded, false},
		{"onfailure: failure restarts", testPod(v1.RestartPolicyOnFailure, nil, "app"), []*podplan.ContainerStatus{exited("app", 1)}, nil, v1.PodRunning, false},
		{"init pending", testPod(v1.RestartPolicyAlways, []string{"init"}, "app"), []*podplan.ContainerStatus{running("init", 0)}, nil, v1.PodPending, false},
		{"init failed under never", testPod(v1.RestartPolicyNever, []string{"init"}, "app"), []*podplan.ContainerStatus{exited("init", 1)}, nil, v1.PodFailed, false},
		{"init failed under always retries", testPod(v1.RestartPolicyAlways, []string{"init"}, "app"), []*podplan.ContainerStatus{exited("init", 1)}, nil, v1.PodPending, false},
		{"init done, app running", testPod(v1.RestartPolicyAlways, []string{"init"}, "app"), []*podplan.ContainerStatus{running("app", 0), exited("init", 0)}, nil, v1.PodRunning, true},
		{"unknown state", testPod(v1.RestartPolicyAlways, nil, "app"), []*podplan.ContainerStatus{{ID: "u", Name: "app", State: podplan.ContainerStateUnknown}}, nil, v1.PodPending, false},
		// KEP-5307: the container's restartPolicy and rules decide.
		{"never pod, exit code a rule restarts: still running", withRule(testPod(v1.RestartPolicyNever, nil, "app"), "app", 42),
			[]*podplan.ContainerStatus{exited("app", 42)}, map[string]Waiting{"app": {Reason: "CrashLoopBackOff"}}, v1.PodRunning, false},
		{"never pod, exit code no rule matches: failed", withRule(testPod(v1.RestartPolicyNever, nil, "app"), "app", 42),
			[]*podplan.ContainerStatus{exited("app", 1)}, nil, v1.PodFailed, false},
		{"never pod, init container a rule restarts: pending", withRule(testPod(v1.RestartPolicyNever, []string{"init"}, "app"), "init", 3),
			[]*podplan.ContainerStatus{exited("init", 3)}, nil, v1.PodPending, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := Build(Input{Pod: tt.pod, Runtime: &podplan.PodStatus{UID: "uid1", Containers: tt.conts}, Waiting: tt.waiting, Now: t0})
			if st.Phase != tt.want {
				t.Errorf("phase = %s, want %s", st.Phase, tt.want)
			}
			if got := podtest.ConditionTrue(st, v1.PodReady); got != tt.ready {
				t.Errorf("Ready = %v, want %v (conditions %+v)", got, tt.ready, st.Conditions)
			}
		})
	}
}

// withRule gives the named container restartPolicy Never and a rule that
// restarts it on exit code code.
func withRule(p *v1.Pod, name string, code int32) *v1.Pod {
	never := v1.ContainerRestartPolicyNever
	rules := []v1.ContainerRestartRule{{Action: v1.ContainerRestartRuleActionRestart,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{code}}}}
	for _, list := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				list[i].RestartPolicy, list[i].RestartPolicyRules = &never, rules
			}
		}
	}
	return p
}

func TestBuildPodStatusContainerDetails(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, nil, "app")
	rs := &podplan.PodStatus{UID: "uid1", IPs: []string{"10.1.2.3", "fd00::3"}, Containers: []*podplan.ContainerStatus{
		exited("app", 137),
		{ID: "older", Name: "app", State: podplan.ContainerStateExited, ExitCode: 1, Reason: "OOMKilled", FinishedAt: t0},
	}}
	rs.Containers[0].RestartCount = 4
	st := Build(Input{
		Pod: pod, Runtime: rs, HostIP: "192.0.2.1", StartTime: t0, Now: t0,
		Waiting: map[string]Waiting{"app": {Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container=app"}},
	})
	cs := st.ContainerStatuses[0]
	if cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" {
		t.Fatalf("state = %+v, want waiting CrashLoopBackOff", cs.State)
	}
	if lt := cs.LastTerminationState.Terminated; lt == nil || lt.ExitCode != 137 || lt.Reason != "Error" {
		t.Errorf("lastTerminationState = %+v, want the newest exit (137, Error)", cs.LastTerminationState)
	}
	if cs.RestartCount != 4 || cs.ContainerID != "containerd://app-x" {
		t.Errorf("restartCount=%d containerID=%q", cs.RestartCount, cs.ContainerID)
	}
	if st.PodIP != "10.1.2.3" || len(st.PodIPs) != 2 || st.HostIP != "192.0.2.1" {
		t.Errorf("IPs: podIP=%q podIPs=%v hostIP=%q", st.PodIP, st.PodIPs, st.HostIP)
	}
	if st.StartTime == nil || !st.StartTime.Time.Equal(t0) {
		t.Errorf("startTime = %v", st.StartTime)
	}

	pod.Spec.HostNetwork = true
	st = Build(Input{Pod: pod, Runtime: &podplan.PodStatus{UID: "uid1"}, HostIP: "192.0.2.1", Now: t0})
	if st.PodIP != "192.0.2.1" {
		t.Errorf("host-network pod IP = %q, want the host IP", st.PodIP)
	}
	if w := st.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "ContainerCreating" {
		t.Errorf("no container yet: state = %+v, want ContainerCreating", st.ContainerStatuses[0].State)
	}
}

func TestBuildPodStatusReadinessAndTermination(t *testing.T) {
	pod := testPod(v1.RestartPolicyAlways, nil, "a", "b")
	rs := &podplan.PodStatus{UID: "uid1", Containers: []*podplan.ContainerStatus{running("a", 0), running("b", 0)}}
	st := Build(Input{Pod: pod, Runtime: rs, Now: t0, Ready: func(n string) bool { return n == "a" }})
	if podtest.ConditionTrue(st, v1.ContainersReady) {
		t.Error("ContainersReady with b not ready")
	}
	if !st.ContainerStatuses[0].Ready || st.ContainerStatuses[1].Ready {
		t.Errorf("ready flags = %v, %v", st.ContainerStatuses[0].Ready, st.ContainerStatuses[1].Ready)
	}
	st = Build(Input{Pod: pod, Runtime: rs, Now: t0, Terminating: true})
	if podtest.ConditionTrue(st, v1.PodReady) {
		t.Error("a terminating pod must not be Ready")
	}
}

func TestQOSClass(t *testing.T) {
	q := func(s string) resource.Quantity { return resource.MustParse(s) }
	tests := []struct {
		name string
		res  v1.ResourceRequirements
		want v1.PodQOSClass
	}{
		{"none", v1.ResourceRequirements{}, v1.PodQOSBestEffort},
		{"limits only", v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: q("1"), v1.ResourceMemory: q("1Gi")}}, v1.PodQOSGuaranteed},
		{"requests below limits", v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: q("500m"), v1.ResourceMemory: q("1Gi")},
			Limits:   v1.ResourceList{v1.ResourceCPU: q("1"), v1.ResourceMemory: q("1Gi")}}, v1.PodQOSBurstable},
		{"memory only", v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: q("64Mi")}}, v1.PodQOSBurstable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := testPod(v1.RestartPolicyAlways, nil, "app")
			pod.Spec.Containers[0].Resources = tt.res
			if got := qosClass(pod); got != tt.want {
				t.Errorf("qosClass = %s, want %s", got, tt.want)
			}
		})
	}
}
