package podplan

import (
	"fmt"
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/podenv"
)

// actPod is a pod with the given restart policy, init and app containers.
func actPod(policy v1.RestartPolicy, inits, apps []string) *v1.Pod {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "default", UID: "uid-1"},
		Spec:       v1.PodSpec{RestartPolicy: policy},
	}
	for _, n := range inits {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, v1.Container{Name: n, Image: "busybox"})
	}
	for _, n := range apps {
		pod.Spec.Containers = append(pod.Spec.Containers, v1.Container{Name: n, Image: "busybox", Command: []string{n}})
	}
	return pod
}

// cs is a container status for the named spec container, in sandbox "sb1",
// with the spec's hash (so it is "unchanged").
func cs(pod *v1.Pod, name string, state ContainerState, exit int32) *ContainerStatus {
	s := &ContainerStatus{ID: name + "-id", SandboxID: "sb1", Name: name, State: state, ExitCode: exit}
	if c := podenv.SpecContainer(pod, name); c != nil {
		s.Hash = criconfig.HashContainer(c)
	}
	return s
}

// attemptOf makes s a later attempt of its container, with its own ID.
func attemptOf(s *ContainerStatus, n int) *ContainerStatus {
	s.ID = fmt.Sprintf("%s-%d", s.ID, n)
	s.RestartCount = n
	return s
}

// abandonedStart makes s a container whose start containerd cut short
// because the berth that asked for it was killed: never started.
func abandonedStart(s *ContainerStatus) *ContainerStatus {
	s.Reason, s.Message = startErrorReason, "failed to start containerd task: context canceled"
	return s
}

func readySandbox() *SandboxStatus {
	return &SandboxStatus{ID: "sb1", State: SandboxStateReady, Attempt: 0, IP: "10.88.0.5"}
}

func podStatusOf(sandboxes []*SandboxStatus, containers ...*ContainerStatus) *PodStatus {
	return &PodStatus{UID: "uid-1", Sandboxes: sandboxes, Containers: containers}
}

// sidecar0 makes the pod's first init container a sidecar.
func sidecar0(p *v1.Pod) {
	always := v1.ContainerRestartPolicyAlways
	p.Spec.InitContainers[0].RestartPolicy = &always
}

// kill is the expected part of a ContainerToKill.
type kill struct{ name, reason string }

