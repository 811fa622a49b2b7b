package podstatus

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-agent/berth/internal/podplan"
	"github.com/berth-agent/berth/internal/podspec"
)

// Waiting is why a container is not running although it should be, as
// the last sync found it (ContainerCreating, CrashLoopBackOff, ErrImagePull...).
type Waiting struct {
	Reason  string
	Message string
}

// Input is everything the v1 status of a pod is derived from. Keeping
// it a plain value makes Build a pure function.
type Input struct {
	Pod     *v1.Pod
	Runtime *podplan.PodStatus // nil when the runtime has nothing of the pod
	Waiting map[string]Waiting
	// Ready tells whether a running container passed its readiness probe;
	// nil means "ready once running" (no probes).
	Ready     func(container string) bool
	HostIP    string
	StartTime time.Time
	// Terminating is set while berth stops the pod on purpose.
	Terminating bool
	Now         time.Time
}

// Build computes the pod's v1.PodStatus the way the kubelet's
// generateAPIPodStatus does, from what the runtime reports.
func Build(in Input) v1.PodStatus {
	pod := in.Pod
	rs := in.Runtime
	if rs == nil {
		rs = &podplan.PodStatus{UID: pod.UID}
	}
	st := v1.PodStatus{
		HostIP:   in.HostIP,
		QOSClass: qosClass(pod),
	}
	if in.HostIP != "" {
		st.HostIPs = []v1.HostIP{{IP: in.HostIP}}
	}
	if !in.StartTime.IsZero() {
		t := metav1.NewTime(in.StartTime)
		st.StartTime = &t
	}
	ips := rs.IPs
	if pod.Spec.HostNetwork && in.HostIP != "" {
		ips = []string{in.HostIP}
	}
	if len(ips) > 0 {
		st.PodIP = ips[0]
		for _, ip := range ips {
			st.PodIPs = append(st.PodIPs, v1.PodIP{IP: ip})
		}
	}
	st.InitContainerStatuses = containerStatuses(pod.Spec.InitContainers, rs, in, true)
	st.ContainerStatuses = containerStatuses(pod.Spec.Containers, rs, in, false)
	st.Phase = podPhase(pod, st.InitContainerStatuses, st.ContainerStatuses)
	st.Conditions = podConditions(pod, st, in.Now)
	return st
}

// containerStatuses maps each spec container to the newest runtime container
// of its name; the one before it is its lastTerminationState.
func containerStatuses(specs []v1.Container, rs *podplan.PodStatus, in Input, init bool) []v1.ContainerStatus {
	if len(specs) == 0 {
		return nil
	}
	out := make([]v1.ContainerStatus, 0, len(specs))
	for _, c := range specs {
		cs := v1.ContainerStatus{Name: c.Name, Image: c.Image}
		var history []*podplan.ContainerStatus
		for _, rc := range rs.Containers {
			if rc.Name == c.Name {
				history = append(history, rc)
			}
		}
		w, hasWait := in.Waiting[c.Name]
		switch {
		case len(history) == 0:
			reason := "ContainerCreating"
			if init {
				reason = "PodInitializing"
			}
			if hasWait {
				reason = w.Reason
			}
			cs.State.Waiting = &v1.ContainerStateWaiting{Reason: reason, Message: w.Message}
		default:
			newest := history[0]
			cs.ContainerID = containerID(newest)
			if newest.ImageRef != "" {
				cs.ImageID = newest.ImageRef
			}
			if newest.Image != "" {
				cs.Image = newest.Image
			}
			cs.RestartCount = int32(newest.RestartCount)
			cs.State = runtimeState(newest)
			if len(history) > 1 {
				cs.LastTerminationState = runtimeState(history[1])
			}
			// An exited container that is about to be restarted (or is
			// held back by a back-off) waits; the exit moves to lastState.
			if cs.State.Terminated != nil && hasWait {
				cs.LastTerminationState = cs.State
				cs.State = v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: w.Reason, Message: w.Message}}
			}
		}
		running := cs.State.Running != nil
		started := running && !in.Terminating
		cs.Started = &started
		cs.Ready = running && !in.Terminating && (in.Ready == nil || in.Ready(c.Name))
		if init && cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0 {
			cs.Ready = true
		}
		out = append(out, cs)
	}
	return out
}

