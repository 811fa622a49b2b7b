package printers

import (
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-agent/berth/internal/podstatus"
	"github.com/berth-agent/berth/internal/rollback"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func at(d time.Duration) metav1.Time { return metav1.NewTime(t0.Add(d)) }

func ptrTime(t metav1.Time) *metav1.Time { return &t }

func runningState(d time.Duration) v1.ContainerState {
	return v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: at(d)}}
}

func terminatedState(code int32, reason, id string, start, end time.Duration) v1.ContainerState {
	return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code, Reason: reason, ContainerID: id, StartedAt: at(start), FinishedAt: at(end)}}
}

func waitingState(reason, msg string) v1.ContainerState {
	return v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason, Message: msg}}
}

// TestSummarize checks the STATUS and READY columns beyond the fixtures
// of the cli package's golden tables (TestPodStatusColumn there).
func TestSummarize(t *testing.T) {
	// kubectl's init rules: a failed init container under Never, an init
	// container killed by a signal, and a sidecar that counts as ready.
	always := v1.ContainerRestartPolicyAlways
	started := true
	tests := []struct {
		name string
		pod  v1.Pod
		want string
	}{
		{"init exit code", v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{{Name: "i"}}, Containers: []v1.Container{{Name: "a"}}},
			Status: v1.PodStatus{Phase: v1.PodFailed, InitContainerStatuses: []v1.ContainerStatus{{Name: "i", ContainerID: "x",
				State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 4}}}}}}, "Init:ExitCode:4 0/1"},
		{"init signal", v1.Pod{Spec: v1.PodSpec{InitContainers: []v1.Container{{Name: "i"}}, Containers: []v1.Container{{Name: "a"}}},
			Status: v1.PodStatus{Phase: v1.PodFailed, InitContainerStatuses: []v1.ContainerStatus{{Name: "i", ContainerID: "x",
				State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 137, Signal: 9}}}}}}, "Init:Signal:9 0/1"},
		{"sidecar running, app running", v1.Pod{
			Spec: v1.PodSpec{InitContainers: []v1.Container{{Name: "side", RestartPolicy: &always}}, Containers: []v1.Container{{Name: "a"}}},
			Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{{Type: v1.PodInitialized, Status: v1.ConditionTrue}},
				InitContainerStatuses: []v1.ContainerStatus{{Name: "side", ContainerID: "s", Started: &started, Ready: true, State: runningState(0)}},
				ContainerStatuses:     []v1.ContainerStatus{{Name: "a", ContainerID: "a", Ready: true, State: runningState(0)}}}}, "Running 2/2"},
		{"exit without reason", v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}},
			Status: v1.PodStatus{Phase: v1.PodFailed, ContainerStatuses: []v1.ContainerStatus{{Name: "a", ContainerID: "a",
				State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 5}}}}}}, "ExitCode:5 0/1"},
		{"terminating but already failed stays failed", v1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptrTime(at(0))},
			Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}},
			Status: v1.PodStatus{Phase: v1.PodFailed, ContainerStatuses: []v1.ContainerStatus{{Name: "a", ContainerID: "a",
				State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}}}}, "Error 0/1"},
	}
	// A broken manifest replaces only the words that say all is well.
	brokenManifest := []v1.PodCondition{{Type: podstatus.ConditionManifestValid, Status: v1.ConditionFalse, Reason: "DecodeError", Message: "web.yaml:3: invalid YAML"}}
	rolledBackCond := []v1.PodCondition{{Type: rollback.ConditionLatestVersion, Status: v1.ConditionFalse, Reason: rollback.ReasonRolledBack, Message: "version b failed"}}
	validManifest := []v1.PodCondition{{Type: podstatus.ConditionManifestValid, Status: v1.ConditionTrue}}
	oneApp := v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}
	tests = append(tests, []struct {
		name string
		pod  v1.Pod
		want string
	}{
		{"running, manifest broken", v1.Pod{Spec: oneApp, Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: brokenManifest,
			ContainerStatuses: []v1.ContainerStatus{{Name: "a", ContainerID: "a", Ready: true, State: runningState(0)}}}}, "ManifestInvalid 1/1"},
		{"running, manifest valid", v1.Pod{Spec: oneApp, Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: validManifest,
			ContainerStatuses: []v1.ContainerStatus{{Name: "a", ContainerID: "a", Ready: true, State: runningState(0)}}}}, "Running 1/1"},
		{"completed, manifest broken", v1.Pod{Spec: oneApp, Status: v1.PodStatus{Phase: v1.PodSucceeded, Conditions: brokenManifest,
			ContainerStatuses: []v1.ContainerStatus{{Name: "a", ContainerID: "a", State: terminatedState(0, "Completed", "a", 0, time.Second)}}}}, "ManifestInvalid 0/1"},
		{"crash loop keeps its word", v1.Pod{Spec: oneApp, Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: brokenManifest,
			ContainerStatuses: []v1.ContainerStatus{{Name: "a", ContainerID: "a", State: waitingState("CrashLoopBackOff", "")}}}}, "CrashLoopBackOff 0/1"},
		{"terminating wins", v1.Pod{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: ptrTime(at(0))}, Spec: oneApp, Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: brokenManifest,
			ContainerStatuses: []v1.ContainerStatus{{Name: "a", ContainerID: "a", Ready: true, State: runningState(0)}}}}, "Terminating 1/1"},
		{"running a rolled-back version", v1.Pod{Spec: oneApp, Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: rolledBackCond,
			ContainerStatuses: []v1.ContainerStatus{{Name: "a", ContainerID: "a", Ready: true, State: runningState(0)}}}}, "RolledBack 1/1"},
		{"a rolled-back version crash-looping keeps its word", v1.Pod{Spec: oneApp, Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: rolledBackCond,
			ContainerStatuses: []v1.ContainerStatus{{Name: "a", ContainerID: "a", State: waitingState("CrashLoopBackOff", "")}}}}, "CrashLoopBackOff 0/1"},
		{"a broken manifest shows before a rollback", v1.Pod{Spec: oneApp, Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: append(slices.Clone(brokenManifest), rolledBackCond...),
			ContainerStatuses: []v1.ContainerStatus{{Name: "a", ContainerID: "a", Ready: true, State: runningState(0)}}}}, "ManifestInvalid 1/1"},
		{"refused manifest keeps its reason", v1.Pod{Spec: oneApp, Status: v1.PodStatus{Phase: v1.PodFailed, Reason: "Invalid", Conditions: brokenManifest}}, "Invalid 0/1"},
	}...)
	for _, tt := range tests {
		s := Summarize(&tt.pod)
		if got := fmt.Sprintf("%s %d/%d", s.Status, s.Ready, s.Total); got != tt.want {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}
