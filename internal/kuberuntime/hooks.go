package kuberuntime

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/handlers"
	"github.com/berth-agent/berth/internal/podenv"
	"github.com/berth-agent/berth/internal/podplan"
)

// Reasons of a failed lifecycle hook: ReasonPostStartHookError is the
// waiting reason of a container whose postStart hook failed (the kubelet's
// PostStartHookError); the others are the kubelet's event and kill reasons.
const (
	ReasonPostStartHookError  = "PostStartHookError"
	KillReasonFailedPostStart = "FailedPostStartHook"
	EventFailedPostStartHook  = "FailedPostStartHook"
	EventFailedPreStopHook    = "FailedPreStopHook"
)

// maxHookMessage bounds what of a hook's error goes into an event: enough
// to see why, not a whole log.
const maxHookMessage = 512

// hookClient sends the httpGet hooks. Like the kubelet's: no proxy, no
// keep-alive (hooks are rare and go to many pods), certificates not
// checked (a pod's serving certificate is not for its IP), same-host
// redirects only. It has no timeout of its own: postStart is bounded by
// the sync's context, preStop by the grace period.
var hookClient = &http.Client{
	Transport: &http.Transport{
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the kubelet's behaviour: pods serve certificates for names, not IPs
		DisableKeepAlives: true,
		Proxy:             nil,
	},
	CheckRedirect: handlers.SameHostRedirects,
}

// runHook runs one lifecycle handler against a container: exec in it,
// httpGet to host (the pod's IP unless the action names one), or sleep.
// timeout bounds an exec on the runtime's side too (0: only ctx). An
// httpGet hook fails only when no response came: the kubelet ignores the
// status code of hooks, and berth keeps that so manifests behave the same.
func (m *Manager) runHook(ctx context.Context, c *v1.Container, containerID string, h *v1.LifecycleHandler, host string, timeout time.Duration) error {
	switch {
	case h.Exec != nil:
		res, err := handlers.NewExecer(m.runtime).ExecSync(ctx, containerID, h.Exec.Command, timeout)
		if err != nil {
			return err
		}
		if res.ExitCode != 0 {
			return fmt.Errorf("command %q exited with %d: %s", strings.Join(h.Exec.Command, " "), res.ExitCode, strings.TrimSpace(string(res.Output)))
		}
		return nil
	case h.HTTPGet != nil:
		req, err := handlers.NewHTTPGetRequest(ctx, h.HTTPGet, c, host, handlers.LifecycleUserAgent)
		if err != nil {
			return err
		}
		resp, err := hookClient.Do(req)
		if err != nil {
			return fmt.Errorf("http get %s: %w", req.URL, err)
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, handlers.MaxOutput))
		return resp.Body.Close()
	case h.Sleep != nil:
		t := m.clock.NewTimer(time.Duration(h.Sleep.Seconds) * time.Second)
		defer t.Stop()
		select {
		case <-t.C():
			return nil
		case <-ctx.Done():
			return fmt.Errorf("container terminated before the %ds sleep hook finished: %w", h.Sleep.Seconds, ctx.Err())
		}
	case h.TCPSocket != nil:
		return errors.New("tcpSocket is not supported as a lifecycle hook")
	}
	return errors.New("lifecycle hook has no handler")
}

// hookHost is the address an httpGet hook without a host goes to: the
// pod's primary IP, or for a pod on the host network the node's (its
// loopback when berth knows no node IP).
func (m *Manager) hookHost(podIPs []string) string {
	switch {
	case len(podIPs) > 0:
		return podIPs[0]
	case m.opts.HostIP != "":
		return m.opts.HostIP
	}
	return "127.0.0.1"
}

// runPostStart runs a container's postStart hook right after it started,
// as the kubelet does: synchronously, bounded only by ctx, so the
// container counts as started once its hook is done.
func (m *Manager) runPostStart(ctx context.Context, c *v1.Container, containerID string, podIPs []string) error {
	if c.Lifecycle == nil || c.Lifecycle.PostStart == nil {
		return nil
	}
	return m.runHook(ctx, c, containerID, c.Lifecycle.PostStart, m.hookHost(podIPs), 0)
}

