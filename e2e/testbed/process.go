package testbed

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// process is a daemon of the bed (containerd, the registry), known by PID.
// A process the bed started itself is reaped by a goroutine; one found in
// a state file (after Attach) is not our child and is watched through
// /proc. Either way it is only signalled while its command line still holds
// Marker, so a recycled PID is never killed.
type process struct {
	PID    int
	Marker string
	exited chan struct{} // closed once reaped; nil when not our child
}

// startProcess starts name with args in a session of its own (so it
// survives the starting process, as `testbed up` needs), with stdout and
// stderr appended to logPath and env as its environment (nil: ours). The
// last argument is the marker: for our daemons it is the path of their
// config file, inside the bed's Dir.
func startProcess(logPath string, env []string, name string, args ...string) (*process, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open log: %w", err)
	}
	defer log.Close()
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	p := &process{PID: cmd.Process.Pid, Marker: args[len(args)-1], exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // its exit status is in the log; reaping is the point
		close(p.exited)
	}()
	return p, nil
}

// alive reports whether p is still running (a zombie is not). A nil p is
// not alive.
func (p *process) alive() bool {
	if p == nil {
		return false
	}
	if p.exited != nil {
		// Our own child: its reaper knows. Its /proc/PID/cmdline may even
		// read empty for a moment after exec, so it is no evidence here.
		select {
		case <-p.exited:
			return false
		default:
			return true
		}
	}
	return processMatches(p.PID, p.Marker)
}

// stop sends SIGTERM, then SIGKILL if p outlives grace, and waits until it
// is gone. Stopping a process that is not running is a no-op.
func (p *process) stop(grace time.Duration) error {
	if !p.alive() {
		return nil
	}
	if err := syscall.Kill(p.PID, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("SIGTERM pid %d: %w", p.PID, err)
	}
	if p.waitGone(grace) {
		return nil
	}
	return p.kill()
}

// kill sends SIGKILL at once and waits until p is gone. Killing a process
// that is not running is a no-op.
func (p *process) kill() error {
	if !p.alive() {
		return nil
	}
	if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("SIGKILL pid %d: %w", p.PID, err)
	}
	if !p.waitGone(10 * time.Second) {
		return fmt.Errorf("pid %d survived SIGKILL", p.PID)
	}
	return nil
}

// waitGone polls until p is no longer alive or timeout passes.
func (p *process) waitGone(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for p.alive() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// processMatches reports whether pid is a live (not zombie) process whose
// command line contains marker.
func processMatches(pid int, marker string) bool {
	if s := procState(pid); s == 'Z' || s == 0 {
		return false
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && bytes.Contains(cmdline, []byte(marker))
}

// procState returns the state letter of /proc/PID/stat (R, S, Z, ...), or
// 0 when there is no such process.
func procState(pid int) byte {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name is in parentheses and may contain anything.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return 0
	}
	return stat[i+2]
}

// procInfo is one process as seen in /proc.
type procInfo struct {
	PID  int
	PPID int
	Args []string
}

// listProcs reads every process's parent and command line from /proc.
// Processes that vanish while it reads are skipped.
func listProcs() ([]procInfo, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var procs []procInfo
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(string(stat[i+1:]))
		if len(fields) < 2 || fields[0] == "Z" {
			continue
		}
		ppid, err := strconv.Atoi(fields[1])
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		procs = append(procs, procInfo{PID: pid, PPID: ppid, Args: strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")})
	}
	return procs, nil
}