func TestComputePodActions(t *testing.T) {
	always, onFailure, never := v1.RestartPolicyAlways, v1.RestartPolicyOnFailure, v1.RestartPolicyNever
	two := []string{"a", "b"}
	inits := []string{"i0", "i1"}
	tests := []struct {
		name     string
		pod      *v1.Pod
		status   func(pod *v1.Pod) *PodStatus
		mutate   func(pod *v1.Pod)
		killPod  bool
		create   bool
		attempt  uint32
		sandbox  string
		nextInit string
		sidecars []int
		start    []int
		kills    []kill
		remove   []string // IDs of ContainersToRemove
		terminal bool
		failed   bool
	}{
		// Sandbox decisions.
		{
			name:   "new pod without status creates sandbox 0 and starts all",
			pod:    actPod(always, nil, two),
			status: func(*v1.Pod) *PodStatus { return nil },
			create: true, start: []int{0, 1},
		},
		{
			name:   "new pod with empty status",
			pod:    actPod(always, nil, two),
			status: func(*v1.Pod) *PodStatus { return podStatusOf(nil) },
			create: true, start: []int{0, 1},
		},
		{
			name: "newest sandbox not ready is replaced with the next attempt",
			pod:  actPod(always, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{{ID: "sb3", State: SandboxStateNotReady, Attempt: 2}, {ID: "sb1", State: SandboxStateNotReady, Attempt: 1}},
					cs(p, "a", ContainerStateExited, 137))
			},
			killPod: true, create: true, attempt: 3, sandbox: "sb3", start: []int{0, 1},
		},
		{
			name: "two ready sandboxes are reconciled into a new one",
			pod:  actPod(always, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{{ID: "sb2", State: SandboxStateReady, Attempt: 1, IP: "10.0.0.2"}, readySandbox()},
					cs(p, "a", ContainerStateRunning, 0), cs(p, "b", ContainerStateRunning, 0))
			},
			killPod: true, create: true, attempt: 2, sandbox: "sb2", start: []int{0, 1},
		},
		{
			name:   "network mode changed to host network",
			pod:    actPod(always, nil, two),
			mutate: func(p *v1.Pod) { p.Spec.HostNetwork = true },
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "a", ContainerStateRunning, 0), cs(p, "b", ContainerStateRunning, 0))
			},
			killPod: true, create: true, attempt: 1, sandbox: "sb1", start: []int{0, 1},
		},
		{
			name: "network mode changed to pod network",
			pod:  actPod(always, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{{ID: "sb1", State: SandboxStateReady, HostNetwork: true}}, cs(p, "a", ContainerStateRunning, 0), cs(p, "b", ContainerStateRunning, 0))
			},
			killPod: true, create: true, attempt: 1, sandbox: "sb1", start: []int{0, 1},
		},
		{
			name: "pod-network sandbox without an IP is replaced",
			pod:  actPod(always, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{{ID: "sb1", State: SandboxStateReady, Attempt: 4}}, cs(p, "a", ContainerStateRunning, 0))
			},
			killPod: true, create: true, attempt: 5, sandbox: "sb1", start: []int{0, 1},
		},
		{
			name:   "host-network sandbox without an IP is fine",
			pod:    actPod(always, nil, two),
			mutate: func(p *v1.Pod) { p.Spec.HostNetwork = true },
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{{ID: "sb1", State: SandboxStateReady, HostNetwork: true}}, cs(p, "a", ContainerStateRunning, 0), cs(p, "b", ContainerStateRunning, 0))
			},
			sandbox: "sb1",
		},
		{
			name:   "new sandbox runs init containers from the first, apps later",
			pod:    actPod(always, inits, two),
			status: func(*v1.Pod) *PodStatus { return nil },
			create: true, nextInit: "i0",
		},
		{
			name: "replaced sandbox reruns init containers even if they succeeded",
			pod:  actPod(always, inits, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{{ID: "sb1", State: SandboxStateNotReady}},
					cs(p, "a", ContainerStateExited, 137), cs(p, "i1", ContainerStateExited, 0), cs(p, "i0", ContainerStateExited, 0))
			},
			killPod: true, create: true, attempt: 1, sandbox: "sb1", nextInit: "i0",
		},
		{
			name: "Never: dead sandbox after containers ran is terminal, failed",
			pod:  actPod(never, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{{ID: "sb1", State: SandboxStateNotReady}},
					cs(p, "a", ContainerStateExited, 0), cs(p, "b", ContainerStateExited, 137))
			},
			killPod: true, attempt: 1, sandbox: "sb1", terminal: true, failed: true,
		},
		{
			name: "Never: dead sandbox after all containers succeeded is terminal, succeeded",
			pod:  actPod(never, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{{ID: "sb1", State: SandboxStateNotReady}},
					cs(p, "a", ContainerStateExited, 0), cs(p, "b", ContainerStateExited, 0))
			},
			killPod: true, attempt: 1, sandbox: "sb1", terminal: true,
		},
		{
			name: "Never: dead sandbox before any container ran is recreated",
			pod:  actPod(never, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{{ID: "sb1", State: SandboxStateNotReady}})
			},
			killPod: true, create: true, attempt: 1, sandbox: "sb1", start: []int{0, 1},
		},
		{
			name: "OnFailure: dead sandbox restarts only the containers that failed",
			pod:  actPod(onFailure, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{{ID: "sb1", State: SandboxStateNotReady}},
					cs(p, "a", ContainerStateExited, 0), cs(p, "b", ContainerStateExited, 2))
			},
			killPod: true, create: true, attempt: 1, sandbox: "sb1", start: []int{1},
		},
		{
			name: "OnFailure: dead sandbox with all succeeded is terminal",
			pod:  actPod(onFailure, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{{ID: "sb1", State: SandboxStateNotReady}},
					cs(p, "a", ContainerStateExited, 0), cs(p, "b", ContainerStateExited, 0))
			},
			killPod: true, attempt: 1, sandbox: "sb1", terminal: true,
		},
		{
			name: "OnFailure: dead sandbox with all succeeded and inits done is terminal",
			pod:  actPod(onFailure, inits, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{{ID: "sb1", State: SandboxStateNotReady}},
					cs(p, "a", ContainerStateExited, 0), cs(p, "b", ContainerStateExited, 0),
					cs(p, "i1", ContainerStateExited, 0), cs(p, "i0", ContainerStateExited, 0))
			},
			killPod: true, attempt: 1, sandbox: "sb1", terminal: true,
		},
		{
			name: "Always: dead sandbox with all succeeded is recreated",
			pod:  actPod(always, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{{ID: "sb1", State: SandboxStateNotReady, Attempt: 7}},
					cs(p, "a", ContainerStateExited, 0), cs(p, "b", ContainerStateExited, 0))
			},
			killPod: true, create: true, attempt: 8, sandbox: "sb1", start: []int{0, 1},
		},

		// App containers in a ready sandbox.
		{
			name: "all running and unchanged: nothing to do",
			pod:  actPod(always, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "a", ContainerStateRunning, 0), cs(p, "b", ContainerStateRunning, 0))
			},
			sandbox: "sb1",
		},
		{
			name:   "changed spec: kill and start",
			pod:    actPod(always, nil, two),
			mutate: func(p *v1.Pod) { p.Spec.Containers[1].Image = "busybox:new" },
			status: func(p *v1.Pod) *PodStatus {
				b := cs(p, "b", ContainerStateRunning, 0)
				b.Hash = 42
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "a", ContainerStateRunning, 0), b)
			},
			sandbox: "sb1", start: []int{1}, kills: []kill{{"b", KillReasonSpecChanged}},
		},
		{
			name: "changed spec restarts even under Never",
			pod:  actPod(never, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				a := cs(p, "a", ContainerStateRunning, 0)
				a.Hash = 0
				return podStatusOf([]*SandboxStatus{readySandbox()}, a, cs(p, "b", ContainerStateRunning, 0))
			},
			sandbox: "sb1", start: []int{0}, kills: []kill{{"a", KillReasonSpecChanged}},
		},
		{
			name: "Always: failed container restarts",
			pod:  actPod(always, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "a", ContainerStateExited, 1), cs(p, "b", ContainerStateRunning, 0))
			},
			sandbox: "sb1", start: []int{0},
		},
		{
			name: "Always: succeeded container restarts",
			pod:  actPod(always, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "a", ContainerStateExited, 0), cs(p, "b", ContainerStateRunning, 0))
			},
			sandbox: "sb1", start: []int{0},
		},
		{
			name: "Always: all exited restart, pod not killed",
			pod:  actPod(always, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "a", ContainerStateExited, 0), cs(p, "b", ContainerStateExited, 1))
			},
			sandbox: "sb1", start: []int{0, 1},
		},
		{
			name: "OnFailure: succeeded container stays down",
			pod:  actPod(onFailure, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "a", ContainerStateExited, 0), cs(p, "b", ContainerStateRunning, 0))
			},
			sandbox: "sb1",
		},
		{
			name: "OnFailure: failed container restarts",
			pod:  actPod(onFailure, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "a", ContainerStateExited, 3), cs(p, "b", ContainerStateRunning, 0))
			},
			sandbox: "sb1", start: []int{0},
		},
		{
			name: "OnFailure: all succeeded is terminal, succeeded",
			pod:  actPod(onFailure, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "a", ContainerStateExited, 0), cs(p, "b", ContainerStateExited, 0))
			},
			killPod: true, sandbox: "sb1", terminal: true,
		},
		{
			name: "Never: failed container stays down while another runs",
			pod:  actPod(never, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "a", ContainerStateExited, 1), cs(p, "b", ContainerStateRunning, 0))
			},
			sandbox: "sb1",
		},
		{
			name: "Never: all exited with a failure is terminal, failed",
			pod:  actPod(never, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "a", ContainerStateExited, 1), cs(p, "b", ContainerStateExited, 0))
			},
			killPod: true, sandbox: "sb1", terminal: true, failed: true,
		},
		{
			name: "Never: all exited 0 is terminal, succeeded",
			pod:  actPod(never, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "a", ContainerStateExited, 0), cs(p, "b", ContainerStateExited, 0))
			},
			killPod: true, sandbox: "sb1", terminal: true,
		},
		{
			name: "unknown container is killed and started, even under Never",
			pod:  actPod(never, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "a", ContainerStateUnknown, 0), cs(p, "b", ContainerStateRunning, 0))
			},
			sandbox: "sb1", start: []int{0}, kills: []kill{{"a", KillReasonUnknown}},
		},
		{
			name: "created but never started container is started again",
			pod:  actPod(never, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "a", ContainerStateCreated, 0), cs(p, "b", ContainerStateRunning, 0))
			},
			sandbox: "sb1", start: []int{0}, remove: []string{"a-id"},
		},
		// Never-started containers (a kill between CreateContainer and
		// StartContainer) are removed and do not stand for a run.
		{
			name: "never started after a crash: the crash decides, under Never the pod ends",
			pod:  actPod(never, nil, []string{"a"}),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, attemptOf(cs(p, "a", ContainerStateCreated, 0), 1), cs(p, "a", ContainerStateExited, 1))
			},
			killPod: true, sandbox: "sb1", terminal: true, failed: true, remove: []string{"a-id-1"},
		},
		{
			name: "never started after success under OnFailure: not started again",
			pod:  actPod(onFailure, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, attemptOf(cs(p, "a", ContainerStateCreated, 0), 1), cs(p, "a", ContainerStateExited, 0),
					cs(p, "b", ContainerStateRunning, 0))
			},
			sandbox: "sb1", remove: []string{"a-id-1"},
		},
		{
			name: "never started after a crash under Always: started again",
			pod:  actPod(always, nil, []string{"a"}),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, attemptOf(cs(p, "a", ContainerStateCreated, 0), 1), cs(p, "a", ContainerStateExited, 1))
			},
			sandbox: "sb1", start: []int{0}, remove: []string{"a-id-1"},
		},
		{
			name: "start abandoned by a killed berth: no restart, removed, started again",
			pod:  actPod(never, nil, []string{"a"}),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, abandonedStart(cs(p, "a", ContainerStateExited, 128)))
			},
			sandbox: "sb1", start: []int{0}, remove: []string{"a-id"},
		},
		{
			name: "shim start killed with the abandoned start: no restart, removed, started again",
			pod:  actPod(never, nil, []string{"a"}),
			status: func(p *v1.Pod) *PodStatus {
				c := cs(p, "a", ContainerStateExited, 128)
				c.Reason, c.Message = startErrorReason, "failed to create containerd task: failed to start shim: start failed: : signal: killed: unknown"
				return podStatusOf([]*SandboxStatus{readySandbox()}, c)
			},
			sandbox: "sb1", start: []int{0}, remove: []string{"a-id"},
		},
		{
			name: "start that failed on its own under Never: a real attempt, the pod ends",
			pod:  actPod(never, nil, []string{"a"}),
			status: func(p *v1.Pod) *PodStatus {
				c := cs(p, "a", ContainerStateExited, 128)
				c.Reason, c.Message = startErrorReason, `failed to create containerd task: exec: "nope": executable file not found in $PATH`
				return podStatusOf([]*SandboxStatus{readySandbox()}, c)
			},
			killPod: true, sandbox: "sb1", terminal: true, failed: true,
		},
		{
			name: "only never-started containers, no sandbox: a new pod",
			pod:  actPod(always, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf(nil, cs(p, "a", ContainerStateCreated, 0))
			},
			create: true, start: []int{0, 1}, remove: []string{"a-id"},
		},
		{
			name: "never started in a dead sandbox: replaced with the pod",
			pod:  actPod(always, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{{ID: "sb1", State: SandboxStateNotReady}}, cs(p, "a", ContainerStateCreated, 0), cs(p, "b", ContainerStateExited, 0))
			},
			killPod: true, create: true, attempt: 1, sandbox: "sb1", start: []int{0, 1}, remove: []string{"a-id"},
		},
		{
			name:   "never-started sidecar is removed and restarted",
			pod:    actPod(never, []string{"s0"}, []string{"a"}),
			mutate: sidecar0,
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "a", ContainerStateRunning, 0),
					attemptOf(cs(p, "s0", ContainerStateCreated, 0), 1), cs(p, "s0", ContainerStateExited, 1))
			},
			sandbox: "sb1", sidecars: []int{0}, remove: []string{"s0-id-1"},
		},
		{
			name: "never-started init after a failed run under Never: the failure ends the pod",
			pod:  actPod(never, inits, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, attemptOf(cs(p, "i0", ContainerStateCreated, 0), 1), cs(p, "i0", ContainerStateExited, 2))
			},
			killPod: true, sandbox: "sb1", terminal: true, failed: true, remove: []string{"i0-id-1"},
		},
		{
			name: "container without status is started",
			pod:  actPod(never, nil, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "b", ContainerStateRunning, 0))
			},
			sandbox: "sb1", start: []int{0},
		},
		{
			name: "newest status decides over older attempts",
			pod:  actPod(onFailure, nil, []string{"a"}),
			status: func(p *v1.Pod) *PodStatus {
				old := cs(p, "a", ContainerStateExited, 1)
				old.ID = "old"
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "a", ContainerStateExited, 0), old)
			},
			killPod: true, sandbox: "sb1", terminal: true,
		},
		{
			name:   "pod being deleted starts nothing",
			pod:    actPod(always, nil, two),
			mutate: func(p *v1.Pod) { p.DeletionTimestamp = &metav1.Time{} },
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "a", ContainerStateExited, 1), cs(p, "b", ContainerStateRunning, 0))
			},
			sandbox: "sb1",
		},
		{
			name: "running container not in the spec is killed",
			pod:  actPod(always, nil, []string{"a"}),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "a", ContainerStateRunning, 0),
					&ContainerStatus{ID: "x-id", SandboxID: "sb1", Name: "x", State: ContainerStateRunning})
			},
			sandbox: "sb1", kills: []kill{{"x", KillReasonNotInSpec}},
		},
		{
			name: "exited container not in the spec, or in an old sandbox, is left to GC",
			pod:  actPod(always, nil, []string{"a"}),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "a", ContainerStateRunning, 0),
					&ContainerStatus{ID: "x-id", SandboxID: "sb1", Name: "x", State: ContainerStateExited},
					&ContainerStatus{ID: "y-id", SandboxID: "sb0", Name: "y", State: ContainerStateRunning})
			},
			sandbox: "sb1",
		},

		// Init containers in a ready sandbox.
		{
			name:     "no init container ran yet: the first",
			pod:      actPod(always, inits, two),
			status:   func(p *v1.Pod) *PodStatus { return podStatusOf([]*SandboxStatus{readySandbox()}) },
			sandbox:  "sb1",
			nextInit: "i0",
		},
		{
			name: "init container running: wait",
			pod:  actPod(always, inits, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "i0", ContainerStateRunning, 0))
			},
			sandbox: "sb1",
		},
		{
			name: "first init succeeded: the second",
			pod:  actPod(always, inits, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "i0", ContainerStateExited, 0))
			},
			sandbox: "sb1", nextInit: "i1",
		},
		{
			name: "all inits succeeded: apps start",
			pod:  actPod(always, inits, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "i1", ContainerStateExited, 0), cs(p, "i0", ContainerStateExited, 0))
			},
			sandbox: "sb1", start: []int{0, 1},
		},
		{
			name: "Always: failed init restarts",
			pod:  actPod(always, inits, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "i1", ContainerStateExited, 1), cs(p, "i0", ContainerStateExited, 0))
			},
			sandbox: "sb1", nextInit: "i1",
		},
		{
			name: "OnFailure: failed init restarts",
			pod:  actPod(onFailure, inits, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "i0", ContainerStateExited, 1))
			},
			sandbox: "sb1", nextInit: "i0",
		},
		{
			name: "Never: failed init fails the pod",
			pod:  actPod(never, inits, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "i0", ContainerStateExited, 1))
			},
			killPod: true, sandbox: "sb1", terminal: true, failed: true,
		},
		{
			name: "Never: OOM-killed init fails the pod",
			pod:  actPod(never, inits, two),
			status: func(p *v1.Pod) *PodStatus {
				i0 := cs(p, "i0", ContainerStateExited, 0)
				i0.Reason = "OOMKilled"
				return podStatusOf([]*SandboxStatus{readySandbox()}, i0)
			},
			killPod: true, sandbox: "sb1", terminal: true, failed: true,
		},
		{
			name: "Always: unknown init is killed and restarted",
			pod:  actPod(always, inits, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "i1", ContainerStateUnknown, 0), cs(p, "i0", ContainerStateExited, 0))
			},
			sandbox: "sb1", nextInit: "i1", kills: []kill{{"i1", KillReasonUnknown}},
		},
		{
			name: "Never: unknown init fails the pod",
			pod:  actPod(never, inits, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "i0", ContainerStateUnknown, 0))
			},
			killPod: true, sandbox: "sb1", terminal: true, failed: true,
		},
		{
			name: "init created but never started is started again, even under Never",
			pod:  actPod(never, inits, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "i1", ContainerStateCreated, 0), cs(p, "i0", ContainerStateExited, 0))
			},
			sandbox: "sb1", nextInit: "i1", remove: []string{"i1-id"},
		},
		{
			name: "init statuses of an older sandbox do not count",
			pod:  actPod(always, inits, two),
			status: func(p *v1.Pod) *PodStatus {
				i1, i0 := cs(p, "i1", ContainerStateExited, 0), cs(p, "i0", ContainerStateExited, 0)
				i1.SandboxID, i0.SandboxID = "sb0", "sb0"
				return podStatusOf([]*SandboxStatus{readySandbox()}, i1, i0)
			},
			sandbox: "sb1", nextInit: "i0",
		},

		// Sidecars: init containers with restartPolicy Always.
		{
			name:     "new pod starts the sidecar first",
			pod:      actPod(always, []string{"s0", "i1"}, two),
			mutate:   sidecar0,
			status:   func(*v1.Pod) *PodStatus { return nil },
			create:   true,
			nextInit: "s0",
		},
		{
			name:   "running sidecar lets the next init container start",
			pod:    actPod(always, []string{"s0", "i1"}, two),
			mutate: sidecar0,
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "s0", ContainerStateRunning, 0))
			},
			sandbox: "sb1", nextInit: "i1",
		},
		{
			name:   "running sidecar and finished init: apps start",
			pod:    actPod(always, []string{"s0", "i1"}, two),
			mutate: sidecar0,
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "i1", ContainerStateExited, 0), cs(p, "s0", ContainerStateRunning, 0))
			},
			sandbox: "sb1", start: []int{0, 1},
		},
		{
			name:   "sidecar that failed during init restarts even under Never",
			pod:    actPod(never, []string{"s0", "i1"}, two),
			mutate: sidecar0,
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "s0", ContainerStateExited, 1))
			},
			sandbox: "sb1", nextInit: "s0",
		},
		{
			name:   "sidecar that exited while a later init runs restarts first",
			pod:    actPod(always, []string{"s0", "i1"}, two),
			mutate: sidecar0,
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "i1", ContainerStateRunning, 0), cs(p, "s0", ContainerStateExited, 0))
			},
			sandbox: "sb1", nextInit: "s0",
		},
		{
			name:   "sidecar that exited after init restarts under Never",
			pod:    actPod(never, []string{"s0", "i1"}, two),
			mutate: sidecar0,
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "a", ContainerStateRunning, 0), cs(p, "b", ContainerStateRunning, 0),
					cs(p, "i1", ContainerStateExited, 0), cs(p, "s0", ContainerStateExited, 137))
			},
			sandbox: "sb1", sidecars: []int{0},
		},
		{
			name:   "sidecar with a changed spec is killed and restarted",
			pod:    actPod(always, []string{"s0"}, two),
			mutate: sidecar0,
			status: func(p *v1.Pod) *PodStatus {
				s0 := cs(p, "s0", ContainerStateRunning, 0)
				s0.Hash = 9
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "a", ContainerStateRunning, 0), cs(p, "b", ContainerStateRunning, 0), s0)
			},
			sandbox: "sb1", sidecars: []int{0}, kills: []kill{{"s0", KillReasonSpecChanged}},
		},
		{
			name:   "sidecar in unknown state is killed and restarted",
			pod:    actPod(always, []string{"s0"}, two),
			mutate: sidecar0,
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "a", ContainerStateRunning, 0), cs(p, "b", ContainerStateRunning, 0),
					cs(p, "s0", ContainerStateUnknown, 0))
			},
			sandbox: "sb1", sidecars: []int{0}, kills: []kill{{"s0", KillReasonUnknown}},
		},
		{
			name:   "app containers done: the pod ends, sidecar included",
			pod:    actPod(onFailure, []string{"s0"}, two),
			mutate: sidecar0,
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "a", ContainerStateExited, 0), cs(p, "b", ContainerStateExited, 0),
					cs(p, "s0", ContainerStateExited, 1))
			},
			killPod: true, sandbox: "sb1", terminal: true,
		},
		{
			name: "a running app container means initialization is done",
			pod:  actPod(always, inits, two),
			status: func(p *v1.Pod) *PodStatus {
				return podStatusOf([]*SandboxStatus{readySandbox()}, cs(p, "a", ContainerStateRunning, 0))
			},
			sandbox: "sb1", start: []int{1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.mutate != nil {
				tt.mutate(tt.pod)
			}
			got := ComputePodActions(tt.pod, tt.status(tt.pod), nil)
			var gotInit string
			if got.NextInitContainer != nil {
				gotInit = got.NextInitContainer.Name
			}
			var gotRemove []string
			for _, c := range got.ContainersToRemove {
				gotRemove = append(gotRemove, c.ID)
			}
			var gotKills []kill
			for _, k := range got.ContainersToKill {
				if k.Status == nil || k.Message == "" {
					t.Errorf("kill %q lacks its status or message: %+v", k.Name, k)
				}
				gotKills = append(gotKills, kill{k.Name, k.Reason})
			}
			checks := []struct {
				what      string
				got, want any
			}{
				{"KillPod", got.KillPod, tt.killPod},
				{"CreateSandbox", got.CreateSandbox, tt.create},
				{"Attempt", got.Attempt, tt.attempt},
				{"SandboxID", got.SandboxID, tt.sandbox},
				{"NextInitContainer", gotInit, tt.nextInit},
				{"SidecarsToStart", got.SidecarsToStart, tt.sidecars},
				{"ContainersToStart", got.ContainersToStart, tt.start},
				{"ContainersToKill", gotKills, tt.kills},
				{"ContainersToRemove", gotRemove, tt.remove},
				{"Terminal", got.Terminal, tt.terminal},
				{"Failed", got.Failed, tt.failed},
			}
			for _, c := range checks {
				if !reflect.DeepEqual(c.got, c.want) {
					t.Errorf("%s = %v, want %v", c.what, c.got, c.want)
				}
			}
		})
	}
}