// failedPostStart handles a postStart hook that failed: a Warning event,
// then the container is killed (its preStop hook runs as for any kill) so
// the restart policy decides whether it runs again. It returns the error
// that makes the container wait with reason PostStartHookError.
func (m *Manager) failedPostStart(ctx context.Context, pod *v1.Pod, c *v1.Container, id, sandboxID string, labels, annotations map[string]string, hookErr error) error {
	msg := truncate(hookErr.Error(), maxHookMessage)
	// The FailedPostStartHook event is the WARN line; this adds the IDs.
	m.log.Debug("postStart hook failed; killing the container", "pod", pod.Name, "namespace", pod.Namespace, "uid", pod.UID,
		"container", c.Name, "containerID", id, "err", hookErr)
	m.event(pod, EventWarning, EventFailedPostStartHook, "PostStartHook failed: "+msg)
	cs := &podplan.ContainerStatus{ID: id, SandboxID: sandboxID, Name: c.Name, State: podplan.ContainerStateRunning, Labels: labels, Annotations: annotations}
	if err := m.KillContainer(ctx, pod, cs, KillReasonFailedPostStart, fmt.Sprintf("Container %s failed its postStart hook, will be killed", c.Name), nil); err != nil {
		m.log.Warn("kill container after its postStart hook failed", "pod", pod.Name, "namespace", pod.Namespace, "uid", pod.UID, "container", c.Name, "err", err)
	}
	return &SyncError{Reason: ReasonPostStartHookError, Message: fmt.Sprintf("postStart hook of container %s failed: %s", c.Name, msg), Err: hookErr}
}

// runPreStop is the Manager's preStopFunc: it runs the container's preStop
// hook (from the spec, or for an orphan or a container the spec no longer
// has, from the container's annotation) within grace. A hook that outlives
// grace is abandoned: its context is cancelled, which ends the exec or
// request, and the kill goes on. Failures are FailedPreStopHook events.
func (m *Manager) runPreStop(ctx context.Context, pod *v1.Pod, c *podplan.ContainerStatus, grace time.Duration) {
	spec, h := m.preStopHook(pod, c)
	if h == nil {
		return
	}
	uid, name, namespace := podIdentity(pod, c.Labels)
	log := m.log.With("pod", name, "namespace", namespace, "uid", uid, "container", c.Name, "containerID", c.ID)
	hctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		host := ""
		if h.HTTPGet != nil && h.HTTPGet.Host == "" {
			host = m.sandboxHost(hctx, c.SandboxID)
		}
		done <- m.runHook(hctx, spec, c.ID, h, host, grace)
	}()
	timer := m.clock.NewTimer(grace)
	defer timer.Stop()
	var err error
	select {
	case err = <-done:
	case <-timer.C():
		cancel()
		<-done
		err = fmt.Errorf("did not finish within the grace period of %v and was abandoned", grace)
	}
	if err != nil {
		// The FailedPreStopHook event is the WARN line.
		log.Debug("preStop hook failed", "err", err)
		m.opts.Recorder.Event(uid, name, namespace, EventWarning, EventFailedPreStopHook, "PreStopHook failed: "+truncate(err.Error(), maxHookMessage))
		return
	}
	log.Debug("preStop hook completed")
}

// preStopHook finds the preStop hook of a container being killed and the
// container it runs against (for named ports): the spec's when the pod
// has the container, else what berth recorded on the container when it
// created it.
func (m *Manager) preStopHook(pod *v1.Pod, c *podplan.ContainerStatus) (*v1.Container, *v1.LifecycleHandler) {
	if pod != nil {
		if spec := podenv.SpecContainer(pod, c.Name); spec != nil {
			if spec.Lifecycle == nil {
				return spec, nil
			}
			return spec, spec.Lifecycle.PreStop
		}
	}
	raw, ok := c.Annotations[criconfig.AnnotationPreStopHook]
	if !ok {
		return nil, nil
	}
	var h v1.LifecycleHandler
	if err := json.Unmarshal([]byte(raw), &h); err != nil {
		m.log.Warn("unreadable preStop hook annotation; container stopped without it", "pod", c.Labels[criconfig.LabelPodName], "namespace", c.Labels[criconfig.LabelPodNamespace], "uid", c.Labels[criconfig.LabelPodUID], "container", c.Name, "containerID", c.ID, "err", err)
		return nil, nil
	}
	spec := &v1.Container{Name: c.Name}
	if ports, ok := c.Annotations[criconfig.AnnotationContainerPorts]; ok {
		_ = json.Unmarshal([]byte(ports), &spec.Ports) // no ports: a named port fails with a clear error
	}
	return spec, &h
}

// sandboxHost is the address of the sandbox's pod, for an httpGet preStop
// hook without a host: its IP, or the node's on the host network.
func (m *Manager) sandboxHost(ctx context.Context, sandboxID string) string {
	resp, err := m.runtime.PodSandboxStatus(ctx, sandboxID, false)
	if err == nil && resp.GetStatus().GetNetwork().GetIp() != "" {
		return resp.GetStatus().GetNetwork().GetIp()
	}
	return m.hookHost(nil)
}

// truncate shortens s to at most n bytes, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