// containerID is a runtime container's ID as a v1 status shows it, with
// the runtime's name as scheme (containerd://ID, cri-o://ID).
func containerID(c *podplan.ContainerStatus) string {
	return c.Runtime + "://" + c.ID
}

// runtimeState renders one runtime container as a v1 container state.
func runtimeState(c *podplan.ContainerStatus) v1.ContainerState {
	switch c.State {
	case podplan.ContainerStateRunning:
		return v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(c.StartedAt)}}
	case podplan.ContainerStateExited:
		reason := c.Reason
		if reason == "" {
			reason = "Completed"
			if c.ExitCode != 0 {
				reason = "Error"
			}
		}
		return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{
			ExitCode:    c.ExitCode,
			Reason:      reason,
			Message:     c.Message,
			StartedAt:   metav1.NewTime(c.StartedAt),
			FinishedAt:  metav1.NewTime(c.FinishedAt),
			ContainerID: containerID(c),
		}}
	case podplan.ContainerStateCreated:
		return v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	}
	return v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "ContainerStatusUnknown", Message: "The container state could not be read from the runtime"}}
}

// podPhase follows the kubelet's getPhase: init containers gate the pod; then
// the app containers' states and whether each would restart decide. With
// container restart rules and policies (KEP-5307) a failed init container
// fails the pod only when it will not run again, and stopped app
// containers end the pod only when none of them will. Statuses are in spec
// order, one per container.
func podPhase(pod *v1.Pod, initStatuses, statuses []v1.ContainerStatus) v1.PodPhase {
	for i, s := range initStatuses {
		c := &pod.Spec.InitContainers[i]
		switch {
		case s.State.Terminated != nil && s.State.Terminated.ExitCode == 0:
			continue
		case s.State.Terminated != nil && !podplan.ContainerShouldRestart(c, &pod.Spec, s.State.Terminated.ExitCode):
			return v1.PodFailed
		case s.LastTerminationState.Terminated != nil && s.LastTerminationState.Terminated.ExitCode != 0 &&
			!podplan.ContainerShouldRestart(c, &pod.Spec, s.LastTerminationState.Terminated.ExitCode):
			return v1.PodFailed
		default:
			return v1.PodPending
		}
	}
	var waiting, running, stopped, succeeded, restartable, unknown int
	for i, s := range statuses {
		c := &pod.Spec.Containers[i]
		var last *v1.ContainerStateTerminated
		switch {
		case s.State.Running != nil:
			running++
		case s.State.Terminated != nil:
			last = s.State.Terminated
		case s.State.Waiting != nil && s.LastTerminationState.Terminated != nil:
			last = s.LastTerminationState.Terminated
		case s.State.Waiting != nil && s.State.Waiting.Reason == "ContainerStatusUnknown":
			unknown++
		default:
			waiting++
		}
		if last != nil {
			stopped++
			if last.ExitCode == 0 {
				succeeded++
			}
			if podplan.ContainerShouldRestart(c, &pod.Spec, last.ExitCode) {
				restartable++
			}
		}
	}
	switch {
	case waiting > 0:
		return v1.PodPending
	case running > 0 && unknown == 0:
		return v1.PodRunning
	case running == 0 && stopped > 0 && unknown == 0:
		switch {
		case restartable > 0:
			return v1.PodRunning
		case stopped == succeeded:
			return v1.PodSucceeded
		default:
			return v1.PodFailed
		}
	}
	return v1.PodPending
}

