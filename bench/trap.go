package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// trapTimeout bounds how long a started container's shell may take to
// install its TERM trap.
const trapTimeout = 30 * time.Second

// containerPID reads a container's host PID from containerd's verbose
// CRI status (info["info"] is JSON with a "pid").
func (r *runner) containerPID(ctx context.Context, id string) (int, error) {
	cctx, cancel := context.WithTimeout(ctx, criTimeout)
	defer cancel()
	resp, err := r.rt.ContainerStatus(cctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		return 0, fmt.Errorf("container %s verbose status: %w", id, err)
	}
	var info struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(resp.GetInfo()["info"]), &info); err != nil || info.PID == 0 {
		return 0, fmt.Errorf("container %s: no pid in verbose status (%v)", id, err)
	}
	return info.PID, nil
}

// shellCatchesTERM reports whether pid is the container's shell (not
// still `runc init`, a Go program whose runtime catches every signal) and
// has its SIGTERM handler, from the Name and SigCgt lines of
// /proc/PID/status.
func shellCatchesTERM(pid int) (bool, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return false, fmt.Errorf("read signal mask: %w", err)
	}
	isShell := false
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "Name:"); ok {
			isShell = strings.TrimSpace(v) == "sh"
		}
		if v, ok := strings.CutPrefix(line, "SigCgt:"); ok {
			mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return false, fmt.Errorf("pid %d: SigCgt %q: %w", pid, v, err)
			}
			return isShell && mask&(1<<(syscall.SIGTERM-1)) != 0, nil
		}
	}
	return false, fmt.Errorf("pid %d: no SigCgt", pid)
}

// waitTrapped waits until every container's shell has installed its TERM
// trap. CRI reports a container RUNNING (StartContainer returns) while
// its PID may still be `runc init` about to exec the shell, and before the
// shell has run `trap`; a TERM in that gap is lost (the shell, PID 1 of
// its namespace, ignores it), so the container only dies at the end of
// the grace period: a remove or edit right after an add would then time
// the grace period, not the agent.
func (r *runner) waitTrapped(ctx context.Context, ctrs map[string]*runtimeapi.Container) error {
	for _, c := range ctrs {
		pid, err := r.containerPID(ctx, c.GetId())
		if err != nil {
			return err
		}
		err = r.poll(ctx, 5*time.Millisecond, trapTimeout, "the TERM trap of "+c.GetId(), func() (bool, error) {
			return shellCatchesTERM(pid)
		})
		if err != nil {
			return err
		}
	}
	return nil
}
