package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/podplan"
)

const (
	// minimumGracePeriodSeconds is the kubelet's floor: a container always
	// gets a moment between SIGTERM and SIGKILL, unless an override says
	// otherwise.
	minimumGracePeriodSeconds = 2
)

// preStopFunc runs a container's preStop hook and returns when it finished
// or grace ran out. pod is nil for an orphan, whose hook is in the
// container's criconfig.AnnotationPreStopHook. It reports failures itself (events);
// KillContainer only takes the time it took off the grace period.
type preStopFunc func(ctx context.Context, pod *v1.Pod, c *podplan.ContainerStatus, grace time.Duration)

// KillContainer stops one berth-owned container with the kubelet's grace
// rules: the pod's deletion or termination grace period (a container may
// carry its own in criconfig.AnnotationContainerGracePeriod; an orphan, pod == nil,
// carries the pod's in criconfig.AnnotationPodGracePeriod; 30 s when nothing says),
// less the time a preStop hook took, at least 2 s; gracePeriodOverride wins
// over all of it. reason says why (logged); message goes into the Killing
// event. A container that is already gone counts as stopped. Failures are
// *SyncError with ReasonKillContainerError.
func (m *Manager) KillContainer(ctx context.Context, pod *v1.Pod, c *podplan.ContainerStatus, reason, message string, gracePeriodOverride *int64) error {
	if !podplan.Owned(c.Labels) {
		return fmt.Errorf("refusing to stop container %q (%s): it is not managed by berth", c.ID, c.Name)
	}
	uid, name, namespace := podIdentity(pod, c.Labels)
	grace := gracePeriodSeconds(pod, c, reason)
	if message == "" {
		message = fmt.Sprintf("Stopping container %s", c.Name)
	}
	m.opts.Recorder.Event(uid, name, namespace, EventNormal, "Killing", message)

	// A zero override leaves no time for a hook, as in the kubelet (a
	// RestartAllContainers reset kills this way).
	if m.preStop != nil && grace > 0 && (gracePeriodOverride == nil || *gracePeriodOverride > 0) {
		start := m.clock.Now()
		m.preStop(ctx, pod, c, time.Duration(grace)*time.Second)
		grace -= int64(m.clock.Since(start).Seconds())
	}
	grace = max(grace, minimumGracePeriodSeconds)
	if gracePeriodOverride != nil {
		grace = max(*gracePeriodOverride, 0)
	}

	m.log.Debug("killing container", "pod", name, "namespace", namespace, "uid", uid, "container", c.Name,
		"containerID", c.ID, "reason", reason, "gracePeriod", grace)
	if err := m.stopContainer(ctx, pod, c, grace); err != nil && !isNotFound(err) {
		return &SyncError{
			Reason:  ReasonKillContainerError,
			Message: fmt.Sprintf("stop container %q (%s) with grace period %ds: %v", c.Name, c.ID, grace, err),
			Err:     err,
		}
	}
	return nil
}

// KillPod stops a pod: all its running containers in parallel (each with its
// own grace period, so the pod takes as long as its slowest container, not
// the sum) and removes those that never started (see removeNeverStarted),
// then every sandbox, which also tears the network down. Objects
// without berth's ownership label are left alone. pod may be nil for an
// orphan. All failures are returned joined, each a *SyncError
// (KillContainerError, KillPodSandboxError); sandboxes are stopped even when
// a container failed to stop, as the kubelet does, since stopping the
// sandbox kills what is left.
func (m *Manager) KillPod(ctx context.Context, pod *v1.Pod, status *podplan.PodStatus, gracePeriodOverride *int64) error {
	return m.killPod(ctx, pod, status, gracePeriodOverride).err()
}

// killResult is what a kill left undone, split by whether it matters to
// what runs next.
type killResult struct {
	// live are the failures that may leave something of the pod running:
	// a container that did not stop or could not be removed, a sandbox
	// that was not already NOTREADY; and with them the dead ones.
	live error
	// dead are the failures to stop sandboxes that were NOTREADY before
	// the kill, when every container stopped: nothing of the pod runs any
	// more (a NOTREADY sandbox never becomes ready again), only runtime
	// state is left behind (a network namespace, an address, a CNI cache
	// entry). A runtime can fail that stop forever: containerd 1.6 does
	// when it died while libcni wrote its cache (containernetworking/cni
	// #1055), and only an operator's repair ends it.
	dead error
}

