package doctor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/criconfig"
)

const (
	// smokeNamespace is the sandbox's own namespace, apart from any pod's.
	smokeNamespace = "berth-doctor"
	// LabelDoctor marks the sandbox of `berth doctor --run`; its value is
	// the sandbox's name, so each run finds and removes exactly its own.
	LabelDoctor = "io.berth.doctor"
	// smokeTimeout bounds starting the sandbox: the runtime may pull the
	// pause image first, and a CNI plugin may take seconds.
	smokeTimeout = 2 * time.Minute
	// cleanupTimeout bounds stopping and removing it.
	cleanupTimeout = time.Minute
)

// smokeConfig is the tiny sandbox the network check starts: the pause
// process in pod network, PID and IPC namespaces, nothing else. It carries
// io.berth.managed (berth's, so removing it keeps the rule that berth
// removes only its own objects) and LabelDoctor, but none of the
// io.kubernetes.pod.* labels: a running berth lists only objects with a
// pod UID label, so it never takes the sandbox for an orphan and removes
// it under the check.
func smokeConfig(name, uid string) *runtimeapi.PodSandboxConfig {
	return &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Namespace: smokeNamespace, Uid: uid},
		Hostname: name,
		Labels:   map[string]string{criconfig.LabelManaged: "true", LabelDoctor: name},
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{
				Network: runtimeapi.NamespaceMode_POD,
				Pid:     runtimeapi.NamespaceMode_POD,
				Ipc:     runtimeapi.NamespaceMode_POD,
			},
		}},
	}
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return hex.EncodeToString(b)
}

// smoke starts a sandbox on the pod network, reads its IP, and stops and
// removes it, always: with a context of its own, so a check cut short
// (Ctrl-C, a timeout) still cleans up. A sandbox the runtime half-created
// before failing is found by its label and removed too.
func (e *env) smoke(ctx context.Context, ri *runtimeInfo) Result {
	r := Result{Check: "pod-network"}
	if ri.err != nil {
		return notChecked(r.Check)
	}
	name := "smoke-" + randomHex(4)
	start := e.opts.Clock.Now()
	ip, runErr := e.runSmoke(ctx, smokeConfig(name, randomHex(16)))
	took := e.opts.Clock.Since(start).Round(time.Millisecond)
	cleanupErr := e.removeSmoke(name)
	switch {
	case runErr != nil:
		r.Status, r.Message = Fail, runErr.Error()
		r.Fix = "see the cni line above and the runtime's log (journalctl -u containerd); pods with hostNetwork: true do not need the pod network"
	case cleanupErr != nil:
		r.Status = Warn
		r.Message = fmt.Sprintf("sandbox %s/%s got IP %s in %s, but removing it failed: %v", smokeNamespace, name, ip, took, cleanupErr)
		r.Fix = fmt.Sprintf("crictl rmp -f $(crictl pods -q --label %s=%s)", LabelDoctor, name)
	default:
		r.Status, r.Message = OK, fmt.Sprintf("sandbox %s/%s got IP %s on the pod network in %s, and was removed", smokeNamespace, name, ip, took)
	}
	if runErr != nil && cleanupErr != nil {
		r.Message += fmt.Sprintf("; removing the sandbox failed too: %v", cleanupErr)
	}
	return r
}

// runSmoke starts the sandbox and returns its IP.
func (e *env) runSmoke(ctx context.Context, cfg *runtimeapi.PodSandboxConfig) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, smokeTimeout)
	defer cancel()
	id, err := e.rs.RunPodSandbox(ctx, cfg, "")
	if err != nil {
		return "", fmt.Errorf("the runtime could not start a sandbox on the pod network: %w", err)
	}
	st, err := e.rs.PodSandboxStatus(ctx, id, false)
	if err != nil {
		return "", fmt.Errorf("status of sandbox %s: %w", id, err)
	}
	if st.GetStatus().GetState() != runtimeapi.PodSandboxState_SANDBOX_READY {
		return "", fmt.Errorf("sandbox %s started but is %s", id, st.GetStatus().GetState())
	}
	ip := st.GetStatus().GetNetwork().GetIp()
	if ip == "" {
		return "", fmt.Errorf("sandbox %s started without an IP address: the network plugin gave it none", id)
	}
	return ip, nil
}

// removeSmoke stops and removes every sandbox labelled with name.
func (e *env) removeSmoke(name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	sbs, err := e.rs.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: map[string]string{LabelDoctor: name}})
	if err != nil {
		return fmt.Errorf("list sandboxes labelled %s=%s: %w", LabelDoctor, name, err)
	}
	var errs []error
	for _, sb := range sbs {
		if sb.GetLabels()[criconfig.LabelManaged] != "true" {
			continue
		}
		if err := e.rs.StopPodSandbox(ctx, sb.GetId()); err != nil {
			errs = append(errs, fmt.Errorf("stop sandbox %s: %w", sb.GetId(), err))
			continue
		}
		if err := e.rs.RemovePodSandbox(ctx, sb.GetId()); err != nil {
			errs = append(errs, fmt.Errorf("remove sandbox %s: %w", sb.GetId(), err))
		}
	}
	return errors.Join(errs...)
}
