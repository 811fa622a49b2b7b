package doctor

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestCheckRuntime: the runtime line names the runtime and its version
// when it is ready, and fails with the reason when it is not.
func TestCheckRuntime(t *testing.T) {
	tests := []struct {
		name   string
		rt     func() *fakeRuntime // nil: unreachable
		want   Status
		wantIn []string
	}{
		{"ready", func() *fakeRuntime { return newFakeRuntime(nil) }, OK,
			[]string{"containerd 1.6.20~ds1 (CRI v1) at unix:///run/fake.sock is ready"}},
		{"unreachable", nil, Fail, []string{"connection refused"}},
		{"wrong CRI version", func() *fakeRuntime {
			f := newFakeRuntime(nil)
			f.version = &runtimeapi.VersionResponse{RuntimeName: "old", RuntimeVersion: "0.9", RuntimeApiVersion: "v1alpha2"}
			return f
		}, Fail, []string{`speaks CRI "v1alpha2"`}},
		{"runtime not ready", func() *fakeRuntime {
			f := newFakeRuntime(nil)
			f.status.Status.Conditions[0] = &runtimeapi.RuntimeCondition{Type: runtimeapi.RuntimeReady, Reason: "Starting", Message: "loading plugins"}
			return f
		}, Fail, []string{"is not ready: Starting: loading plugins"}},
		{"no RuntimeReady condition", func() *fakeRuntime {
			f := newFakeRuntime(nil)
			f.status.Status.Conditions = f.status.Status.Conditions[1:]
			return f
		}, Fail, []string{"is not ready (not reported)"}},
		{"another condition false", func() *fakeRuntime {
			f := newFakeRuntime(nil)
			f.status.Status.Conditions = append(f.status.Status.Conditions, &runtimeapi.RuntimeCondition{
				Type: "ContainerdHasNoDeprecationWarnings", Reason: "ContainerdHasDeprecationWarnings", Message: `{"io.containerd.deprecation/cri-registry-configs":"..."}`})
			return f
		}, Warn, []string{"is ready, but reports ContainerdHasNoDeprecationWarnings: ContainerdHasDeprecationWarnings"}},
		{"network not ready is the cni line's", func() *fakeRuntime {
			f := newFakeRuntime(nil)
			f.status.Status.Conditions[1].Status = false
			return f
		}, OK, []string{"is ready"}},
		{"status fails", func() *fakeRuntime {
			f := newFakeRuntime(nil)
			f.statusErr = errUnimplemented
			return f
		}, Fail, []string{"container runtime status at unix:///run/fake.sock"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var rt *fakeRuntime
			if tt.rt != nil {
				rt = tt.rt()
			}
			e := testEnv(t, rt, nil, Options{})
			checkResult(t, checkRuntime(askedRuntime(t, e), e.opts.RuntimeEndpoint), tt.want, tt.wantIn...)
		})
	}
}

// TestAskRuntimeConfig: containerd's configuration is read from its
// verbose status, and a garbled one is said so.
func TestAskRuntimeConfig(t *testing.T) {
	rt := newFakeRuntime(map[string]any{"sandboxImage": "registry.k8s.io/pause:3.9", "cni": map[string]any{"confDir": "/etc/cni/net.d", "binDir": "/usr/lib/cni"}})
	rt.status.Info["cniconfig"] = `{"PluginDirs":["/usr/lib/cni"],"PluginConfDir":"/etc/cni/net.d","PluginMaxConfNum":1}`
	ri := askedRuntime(t, testEnv(t, rt, nil, Options{}))
	if ri.err != nil || ri.configErr != nil {
		t.Fatalf("err %v, configErr %v", ri.err, ri.configErr)
	}
	if ri.config.SandboxImage != "registry.k8s.io/pause:3.9" || ri.config.CNI.BinDir != "/usr/lib/cni" || ri.cni.PluginConfDir != "/etc/cni/net.d" || ri.cni.PluginMaxConfNum != 1 {
		t.Errorf("config %+v, cni %+v", ri.config, ri.cni)
	}
	rt.status.Info["config"] = "{"
	if ri := askedRuntime(t, testEnv(t, rt, nil, Options{})); ri.configErr == nil {
		t.Error("a garbled config was read without an error")
	}
}
