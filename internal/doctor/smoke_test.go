package doctor

import (
	"context"
	"errors"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/criconfig"
)

// smokeRuntime is a fakeRuntime whose RunPodSandbox can leave a sandbox
// behind while failing, as a runtime whose network setup fails midway.
type smokeRuntime struct {
	*fakeRuntime
	runErr error
	noIP   bool // the network plugin gave the sandbox no address
}

func (s *smokeRuntime) PodSandboxStatus(ctx context.Context, id string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	resp, err := s.fakeRuntime.PodSandboxStatus(ctx, id, verbose)
	if err == nil && s.noIP {
		resp.Status.Network = nil
	}
	return resp, err
}

func (s *smokeRuntime) RunPodSandbox(ctx context.Context, cfg *runtimeapi.PodSandboxConfig, handler string) (string, error) {
	id, err := s.fakeRuntime.RunPodSandbox(ctx, cfg, handler)
	if err != nil {
		return "", err
	}
	if s.runErr != nil {
		return "", s.runErr
	}
	return id, nil
}

// TestSmoke: the sandbox gets an IP and is removed, whatever happened;
// the runtime's error is the FAIL's message.
func TestSmoke(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(s *smokeRuntime)
		want   Status
		wantIn string
	}{
		{"IP and removed", func(s *smokeRuntime) {}, OK, "got IP 192.168.192.168 on the pod network"},
		{"runtime refuses", func(s *smokeRuntime) {
			s.InjectError("RunPodSandbox", errors.New("failed to setup network for sandbox: plugin type=\"bridge\" failed"))
		}, Fail,
			`could not start a sandbox on the pod network: failed to setup network for sandbox: plugin type="bridge" failed`},
		{"fails after creating it", func(s *smokeRuntime) { s.runErr = errors.New("cni timeout") }, Fail, "cni timeout"},
		{"no IP", func(s *smokeRuntime) { s.noIP = true }, Fail, "started without an IP address"},
		{"removal fails", func(s *smokeRuntime) { s.InjectError("StopPodSandbox", errors.New("device busy")) }, Warn, "but removing it failed: stop sandbox"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &smokeRuntime{fakeRuntime: newFakeRuntime(nil)}
			tt.setup(s)
			e := testEnv(t, s.fakeRuntime, nil, Options{})
			e.rs = s
			checkResult(t, e.smoke(t.Context(), askedRuntime(t, e)), tt.want, tt.wantIn)
			left, err := s.ListPodSandbox(t.Context(), nil)
			if err != nil {
				t.Fatal(err)
			}
			wantLeft := 0
			if tt.want == Warn {
				wantLeft = 1
			}
			if len(left) != wantLeft {
				t.Errorf("%d sandboxes left, want %d", len(left), wantLeft)
			}
		})
	}
}

// TestSmokeConfig: the sandbox is berth's (io.berth.managed) and
// doctor's, but carries no pod UID label, so a running berth's relist
// never takes it for an orphan and removes it under the check.
func TestSmokeConfig(t *testing.T) {
	cfg := smokeConfig("smoke-1", "u1")
	if cfg.Labels[criconfig.LabelManaged] != "true" || cfg.Labels[LabelDoctor] != "smoke-1" {
		t.Errorf("labels %v", cfg.Labels)
	}
	for _, l := range []string{criconfig.LabelPodUID, criconfig.LabelPodName, criconfig.LabelPodNamespace} {
		if _, ok := cfg.Labels[l]; ok {
			t.Errorf("label %s set: a running berth would take the sandbox for its own pod", l)
		}
	}
	if cfg.Metadata.Namespace != smokeNamespace || cfg.Linux.SecurityContext.NamespaceOptions.Network != runtimeapi.NamespaceMode_POD {
		t.Errorf("not a pod-network sandbox of its own namespace: %+v", cfg)
	}
}
