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