// podConditions are the four conditions a kubectl user looks at, and
// berth's ConditionManifestValid, True here: a pod being synced was
// accepted, and Agent.Pods turns it False while its manifest is broken.
func podConditions(pod *v1.Pod, st v1.PodStatus, now time.Time) []v1.PodCondition {
	t := metav1.NewTime(now)
	cond := func(typ v1.PodConditionType, ok bool, reason, msg string) v1.PodCondition {
		s := v1.ConditionTrue
		if !ok {
			s = v1.ConditionFalse
		}
		return v1.PodCondition{Type: typ, Status: s, Reason: reason, Message: msg, LastTransitionTime: t}
	}
	var notInit []string
	for _, s := range st.InitContainerStatuses {
		if s.State.Terminated == nil || s.State.Terminated.ExitCode != 0 {
			notInit = append(notInit, s.Name)
		}
	}
	var notReady []string
	for _, s := range st.ContainerStatuses {
		if !s.Ready {
			notReady = append(notReady, s.Name)
		}
	}
	done := st.Phase == v1.PodSucceeded || st.Phase == v1.PodFailed
	initialized := cond(v1.PodInitialized, len(notInit) == 0, "", "")
	if len(notInit) > 0 {
		initialized.Reason = "ContainersNotInitialized"
		initialized.Message = fmt.Sprintf("containers with incomplete status: [%s]", strings.Join(notInit, " "))
	}
	ready := cond(v1.ContainersReady, len(notReady) == 0 && !done, "", "")
	switch {
	case done:
		ready.Reason = "PodCompleted"
	case len(notReady) > 0:
		ready.Reason = "ContainersNotReady"
		ready.Message = fmt.Sprintf("containers with unready status: [%s]", strings.Join(notReady, " "))
	}
	podReady := ready
	podReady.Type = v1.PodReady
	return []v1.PodCondition{
		cond(v1.PodScheduled, true, "", ""),
		initialized,
		ready,
		podReady,
		ManifestCondition(nil, now),
	}
}

// qosClass is the pod's QoS class by the API's rules, so `berth describe`
// and /pods show what kubectl would.
func qosClass(pod *v1.Pod) v1.PodQOSClass {
	guaranteed := true
	any := false
	for _, c := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		if len(c.Resources.Requests) > 0 || len(c.Resources.Limits) > 0 {
			any = true
		}
		for _, r := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			lim, okL := c.Resources.Limits[r]
			req, okR := c.Resources.Requests[r]
			if !okL || (okR && req.Cmp(lim) != 0) {
				guaranteed = false
			}
		}
	}
	switch {
	case !any:
		return v1.PodQOSBestEffort
	case guaranteed:
		return v1.PodQOSGuaranteed
	}
	return v1.PodQOSBurstable
}

// ConditionManifestValid says whether the manifest a pod comes from is
// currently valid. It is False, with the problem's reason and its
// FILE:LINE: FIELD: MESSAGE, while a broken edit keeps the pod on its last
// good version, so /pods (what monitoring reads) shows what /problems knows.
//
// Every pod carries it, True when the manifest is fine: Kubernetes API
// conventions want a condition present with an explicit status rather than
// absent, so a reader can tell "valid" from "berth does not say" (an older
// berth) and alert on status != True alone, as on Ready.
const ConditionManifestValid v1.PodConditionType = "berth.io/ManifestValid"

// ManifestCondition renders a pod's manifest problems as its
// ConditionManifestValid: the first problem's reason (problems come ordered
// by file and line), and every problem as FILE:LINE: FIELD: MESSAGE.
func ManifestCondition(problems []podspec.Problem, now time.Time) v1.PodCondition {
	c := v1.PodCondition{Type: ConditionManifestValid, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(now)}
	if len(problems) == 0 {
		return c
	}
	msgs := make([]string, len(problems))
	for i, p := range problems {
		msgs[i] = p.Error()
	}
	c.Status, c.Reason, c.Message = v1.ConditionFalse, problems[0].Reason, strings.Join(msgs, "; ")
	return c
}

// Pending is the status of a pod that berth holds back on purpose.
func Pending(pod *v1.Pod, reason, message string, now time.Time) v1.PodStatus {
	st := Build(Input{Pod: pod, Now: now})
	st.Phase = v1.PodPending
	st.Reason = reason
	st.Message = message
	return st
}
