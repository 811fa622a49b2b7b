package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/podplan"
)

// SyncOptions are what the caller of one SyncPod may hand it beside the
// pod, its status and its plan.
type SyncOptions struct {
	// BeforePostStart is called when a started container runs and its
	// postStart hook is about to run: the caller's start limit counts a
	// start up to running, and a hook may take as long as it likes (it has
	// no timeout of its own) without holding other pods back. nil calls
	// nothing.
	BeforePostStart func()
}

// PlanPod computes the actions SyncPod takes for the pod from its observed
// status (nil: a pod the runtime knows nothing about) and the probes'
// verdicts (nil: no probes): podplan.ComputePodActions, behind the runtime
// manager, so its caller decides on the plan (whether it starts a sandbox)
// and hands that same plan to SyncPod, which never plans itself.
func (m *Manager) PlanPod(pod *v1.Pod, status *podplan.PodStatus, health podplan.ContainerHealth) podplan.PodActions {
	return podplan.ComputePodActions(pod, status, health)
}

// SyncPod brings the pod's runtime state one step closer to its spec, in the
// kubelet's order: take the actions PlanPod planned from the observed
// status; kill the pod, or the containers to kill; create the sandbox;
// start the next init container; restart sidecars; start the app
// containers. status is what the runtime reported for the pod (nil or
// empty for a new pod), the one actions were planned from. One sync plans
// once, where its caller decides whether the pod may act now (a sandbox
// start waits for a start slot): a nil plan is the caller's bug, answered
// with ErrNoPlan and no runtime call, never planned here.
//
// It never waits: a container in crash-loop back-off is reported as
// CrashLoopBackOff with the time left (SyncResult.RetryAfter), without a
// runtime call, and the agent calls SyncPod again when that time is up or
// when the pod's state changes. It stops at the first failure of a step the
// later ones depend on (a kill, the sandbox, an init container); app
// container starts are independent of each other.
func (m *Manager) SyncPod(ctx context.Context, pod *v1.Pod, status *podplan.PodStatus, plan *podplan.PodActions, opts SyncOptions) SyncResult {
	if plan == nil {
		return SyncResult{Results: []ActionResult{{Action: ActionSyncPod, Target: pod.Name, Err: fmt.Errorf("sync pod %s: %w", podRef(pod), ErrNoPlan)}}}
	}
	if status == nil {
		status = &podplan.PodStatus{UID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
	}
	if err := m.config.RefreshObjectVolumes(pod); err != nil {
		// The containers keep the files they had; the next sync retries.
		m.event(pod, EventWarning, "FailedMount", "Updating configMap or secret volumes failed: "+err.Error())
	}
	actions := *plan
	// Containers start from the history of those that ran: one that never
	// started is no restart (podplan.PodActions.ContainersToRemove).
	started, _ := podplan.SplitNeverStarted(status)
	m.log.Debug("syncing pod", "pod", pod.Name, "namespace", pod.Namespace, "uid", pod.UID,
		"killPod", actions.KillPod, "createSandbox", actions.CreateSandbox, "attempt", actions.Attempt,
		"toKill", len(actions.ContainersToKill), "toStart", len(actions.ContainersToStart),
		"nextInit", actions.NextInitContainer != nil, "sidecars", len(actions.SidecarsToStart), "terminal", actions.Terminal)
	result := SyncResult{Terminal: actions.Terminal, Failed: actions.Failed}

	if actions.ResetTrigger != nil {
		reset := m.resetContainers(ctx, pod, actions.ResetTrigger, actions.ContainersToReset)
		reset.Terminal, reset.Failed = result.Terminal, result.Failed
		return reset
	}
	if actions.CreateSandbox && actions.SandboxID != "" {
		m.event(pod, EventNormal, "SandboxChanged", "Pod sandbox changed, it will be killed and re-created.")
	}
	if !m.killFirst(ctx, pod, status, actions, &result) {
		return result
	}
	if !actions.CreateSandbox && actions.NextInitContainer == nil && len(actions.SidecarsToStart) == 0 && len(actions.ContainersToStart) == 0 {
		return result
	}
	target, ok := m.startSandbox(ctx, pod, status, actions, &result)
	if !ok {
		return result
	}
	target.beforePostStart = opts.BeforePostStart
	m.startContainers(ctx, pod, actions, started, target, &result)
	return result
}

// ErrNoPlan is SyncPod's answer to a call without a plan.
var ErrNoPlan = errors.New("no plan: SyncPod takes the actions PlanPod computed")

// killFirst takes the plan's first steps: it kills the pod, or removes
// the containers that never started and kills the containers to kill. It
// reports whether the sync goes on.
func (m *Manager) killFirst(ctx context.Context, pod *v1.Pod, status *podplan.PodStatus, actions podplan.PodActions, result *SyncResult) bool {
	if !actions.KillPod {
		return m.killContainers(ctx, pod, actions, result)
	}
	k := m.killPod(ctx, pod, status, nil)
	result.add(ActionKillPodSandbox, pod.Name, asSyncError(k.err(), ReasonKillPodSandboxError), 0)
	if k.live != nil || (k.dead != nil && !actions.CreateSandbox) {
		return false
	}
	if k.dead != nil {
		// Nothing of the old sandbox runs: the pod gets its new one now
		// rather than wait, maybe forever, for a runtime that cannot
		// tear the dead one down. The stop is retried with the pod's
		// removal and by garbage collection.
		result.Results[len(result.Results)-1].Recorded = true
		m.event(pod, EventWarning, "FailedKillPod", fmt.Sprintf(
			"A stopped sandbox could not be cleaned up; creating a new one anyway: %s", strings.ReplaceAll(k.dead.Error(), "\n", "; ")))
	}
	return true
}

// killContainers removes the containers that never started, then kills
// the containers to kill; it reports whether all went well.
func (m *Manager) killContainers(ctx context.Context, pod *v1.Pod, actions podplan.PodActions, result *SyncResult) bool {
	for _, c := range actions.ContainersToRemove {
		err := m.removeNeverStarted(ctx, c)
		result.add(ActionRemoveContainer, c.Name, err, 0)
		if err != nil {
			return false
		}
	}
	for _, k := range actions.ContainersToKill {
		err := m.KillContainer(ctx, pod, k.Status, k.Reason, k.Message, nil)
		result.add(ActionKillContainer, k.Name, asSyncError(err, ReasonKillContainerError), 0)
		if err != nil {
			return false
		}
	}
	return true
}

// startSandbox builds the pod's sandbox config and, when the plan says so,
// creates its sandbox: it returns where the containers start, or ok false
// after recording the failure.
func (m *Manager) startSandbox(ctx context.Context, pod *v1.Pod, status *podplan.PodStatus, actions podplan.PodActions, result *SyncResult) (startTarget, bool) {
	var err error
	if actions.CreateSandbox {
		err = m.checkRuntimeFeatures(ctx, pod)
	}
	var sandboxConfig *runtimeapi.PodSandboxConfig
	if err == nil {
		sandboxConfig, err = m.config.SandboxConfig(pod, actions.Attempt)
	}
	if err != nil {
		result.add(ActionCreatePodSandbox, pod.Name, &SyncError{Reason: ReasonCreatePodSandboxError, Message: err.Error(), Err: err}, 0)
		result.Results[len(result.Results)-1].Recorded = true
		m.event(pod, EventWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: "+err.Error())
		return startTarget{}, false
	}
	target := startTarget{sandboxID: actions.SandboxID, sandboxConfig: sandboxConfig, podIPs: status.IPs}
	if !actions.CreateSandbox {
		return target, true
	}
	id, ips, err := m.createSandbox(ctx, pod, sandboxConfig)
	result.add(ActionCreatePodSandbox, pod.Name, err, m.sandboxNameRetryAfter(pod.UID, err))
	if err != nil {
		result.Results[len(result.Results)-1].Recorded = true
		m.event(pod, EventWarning, "FailedCreatePodSandBox", "Failed to create pod sandbox: "+syncMessage(err))
		return startTarget{}, false
	}
	target.sandboxID, target.podIPs = id, ips
	return target, true
}

// startContainers starts the next init container, then, unless it failed,
// the sidecars to restart and the app containers. A sidecar that fails to
// restart does not hold the app containers back: they were already
// initialized.
func (m *Manager) startContainers(ctx context.Context, pod *v1.Pod, actions podplan.PodActions, started *podplan.PodStatus, target startTarget, result *SyncResult) {
	if c := actions.NextInitContainer; c != nil {
		res := m.startContainer(ctx, pod, c, started, target, ActionInitContainer)
		result.Results = append(result.Results, res)
		if res.Err != nil {
			return
		}
	}
	for _, i := range actions.SidecarsToStart {
		result.Results = append(result.Results, m.startContainer(ctx, pod, &pod.Spec.InitContainers[i], started, target, ActionInitContainer))
	}
	for _, i := range actions.ContainersToStart {
		result.Results = append(result.Results, m.startContainer(ctx, pod, &pod.Spec.Containers[i], started, target, ActionStartContainer))
	}
}

// createSandbox prepares the pod's directories and runs its sandbox,
// returning the sandbox ID and the pod's IPs (none on the host network).
// Errors are *SyncError with ReasonCreatePodSandboxError.
func (m *Manager) createSandbox(ctx context.Context, pod *v1.Pod, cfg *runtimeapi.PodSandboxConfig) (string, []string, error) {
	fail := func(format string, args ...any) (string, []string, error) {
		err := fmt.Errorf(format, args...)
		return "", nil, &SyncError{Reason: ReasonCreatePodSandboxError, Message: err.Error(), Err: errors.Unwrap(err)}
	}
	podDir, err := m.config.PodDir(pod.UID)
	if err != nil {
		return fail("%w", err)
	}
	if err := m.config.EnsurePodDirs(podDir, cfg.LogDirectory); err != nil {
		return fail("%w", err)
	}
	id, err := m.runtime.RunPodSandbox(ctx, cfg, criconfig.RuntimeHandler(pod))
	if err != nil {
		return fail("run sandbox: %w", err)
	}
	resp, err := m.runtime.PodSandboxStatus(ctx, id, false)
	if err != nil {
		return fail("read the status of new sandbox %s: %w", id, err)
	}
	m.RememberSandbox(id, resp.GetStatus())
	if pod.Spec.HostNetwork {
		return id, nil, nil
	}
	var ips []string
	if net := resp.GetStatus().GetNetwork(); net != nil {
		if net.GetIp() != "" {
			ips = append(ips, net.GetIp())
		}
		for _, ip := range net.GetAdditionalIps() {
			ips = append(ips, ip.GetIp())
		}
	}
	return id, ips, nil
}

// startTarget is where containers are started: the sandbox and what
// containers need to know of it.
type startTarget struct {
	sandboxID     string
	sandboxConfig *runtimeapi.PodSandboxConfig
	podIPs        []string
	// beforePostStart is SyncOptions.BeforePostStart.
	beforePostStart func()
}

// startContainer starts one container unless it is in crash-loop back-off:
// pull per policy, build the config, create, start. Each failure is a
// *SyncError with the kubelet's reason, and an event (BackOff, Failed,
// FailedPostStartHook, or EnsureImage's), so the result says Recorded.
func (m *Manager) startContainer(ctx context.Context, pod *v1.Pod, c *v1.Container, status *podplan.PodStatus, t startTarget, action string) (res ActionResult) {
	res = ActionResult{Action: action, Target: c.Name}
	defer func() { res.Recorded = res.Err != nil }()
	if remaining, msg := m.crashLoopBackoff(pod, c, status); remaining > 0 {
		m.event(pod, EventWarning, "BackOff", fmt.Sprintf("Back-off restarting failed container %s in pod %s", c.Name, podRef(pod)))
		res.Err = &SyncError{Reason: ReasonCrashLoopBackOff, Message: msg}
		res.RetryAfter = remaining
		return res
	}
	img, err := m.EnsureImage(ctx, pod, c, t.sandboxConfig)
	res.Pulling = img.Pulling
	if err != nil {
		res.Err, res.RetryAfter = err, img.RetryAfter
		return res
	}
	retryAfter, pulling, err := m.ensureImageVolumes(ctx, pod, c, t.sandboxConfig)
	res.Pulling += pulling
	if err != nil {
		res.Err, res.RetryAfter = err, retryAfter
		return res
	}
	restartCount := m.nextRestartCount(pod, c.Name, status)
	cfg, err := m.containerConfig(ctx, pod, c, restartCount, t.podIPs, img.Ref)
	if err != nil {
		res.Err = err
		m.event(pod, EventWarning, "Failed", "Error: "+syncMessage(err))
		return res
	}
	id, err := m.runtime.CreateContainer(ctx, t.sandboxID, cfg, t.sandboxConfig)
	if err != nil {
		res.Err = &SyncError{Reason: ReasonCreateContainerError, Message: fmt.Sprintf("create container %s: %v", c.Name, err), Err: err}
		m.event(pod, EventWarning, "Failed", "Error: "+syncMessage(res.Err))
		return res
	}
	m.event(pod, EventNormal, "Created", "Created container "+c.Name)
	if err := m.runtime.StartContainer(ctx, id); err != nil {
		res.Err = &SyncError{Reason: ReasonRunContainerError, Message: fmt.Sprintf("start container %s (%s): %v", c.Name, id, err), Err: err}
		m.event(pod, EventWarning, "Failed", "Error: "+syncMessage(res.Err))
		return res
	}
	m.event(pod, EventNormal, "Started", "Started container "+c.Name)
	if t.beforePostStart != nil && c.Lifecycle != nil && c.Lifecycle.PostStart != nil {
		t.beforePostStart()
	}
	if err := m.runPostStart(ctx, c, id, t.podIPs); err != nil {
		res.Err = m.failedPostStart(ctx, pod, c, id, t.sandboxID, cfg.Labels, cfg.Annotations, err)
	}
	return res
}

// containerConfig is the container's CRI config from the pod-to-CRI
// translation (criconfig); every failure is a *SyncError with reason
// CreateContainerConfigError and a message naming what in the manifest is
// wrong.
func (m *Manager) containerConfig(ctx context.Context, pod *v1.Pod, c *v1.Container, restartCount int, podIPs []string, imageRef string) (*runtimeapi.ContainerConfig, error) {
	cfg, err := m.config.ContainerConfig(ctx, pod, c, restartCount, podIPs, imageRef)
	if err != nil {
		return nil, &SyncError{Reason: ReasonCreateContainerConfigError, Message: err.Error(), Err: err}
	}
	return cfg, nil
}

// nextRestartCount is the restart count of the container's next start: one
// more than its newest status. Without any status (the runtime lost its
// state, say after a reboot) it continues from the newest <n>.log in the
// container's log directory, as the kubelet does, so a new start never
// appends to or overwrites an old log.
func (m *Manager) nextRestartCount(pod *v1.Pod, name string, status *podplan.PodStatus) int {
	if cs := status.FindContainer(name); cs != nil {
		return cs.RestartCount + 1
	}
	return m.config.NextLogIndex(pod, name)
}

// asSyncError gives err the reason unless it already carries one.
func asSyncError(err error, reason string) error {
	if err == nil {
		return nil
	}
	var se *SyncError
	if errors.As(err, &se) {
		return err
	}
	return &SyncError{Reason: reason, Message: err.Error(), Err: err}
}

// event records a pod event.
func (m *Manager) event(pod *v1.Pod, typ EventType, reason, message string) {
	m.opts.Recorder.Event(pod.UID, pod.Name, pod.Namespace, typ, reason, message)
}

// podRef names a pod in messages the way the kubelet's format.Pod does.
func podRef(pod *v1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}