// err is every failure, joined once.
func (k killResult) err() error {
	if k.live != nil {
		return k.live // which holds the dead ones too
	}
	return k.dead
}

// killPod is KillPod with its failures split; see killResult.
func (m *Manager) killPod(ctx context.Context, pod *v1.Pod, status *podplan.PodStatus, gracePeriodOverride *int64) killResult {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex // guards errs
		errs []error
	)
	for _, c := range status.Containers {
		if !podplan.Owned(c.Labels) {
			continue
		}
		var kill func() error
		switch c.State {
		case podplan.ContainerStateRunning, podplan.ContainerStateUnknown:
			kill = func() error { return m.KillContainer(ctx, pod, c, "PodKilled", "", gracePeriodOverride) }
		case podplan.ContainerStateCreated:
			kill = func() error { return m.removeNeverStarted(ctx, c) }
		default:
			continue
		}
		wg.Go(func() {
			if err := kill(); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	var dead []error
	for _, s := range status.OwnedSandboxes() {
		err := m.runtime.StopPodSandbox(ctx, s.ID)
		if err == nil || isNotFound(err) {
			continue
		}
		err = &SyncError{
			Reason:  ReasonKillPodSandboxError,
			Message: fmt.Sprintf("stop sandbox %q of pod %s/%s: %v", s.ID, status.Namespace, status.Name, err),
			Err:     err,
		}
		if s.State == podplan.SandboxStateNotReady {
			dead = append(dead, err)
		} else {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		// A container still running makes every failure count.
		return killResult{live: errors.Join(append(errs, dead...)...)}
	}
	return killResult{dead: errors.Join(dead...)}
}

// podIdentity names the pod for events and logs: from the spec when there
// is one, else from the object's labels (an orphan).
func podIdentity(pod *v1.Pod, labels map[string]string) (types.UID, string, string) {
	if pod != nil {
		return pod.UID, pod.Name, pod.Namespace
	}
	return types.UID(labels[criconfig.LabelPodUID]), labels[criconfig.LabelPodName], labels[criconfig.LabelPodNamespace]
}

// gracePeriodSeconds is the grace period before the preStop and minimum
// adjustments: the pod's deletion grace period if it is being deleted, the
// failed probe's terminationGracePeriodSeconds for a liveness or startup
// kill, a container-specific one if recorded, the pod's spec, or for an orphan the
// pod's as recorded on the container.
func gracePeriodSeconds(pod *v1.Pod, c *podplan.ContainerStatus, reason string) int64 {
	if pod != nil && pod.DeletionGracePeriodSeconds != nil {
		return *pod.DeletionGracePeriodSeconds
	}
	if g, ok := podplan.ProbeGracePeriod(pod, c.Name, reason); ok {
		return g
	}
	if g, ok := annotationSeconds(c.Annotations, criconfig.AnnotationContainerGracePeriod); ok {
		return g
	}
	if pod != nil {
		if pod.Spec.TerminationGracePeriodSeconds != nil {
			return *pod.Spec.TerminationGracePeriodSeconds
		}
		return criconfig.DefaultGracePeriodSeconds
	}
	if g, ok := annotationSeconds(c.Annotations, criconfig.AnnotationPodGracePeriod); ok {
		return g
	}
	return criconfig.DefaultGracePeriodSeconds
}

// annotationSeconds parses a non-negative number of seconds.
func annotationSeconds(annotations map[string]string, key string) (int64, bool) {
	v, ok := annotations[key]
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// removeNeverStarted removes a container that was created but never started,
// typically left by a berth killed between CreateContainer and
// StartContainer. Stopping it would do nothing (the runtime only stops
// running containers) and it would otherwise stay CREATED for ever, or be
// started later by a StartContainer still in flight. While such a start is
// in flight the runtime refuses the removal ("container is in starting
// state"): the error is returned, and the container keeps counting as
// running until a retry removes or stops it. Failures are *SyncError with
// ReasonKillContainerError.
func (m *Manager) removeNeverStarted(ctx context.Context, c *podplan.ContainerStatus) error {
	if err := m.RemoveContainer(ctx, c.ID); err != nil {
		return &SyncError{
			Reason:  ReasonKillContainerError,
			Message: fmt.Sprintf("remove never-started container %q (%s) in state %s: %v", c.Name, c.ID, strings.ToUpper(string(c.State)), err),
			Err:     err,
		}
	}
	return nil
}
