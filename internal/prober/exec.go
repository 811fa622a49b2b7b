package prober

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/handlers"
)

// Execer runs a command in a container: a *handlers.Execer in berth, a fake in
// tests.
type Execer interface {
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (handlers.ExecResult, error)
}

// runExec is an exec probe: the command's exit status decides, a command
// that outlives the timeout fails, and a command the runtime could not run
// at all (the container is gone, say) is a broken probe whose outcome says
// nothing of the container.
func runExec(ctx context.Context, ex Execer, a *v1.ExecAction, containerID string, timeout time.Duration) (Result, string, error) {
	res, err := ex.ExecSync(ctx, containerID, a.Command, timeout)
	switch {
	case errors.Is(err, handlers.ErrExecTimeout):
		return Failure, fmt.Sprintf("command %q timed out after %v", strings.Join(a.Command, " "), timeout), nil
	case err != nil:
		return Unknown, "", err
	}
	out := strings.TrimSpace(string(res.Output))
	if res.ExitCode != 0 {
		if out == "" {
			out = fmt.Sprintf("command %q exited with %d", strings.Join(a.Command, " "), res.ExitCode)
		}
		return Failure, out, nil
	}
	return Success, out, nil
}
