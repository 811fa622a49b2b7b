package handlers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrExecTimeout is returned by ExecSync when the command outlived its
// timeout: an exec probe counts it as a failure, not as a broken probe.
var ErrExecTimeout = errors.New("command timed out")

// MaxOutput bounds the output ExecSync keeps, and what a hook reads of an
// HTTP response (the kubelet's 10 KiB), so a chatty probe or hook cannot
// grow berth's memory or its events.
const MaxOutput = 10 * 1024

// ExecResult is what a command run in a container produced.
type ExecResult struct {
	// Output is stdout then stderr, at most 10 KiB.
	Output []byte
	// ExitCode is the command's exit status.
	ExitCode int
}

// ExecRuntime is the one CRI call an exec handler makes;
// internalapi.RuntimeService has it. A seam this small keeps this package
// free of everything else the runtime does.
type ExecRuntime interface {
	ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (stdout, stderr []byte, err error)
}

// Execer runs exec probes and exec hooks through the runtime, so both read
// exit codes, timeouts and output the same way.
type Execer struct {
	runtime ExecRuntime
}

// NewExecer is the Execer over the given runtime.
func NewExecer(runtime ExecRuntime) *Execer {
	return &Execer{runtime: runtime}
}

// ExecSync runs cmd in a running container and waits for it, for exec
// probes and hooks. A command that ran returns its exit code (non-zero is
// not an error here: the caller decides what it means); timeout 0 bounds
// the command by ctx only. A command that outlived timeout (or ctx's
// deadline) is ErrExecTimeout; any other failure to run it is an error.
func (e *Execer) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) (ExecResult, error) {
	stdout, stderr, err := e.runtime.ExecSync(ctx, containerID, cmd, timeout)
	out := append(append([]byte{}, stdout...), stderr...)
	if len(out) > MaxOutput {
		out = out[:MaxOutput]
	}
	var exit interface{ ExitStatus() int }
	switch {
	case err == nil:
		return ExecResult{Output: out}, nil
	case errors.As(err, &exit):
		return ExecResult{Output: out, ExitCode: exit.ExitStatus()}, nil
	case status.Code(err) == codes.DeadlineExceeded, errors.Is(err, context.DeadlineExceeded),
		strings.Contains(err.Error(), "timeout") && strings.Contains(err.Error(), "exceeded"):
		// containerd words an exec timeout as "timeout 1s exceeded", with
		// a gRPC code that varies between versions.
		return ExecResult{Output: out}, fmt.Errorf("exec %q in container %s: %w after %v", strings.Join(cmd, " "), shortID(containerID), ErrExecTimeout, timeout)
	}
	return ExecResult{Output: out}, fmt.Errorf("exec %q in container %s: %w", strings.Join(cmd, " "), shortID(containerID), err)
}

// shortID is a container ID as crictl prints it, for messages.
func shortID(id string) string {
	if len(id) > 13 {
		return id[:13]
	}
	return id
}