func TestComputePodActionsKillMessages(t *testing.T) {
	pod := actPod(v1.RestartPolicyAlways, nil, []string{"a"})
	st := podStatusOf([]*SandboxStatus{readySandbox()}, &ContainerStatus{ID: "a-id", SandboxID: "sb1", Name: "a", State: ContainerStateRunning, Hash: 1})
	got := ComputePodActions(pod, st, nil)
	if len(got.ContainersToKill) != 1 {
		t.Fatalf("kills = %+v, want one", got.ContainersToKill)
	}
	k := got.ContainersToKill[0]
	if want := "Container a definition changed, will be restarted"; k.Message != want {
		t.Errorf("message = %q, want %q", k.Message, want)
	}
	if k.Status != st.Containers[0] {
		t.Errorf("kill status is not the running container's")
	}
	if k.Reason != KillReasonSpecChanged {
		t.Errorf("reason = %q, want %q", k.Reason, KillReasonSpecChanged)
	}
}

// health is a ContainerHealth from sets of failed container IDs.
type health struct{ liveness, startup map[string]bool }

func (h health) LivenessFailed(id string) bool { return h.liveness[id] }
func (h health) StartupFailed(id string) bool  { return h.startup[id] }

// TestComputePodActionsProbeKills: a running container that failed its
// liveness or startup probe is killed with the kubelet's reason and
// message, and restarted unless the restart policy is Never; a sidecar is
// restarted whatever the policy.
func TestComputePodActionsProbeKills(t *testing.T) {
	tests := []struct {
		name      string
		policy    v1.RestartPolicy
		apps      []string
		sidecar   bool
		health    health
		wantKill  []ContainerToKill
		wantStart []int
		wantSide  []int
		wantPod   bool // KillPod and Terminal
	}{
		{name: "liveness under Always", policy: v1.RestartPolicyAlways, apps: []string{"a", "b"},
			health:    health{liveness: map[string]bool{"a-id": true}},
			wantKill:  []ContainerToKill{{Name: "a", Reason: KillReasonLivenessProbe, Message: "Container a failed liveness probe, will be restarted"}},
			wantStart: []int{0}},
		{name: "startup under OnFailure", policy: v1.RestartPolicyOnFailure, apps: []string{"a", "b"},
			health:    health{startup: map[string]bool{"b-id": true}},
			wantKill:  []ContainerToKill{{Name: "b", Reason: KillReasonStartupProbe, Message: "Container b failed startup probe, will be restarted"}},
			wantStart: []int{1}},
		{name: "liveness wins over startup", policy: v1.RestartPolicyAlways, apps: []string{"a"},
			health:    health{liveness: map[string]bool{"a-id": true}, startup: map[string]bool{"a-id": true}},
			wantKill:  []ContainerToKill{{Name: "a", Reason: KillReasonLivenessProbe, Message: "Container a failed liveness probe, will be restarted"}},
			wantStart: []int{0}},
		{name: "Never kills without restart", policy: v1.RestartPolicyNever, apps: []string{"a", "b"},
			health:   health{liveness: map[string]bool{"a-id": true}},
			wantKill: []ContainerToKill{{Name: "a", Reason: KillReasonLivenessProbe, Message: "Container a failed liveness probe"}}},
		{name: "Never with the only container ends the pod", policy: v1.RestartPolicyNever, apps: []string{"a"},
			health: health{liveness: map[string]bool{"a-id": true}}, wantPod: true},
		{name: "sidecar restarted under Never", policy: v1.RestartPolicyNever, apps: []string{"a"}, sidecar: true,
			health:   health{liveness: map[string]bool{"s-id": true}},
			wantKill: []ContainerToKill{{Name: "s", Reason: KillReasonLivenessProbe, Message: "Container s failed liveness probe, will be restarted"}},
			wantSide: []int{0}},
		{name: "healthy", policy: v1.RestartPolicyAlways, apps: []string{"a"}, health: health{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var inits []string
			if tt.sidecar {
				inits = []string{"s"}
			}
			pod := actPod(tt.policy, inits, tt.apps)
			var statuses []*ContainerStatus
			if tt.sidecar {
				sidecar0(pod)
				statuses = append(statuses, cs(pod, "s", ContainerStateRunning, 0))
			}
			for _, n := range tt.apps {
				statuses = append(statuses, cs(pod, n, ContainerStateRunning, 0))
			}
			got := ComputePodActions(pod, podStatusOf([]*SandboxStatus{readySandbox()}, statuses...), tt.health)
			if got.KillPod != tt.wantPod || got.Terminal != tt.wantPod {
				t.Fatalf("KillPod %v Terminal %v, want %v", got.KillPod, got.Terminal, tt.wantPod)
			}
			var kills []ContainerToKill
			for _, k := range got.ContainersToKill {
				if k.Status == nil || k.Status.Name != k.Name {
					t.Errorf("kill %s carries status %+v", k.Name, k.Status)
				}
				k.Status = nil
				kills = append(kills, k)
			}
			if !reflect.DeepEqual(kills, tt.wantKill) || !reflect.DeepEqual(got.ContainersToStart, tt.wantStart) || !reflect.DeepEqual(got.SidecarsToStart, tt.wantSide) {
				t.Errorf("kill %+v start %v sidecars %v; want %+v, %v, %v", kills, got.ContainersToStart, got.SidecarsToStart, tt.wantKill, tt.wantStart, tt.wantSide)
			}
		})
	}
}

func TestProbeGracePeriod(t *testing.T) {
	pod := actPod(v1.RestartPolicyAlways, nil, []string{"a"})
	g := int64(3)
	pod.Spec.Containers[0].LivenessProbe = &v1.Probe{TerminationGracePeriodSeconds: &g}
	pod.Spec.Containers[0].StartupProbe = &v1.Probe{}
	tests := []struct {
		reason string
		want   int64
		ok     bool
	}{
		{KillReasonLivenessProbe, 3, true},
		{KillReasonStartupProbe, 0, false}, // no grace of its own: the pod's
		{KillReasonSpecChanged, 0, false},
	}
	for _, tt := range tests {
		if got, ok := ProbeGracePeriod(pod, "a", tt.reason); got != tt.want || ok != tt.ok {
			t.Errorf("%s: = %d, %v; want %d, %v", tt.reason, got, ok, tt.want, tt.ok)
		}
	}
	if _, ok := ProbeGracePeriod(nil, "a", KillReasonLivenessProbe); ok {
		t.Error("an orphan has no probe grace period")
	}
}
