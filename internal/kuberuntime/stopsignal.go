package kuberuntime

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/podplan"
)

// Stop signals (KEP-4960): a container's lifecycle.stopSignal replaces the
// signal that starts its graceful stop (the image's STOPSIGNAL, else
// SIGTERM). berth passes it to the runtime in ContainerConfig.StopSignal,
// but containerd 1.6 to 2.1 ignore that field (their CRI plugin predates
// it and sends the image's signal), so berth delivers the signal itself: it finds the
// container's init process in the runtime's verbose status, opens a pidfd
// on it while the runtime still reports the container running (so a
// recycled PID is never signalled), sends the signal, waits up to the
// grace period for the process to exit, then has the runtime finish the
// stop with SIGKILL. The signal is recorded on the container
// (criconfig.AnnotationStopSignal), so an orphan or a container whose spec has
// changed is stopped the way it was started.

// stopSignalPoll bounds each wait on the pidfd, so a cancelled context is
// noticed while a long grace period runs.
const stopSignalPoll = 200 * time.Millisecond

// signalNumber is the Linux number of a Kubernetes signal name: the
// classic names from the kernel's table, SIGRTMIN as 34 and SIGRTMAX as 64
// with their +n/-n forms, as Docker and containerd number them.
func signalNumber(name string) (unix.Signal, bool) {
	const rtmin, rtmax = 34, 64
	switch {
	case name == "SIGRTMIN":
		return rtmin, true
	case name == "SIGRTMAX":
		return rtmax, true
	case strings.HasPrefix(name, "SIGRTMIN+"):
		n, err := strconv.Atoi(strings.TrimPrefix(name, "SIGRTMIN+"))
		return unix.Signal(rtmin + n), err == nil && n > 0 && rtmin+n <= rtmax
	case strings.HasPrefix(name, "SIGRTMAX-"):
		n, err := strconv.Atoi(strings.TrimPrefix(name, "SIGRTMAX-"))
		return unix.Signal(rtmax - n), err == nil && n > 0 && rtmax-n >= rtmin
	case name == "SIGCLD":
		return unix.SIGCHLD, true
	case name == "SIGPOLL":
		return unix.SIGIO, true
	}
	s := unix.SignalNum(name)
	return s, s != 0
}

// stopContainer stops a container within grace seconds: through the
// runtime alone, or, when the container records a stop signal, by
// delivering that signal first (see above). If berth cannot deliver it
// (no PID from the runtime, a kernel without pidfd, a permission refused)
// it says so in a Warning event and lets the runtime stop the container
// with its default signal: a stop must never fail for want of a signal.
func (m *Manager) stopContainer(ctx context.Context, pod *v1.Pod, c *podplan.ContainerStatus, grace int64) error {
	name := c.Annotations[criconfig.AnnotationStopSignal]
	if name == "" || grace == 0 {
		return m.runtime.StopContainer(ctx, c.ID, grace)
	}
	sig, ok := signalNumber(name)
	if !ok {
		return m.runtime.StopContainer(ctx, c.ID, grace)
	}
	start := m.clock.Now()
	exited, err := m.signalContainer(ctx, c.ID, sig, time.Duration(grace)*time.Second)
	if err != nil {
		uid, podName, namespace := podIdentity(pod, c.Labels)
		m.opts.Recorder.Event(uid, podName, namespace, EventWarning, "StopSignalFailed",
			fmt.Sprintf("Stop signal %s not delivered to container %s (%v); stopping it with the runtime's signal", name, c.Name, err))
		left := grace - int64(m.clock.Since(start).Seconds())
		return m.runtime.StopContainer(ctx, c.ID, max(left, minimumGracePeriodSeconds))
	}
	m.log.Debug("stop signal delivered", "containerID", c.ID, "container", c.Name, "signal", name, "exited", exited)
	// Exited or not, the runtime finishes the stop (SIGKILL for what is
	// left) and records the exit.
	return m.runtime.StopContainer(ctx, c.ID, 0)
}

// signalContainer sends sig to the container's init process and waits up
// to grace for it to exit, reporting whether it did. An error means the
// signal was not sent.
func (m *Manager) signalContainer(ctx context.Context, id string, sig unix.Signal, grace time.Duration) (bool, error) {
	pid, err := m.containerPID(ctx, id)
	if err != nil {
		return false, err
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(fd)
	// The pidfd pins the process it was opened on. If the runtime still
	// reports the container running with that PID, it is the container's.
	if again, err := m.containerPID(ctx, id); err != nil || again != pid {
		return false, fmt.Errorf("container %s changed while being signalled (pid %d, then %d: %v)", id, pid, again, err)
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil {
		return false, fmt.Errorf("pidfd_send_signal %d: %w", pid, err)
	}
	return waitExit(ctx, fd, grace), nil
}

// waitExit waits until the process behind the pidfd exits (the pidfd turns
// readable), grace runs out or ctx ends.
func waitExit(ctx context.Context, fd int, grace time.Duration) bool {
	deadline := time.Now().Add(grace)
	for ctx.Err() == nil {
		left := time.Until(deadline)
		if left <= 0 {
			return false
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(min(left, stopSignalPoll).Milliseconds())+1)
		if n > 0 {
			return true
		}
		if err != nil && !errors.Is(err, unix.EINTR) {
			return false
		}
	}
	return false
}

// containerPID is the host PID of a running container's init process, from
// the runtime's verbose status (containerd and CRI-O put it in
// info["info"] as "pid").
func (m *Manager) containerPID(ctx context.Context, id string) (int, error) {
	resp, err := m.runtime.ContainerStatus(ctx, id, true)
	if err != nil {
		return 0, fmt.Errorf("status of container %s: %w", id, err)
	}
	if s := resp.GetStatus().GetState(); s != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return 0, fmt.Errorf("container %s is %s", id, s)
	}
	var info struct {
		PID int `json:"pid"`
	}
	if raw := resp.GetInfo()["info"]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &info); err != nil {
			return 0, fmt.Errorf("read the pid of container %s: %w", id, err)
		}
	}
	if info.PID <= 0 {
		return 0, fmt.Errorf("the runtime reports no pid for container %s", id)
	}
	return info.PID, nil
}
