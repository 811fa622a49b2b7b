//go:build e2e

package kuberuntime

import (
	"context"
	"testing"
)

// TestE2ENotFoundCodes checks, on the bed's containerd, the contract
// berth's idempotent stop and remove paths rest on (isNotFound): an object
// that does not exist is either no error or codes.NotFound, never an error
// berth would have to match by its text, and status calls say NotFound.
func TestE2ENotFoundCodes(t *testing.T) {
	m := newE2EManager(t)
	ctx := context.Background()
	const gone = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	idempotent := map[string]func() error{
		"StopContainer":    func() error { return m.runtime.StopContainer(ctx, gone, 0) },
		"RemoveContainer":  func() error { return m.runtime.RemoveContainer(ctx, gone) },
		"StopPodSandbox":   func() error { return m.runtime.StopPodSandbox(ctx, gone) },
		"RemovePodSandbox": func() error { return m.runtime.RemovePodSandbox(ctx, gone) },
	}
	for name, call := range idempotent {
		if err := call(); err != nil && !isNotFound(err) {
			t.Errorf("containerd %s: %s of a missing object: %v, want success or NotFound", testBed.ContainerdVersion, name, err)
		}
	}
	if _, err := m.runtime.ContainerStatus(ctx, gone, false); !isNotFound(err) {
		t.Errorf("containerd %s: podplan.ContainerStatus of a missing container: %v, want NotFound", testBed.ContainerdVersion, err)
	}
	if _, err := m.runtime.PodSandboxStatus(ctx, gone, false); !isNotFound(err) {
		t.Errorf("containerd %s: PodSandboxStatus of a missing sandbox: %v, want NotFound", testBed.ContainerdVersion, err)
	}
}
