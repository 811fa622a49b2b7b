package testbed

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestResolveCRIOCached checks that "crio" selects CRI-O, takes a complete
// cached build as is (no go command or C compiler run) and listens on a
// socket of its own name.
func TestResolveCRIOCached(t *testing.T) {
	cache := t.TempDir()
	dir := filepath.Join(cache, "crio-"+crioRelease)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range crioBinaries {
		if err := os.WriteFile(filepath.Join(dir, b), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", "/nonexistent") // a build would fail: no go command
	v, err := resolveContainerd(RuntimeCRIO, cache)
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	if !v.CRIO || v.Release != crioRelease || v.BinDir != dir || v.bin("crio") != filepath.Join(dir, "crio") {
		t.Errorf("resolved %+v, want CRI-O %s in %s", v, crioRelease, dir)
	}
	if v.socketName() != "crio.sock" {
		t.Errorf("socket %q, want crio.sock", v.socketName())
	}
}

// TestResolveCRIOIncomplete checks that a cache entry without pinns is not
// taken for a build: CRI-O refuses to start without it.
func TestResolveCRIOIncomplete(t *testing.T) {
	cache := t.TempDir()
	dir := filepath.Join(cache, "crio-"+crioRelease)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "crio"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", "/nonexistent")
	if _, err := resolveContainerd(RuntimeCRIO, cache); err == nil {
		t.Fatal("resolve with an incomplete cache entry and no go command succeeded")
	}
}

// TestCRIOConfigRender checks that every path CRI-O would otherwise take
// from the machine (storage, state, sockets, namespaces, logs, policy) is
// the bed's, and the settings this machine needs are there.
func TestCRIOConfigRender(t *testing.T) {
	cfg := crioConfig{
		Root:       "/bed/storage/root",
		RunRoot:    "/bed/storage/run",
		Driver:     "vfs",
		Dir:        "/bed",
		Socket:     "/bed/crio.sock",
		BinDir:     "/cache/crio-1.34.0",
		RuncRoot:   "/bed/runc",
		CNIConfDir: "/bed/cni/net.d",
		CNIBinDir:  "/usr/lib/cni",
		PauseImage: PauseRef,
		Registry:   "127.0.0.1:5000",
		Policy:     "/bed/policy.json",
	}
	data, err := cfg.render()
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	got := string(data)
	for _, want := range []string{
		`root = "/bed/storage/root"`,
		`runroot = "/bed/storage/run"`,
		`storage_driver = "vfs"`,
		`log_dir = "/bed/crio/pods"`,
		`version_file = "/bed/crio/version"`,
		`clean_shutdown_file = "/bed/crio/clean.shutdown"`,
		`listen = "/bed/crio.sock"`,
		`stream_port = "0"`,
		`cgroup_manager = "cgroupfs"`,
		`namespaces_dir = "/bed/crio/ns"`,
		`pinns_path = "/cache/crio-1.34.0/pinns"`,
		`container_exits_dir = "/bed/crio/exits"`,
		`container_attach_socket_dir = "/bed/crio/attach"`,
		`irqbalance_config_restore_file = "disable"`,
		`enable_pod_events = true`,
		`runtime_root = "/bed/runc"`,
		`monitor_path = "/usr/bin/conmon"`,
		`pause_image = "registry.k8s.io/pause:3.9"`,
		`pinned_images = ["registry.k8s.io/pause:3.9"]`,
		`signature_policy = "/bed/policy.json"`,
		`insecure_registries = ["127.0.0.1:5000"]`,
		`network_dir = "/bed/cni/net.d"`,
		`plugin_dirs = ["/usr/lib/cni"]`,
		"[crio.nri]\nenable_nri = false",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("config lacks %q:\n%s", want, got)
		}
	}
	cfg.Registry = ""
	if data, err = cfg.render(); err != nil || strings.Contains(string(data), "insecure_registries") {
		t.Errorf("config without a registry: %v\n%s", err, data)
	}
	if ref := cfg.storageRef(BusyboxRef); ref != "containers-storage:[vfs@/bed/storage/root+/bed/storage/run]"+BusyboxRef {
		t.Errorf("storage ref %q", ref)
	}
}
