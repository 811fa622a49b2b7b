package bench

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// DefaultTemplate starts berth the way the bench needs it. Another agent
// (the kubelet in standalone mode) is measured by passing its own template
// with the same placeholders.
const DefaultTemplate = "{bin} run --pod-manifest-path {manifests} --manifest-url={url} --http-check-frequency {http_check}" +
	" --container-runtime-endpoint {endpoint} --root-dir {root} --pod-logs-dir {logs}" +
	" --listen {listen} --listen-pods full --socket {socket} --hostname-override {node}"

// Placeholders documents what a template may use; the -agent flag's help
// prints it.
const Placeholders = "{bin} the -bin binary; {manifests} the manifest directory; {url} the HTTP source URL (empty unless the http figure runs);" +
	" {http_check} the HTTP poll period; {endpoint} the CRI endpoint (unix://...); {root} a fresh root dir; {logs} a fresh pod log dir;" +
	" {listen} a free 127.0.0.1:PORT; {socket} a unix socket path; {node} the node name"

// placeholder matches one {name} in a template.
var placeholder = regexp.MustCompile(`\{[a-z_]+\}`)

// expand splits the template on blanks and fills in the placeholders of
// each word, so values with blanks stay one argument. An unknown
// placeholder is an error: a typo would otherwise reach the agent.
func expand(template string, values map[string]string) ([]string, error) {
	var args []string
	var unknown []string
	for _, word := range strings.Fields(template) {
		args = append(args, placeholder.ReplaceAllStringFunc(word, func(p string) string {
			v, ok := values[p[1:len(p)-1]]
			if !ok {
				unknown = append(unknown, p)
			}
			return v
		}))
	}
	if len(unknown) > 0 {
		return nil, fmt.Errorf("agent template: unknown placeholders %v (known: %s)", unknown, Placeholders)
	}
	if len(args) == 0 {
		return nil, errors.New("agent template is empty")
	}
	return args, nil
}

// agentProc is one running agent process.
type agentProc struct {
	cmd     *exec.Cmd
	exited  chan struct{} // closed once reaped
	waitErr error         // valid once exited is closed
}

// startAgent starts args with stdout and stderr appended to logPath and
// NOTIFY_SOCKET set. It gets a process group of its own, so a Ctrl-C in
// the terminal reaches the bench (which then stops the agent and cleans
// up) and not the agent directly.
func startAgent(args []string, logPath, notifySocket string) (*agentProc, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open agent log: %w", err)
	}
	defer log.Close()
	fmt.Fprintf(log, "\n=== %s bench starts: %s\n", time.Now().Format(time.RFC3339Nano), strings.Join(args, " "))
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+notifySocket)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start agent %s: %w", args[0], err)
	}
	p := &agentProc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// pid is the agent's process ID, for /proc.
func (p *agentProc) pid() int { return p.cmd.Process.Pid }

// alive reports an error once the agent has exited: every wait of the
// bench checks it, so a crashed agent fails the figure at once instead of
// after a timeout.
func (p *agentProc) alive() error {
	select {
	case <-p.exited:
		return fmt.Errorf("agent exited: %v", p.waitErr)
	default:
		return nil
	}
}

// kill sends SIGKILL (a crash, as the adoption figure needs) and waits
// until the process is reaped.
func (p *agentProc) kill() error {
	return p.signalAndWait(syscall.SIGKILL, 10*time.Second)
}

// stop asks the agent to exit with SIGTERM (pods stay running) and kills
// it if it outlives grace.
func (p *agentProc) stop(grace time.Duration) error {
	if err := p.signalAndWait(syscall.SIGTERM, grace); err == nil {
		return nil
	}
	return p.kill()
}

// freeze stops the agent's whole process group (SIGSTOP) until the
// returned thaw is called (SIGCONT): the floor's pods, timed right beside
// the agent's, then have the runtime to themselves, and an agent that
// kills pods it does not know (the kubelet) cannot see them. A frozen
// agent uses no CPU, so nothing but the runtime works meanwhile.
func (p *agentProc) freeze() (thaw func() error, err error) {
	pgid := p.pid()
	if err := syscall.Kill(-pgid, syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("freeze agent pid %d: %w", pgid, err)
	}
	return func() error {
		if err := syscall.Kill(-pgid, syscall.SIGCONT); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("thaw agent pid %d: %w", pgid, err)
		}
		return nil
	}, nil
}

// signalAndWait signals the agent and waits up to timeout for its exit.
func (p *agentProc) signalAndWait(sig syscall.Signal, timeout time.Duration) error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("signal agent: %w", err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(timeout):
		return fmt.Errorf("agent pid %d still running %s after %s", p.pid(), timeout, sig)
	}
}
