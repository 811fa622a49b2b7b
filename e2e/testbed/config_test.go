package testbed

import (
	"strings"
	"testing"
)

func TestContainerdConfigRender(t *testing.T) {
	cfg := containerdConfig{
		Root:        "/bed/root",
		State:       "/bed/state",
		Socket:      "/bed/containerd.sock",
		RuncRoot:    "/bed/runc",
		OptDir:      "/bed/opt",
		CNIConfDir:  "/bed/cni/net.d",
		CNIBinDir:   "/usr/lib/cni",
		RegistryDir: "/bed/certs.d",
		Snapshotter: "native",
		SandboxImg:  PauseRef,
	}
	data, err := cfg.render()
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	got := string(data)
	for _, want := range []string{
		"version = 2\n",
		`root = "/bed/root"`,
		`state = "/bed/state"`,
		"[grpc]\n  address = \"/bed/containerd.sock\"",
		"[ttrpc]\n  address = \"/bed/containerd.sock.ttrpc\"",
		`sandbox_image = "registry.k8s.io/pause:3.9"`,
		"restrict_oom_score_adj = true",
		`stream_server_port = "0"`,
		`snapshotter = "native"`,
		`runtime_type = "io.containerd.runc.v2"`,
		`Root = "/bed/runc"`,
		`bin_dir = "/usr/lib/cni"`,
		`conf_dir = "/bed/cni/net.d"`,
		`config_path = "/bed/certs.d"`,
		`path = "/bed/opt"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("config lacks %q:\n%s", want, got)
		}
	}
}

func TestContainerdConfigQuotes(t *testing.T) {
	data, err := containerdConfig{Root: `/tmp/a "quoted" \dir`}.render()
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	if want := `root = "/tmp/a \"quoted\" \\dir"`; !strings.Contains(string(data), want) {
		t.Errorf("config lacks %s:\n%s", want, data)
	}
}

func TestRegistryHostsTOML(t *testing.T) {
	got := string(registryHostsTOML("127.0.0.1:5001"))
	for _, want := range []string{
		`server = "http://127.0.0.1:5001"`,
		`[host."http://127.0.0.1:5001"]`,
		`capabilities = ["pull", "resolve", "push"]`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("hosts.toml lacks %q:\n%s", want, got)
		}
	}
}

// TestContainerdConfigVersions checks what each config format must carry
// for its containerd: 2.x moved the CRI settings to two plugins and the
// sandbox image to pinned_images, 2.3 on the listeners to server plugins
// (the ttrpc socket named outright: its default is shared), and 1.7 on
// must not share NRI's socket.
func TestContainerdConfigVersions(t *testing.T) {
	base := containerdConfig{
		Root: "/bed/root", State: "/bed/state", Socket: "/bed/containerd.sock", RuncRoot: "/bed/runc",
		OptDir: "/bed/opt", CNIConfDir: "/bed/cni/net.d", CNIBinDir: "/usr/lib/cni",
		RegistryDir: "/bed/certs.d", Snapshotter: "overlayfs", SandboxImg: PauseRef,
	}
	tests := []struct {
		name    string
		version int
		nri     bool
		want    []string
		notWant []string
	}{
		{
			name: "1.6", version: 2,
			want:    []string{"version = 2\n", `sandbox_image = "registry.k8s.io/pause:3.9"`, `bin_dir = "/usr/lib/cni"`},
			notWant: []string{"nri", "io.containerd.cri.v1"},
		},
		{
			name: "1.7", version: 2, nri: true,
			want: []string{"version = 2\n", "[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = true", `sandbox_image = "registry.k8s.io/pause:3.9"`},
		},
		{
			name: "2.x", version: 3, nri: true,
			want: []string{
				"version = 3\n",
				"[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = true",
				"[plugins.\"io.containerd.cri.v1.images\".pinned_images]\n    sandbox = \"registry.k8s.io/pause:3.9\"",
				"[plugins.\"io.containerd.cri.v1.images\"]\n  snapshotter = \"overlayfs\"",
				"[plugins.\"io.containerd.cri.v1.runtime\"]\n  restrict_oom_score_adj = true",
				`bin_dirs = ["/usr/lib/cni"]`,
				`conf_dir = "/bed/cni/net.d"`,
				`config_path = "/bed/certs.d"`,
				`Root = "/bed/runc"`,
				`stream_server_port = "0"`,
				"[grpc]\n  address = \"/bed/containerd.sock\"",
			},
			notWant: []string{"sandbox_image", "bin_dir =", "io.containerd.server.v1"},
		},
		{
			name: "2.3 on", version: 4, nri: true,
			want: []string{
				"version = 4\n",
				"[plugins.\"io.containerd.server.v1.grpc\"]\n  address = \"/bed/containerd.sock\"",
				"[plugins.\"io.containerd.server.v1.ttrpc\"]\n  address = \"/bed/containerd.sock.ttrpc\"",
				"[plugins.\"io.containerd.nri.v1.nri\"]\n  disable = true",
				"[plugins.\"io.containerd.cri.v1.images\".pinned_images]\n    sandbox = \"registry.k8s.io/pause:3.9\"",
				"[plugins.\"io.containerd.cri.v1.runtime\"]\n  restrict_oom_score_adj = true\n  ignore_deprecation_warnings = [\"io.containerd.deprecation/cgroup-v1\"]",
				`bin_dirs = ["/usr/lib/cni"]`,
				`Root = "/bed/runc"`,
				`stream_server_port = "0"`,
				"[plugins.\"io.containerd.internal.v1.opt\"]\n  path = \"/bed/opt\"",
			},
			notWant: []string{"[grpc]", "[ttrpc]", "[metrics]", "sandbox_image", "bin_dir ="},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			cfg.Version, cfg.DisableNRI = tt.version, tt.nri
			data, err := cfg.render()
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			got := string(data)
			for _, want := range tt.want {
				if !strings.Contains(got, want) {
					t.Errorf("config lacks %q:\n%s", want, got)
				}
			}
			for _, no := range tt.notWant {
				if strings.Contains(got, no) {
					t.Errorf("config has %q:\n%s", no, got)
				}
			}
		})
	}
}
