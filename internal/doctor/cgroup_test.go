package doctor

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestCheckCgroups: the cgroup version from the filesystem on
// <sys>/fs/cgroup, and the runtime's driver (from RuntimeConfig, else
// containerd's configuration) against systemd as init.
func TestCheckCgroups(t *testing.T) {
	systemdRunc := map[string]any{"containerd": map[string]any{"defaultRuntimeName": "runc",
		"runtimes": map[string]any{"runc": map[string]any{"options": map[string]any{"SystemdCgroup": true}}}}}
	cgroupfsRunc := map[string]any{"containerd": map[string]any{"defaultRuntimeName": "runc",
		"runtimes": map[string]any{"runc": map[string]any{"options": map[string]any{"Root": "/run/runc"}}}}}
	v2 := map[string]unix.Statfs_t{"fs/cgroup": {Type: unix.CGROUP2_SUPER_MAGIC}}
	v1 := map[string]unix.Statfs_t{"fs/cgroup": {Type: unix.TMPFS_MAGIC}}
	hybrid := map[string]unix.Statfs_t{"fs/cgroup": {Type: unix.TMPFS_MAGIC}, "fs/cgroup/unified": {Type: unix.CGROUP2_SUPER_MAGIC}}
	reports := func(d runtimeapi.CgroupDriver) *runtimeapi.RuntimeConfigResponse {
		return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: d}}
	}
	tests := []struct {
		name          string
		fs            map[string]unix.Statfs_t // under SysRoot
		config        map[string]any
		runtimeConfig *runtimeapi.RuntimeConfigResponse
		configErr     error // RuntimeConfig's error
		init          string
		down          bool
		want          Status
		wantIn        string
	}{
		{"v2, systemd driver under systemd", v2, systemdRunc, nil, nil, "systemd", false, OK, "cgroup v2; containerd 1.6.20~ds1 uses the systemd cgroup driver (init: systemd)"},
		{"v2, cgroupfs without systemd", v2, cgroupfsRunc, nil, nil, "init", false, OK, "uses the cgroupfs cgroup driver"},
		{"v2, cgroupfs under systemd", v2, cgroupfsRunc, nil, nil, "systemd", false, Warn, "uses the cgroupfs driver while systemd is init"},
		{"old top-level systemdCgroup", v2, map[string]any{"systemdCgroup": true}, nil, nil, "systemd", false, OK, "uses the systemd cgroup driver"},
		{"driver from RuntimeConfig", v2, nil, reports(runtimeapi.CgroupDriver_SYSTEMD), nil, "systemd", false, OK, "uses the systemd cgroup driver"},
		{"RuntimeConfig's cgroupfs over a config saying systemd", v2, systemdRunc, reports(runtimeapi.CgroupDriver_CGROUPFS), nil, "systemd", false, Warn, "uses the cgroupfs driver while systemd is init"},
		{"RuntimeConfig's systemd over a config saying cgroupfs", v2, cgroupfsRunc, reports(runtimeapi.CgroupDriver_SYSTEMD), nil, "systemd", false, OK, "uses the systemd cgroup driver (init: systemd)"},
		{"RuntimeConfig without its Linux part", v2, cgroupfsRunc, &runtimeapi.RuntimeConfigResponse{}, nil, "init", false, OK, "uses the cgroupfs cgroup driver"},
		{"RuntimeConfig fails", v2, cgroupfsRunc, nil, status.Error(codes.Unavailable, "busy"), "init", false, Warn, "the runtime's cgroup driver: runtime config: rpc error: code = Unavailable desc = busy"},
		{"driver not reported", v2, nil, nil, nil, "systemd", false, Warn, "does not report its cgroup driver"},
		{"v1", v1, systemdRunc, nil, nil, "systemd", false, Warn, "cgroup v1, which Kubernetes keeps in maintenance only"},
		{"hybrid", hybrid, systemdRunc, nil, nil, "systemd", false, Warn, "cgroup v1 (hybrid)"},
		{"not mounted", map[string]unix.Statfs_t{"fs/cgroup": {Type: 0xEF53}}, systemdRunc, nil, nil, "systemd", false, Warn, "is neither cgroup2 nor the tmpfs of cgroup v1"},
		{"runtime down", v2, nil, nil, nil, "systemd", true, Warn, "cgroup v2; the runtime's cgroup driver not checked"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			proc, sys := t.TempDir(), t.TempDir()
			writeFile(t, filepath.Join(proc, "1", "comm"), tt.init+"\n", 0o644)
			var rt *fakeRuntime
			if !tt.down {
				rt = newFakeRuntime(tt.config)
				rt.runtimeConfig, rt.runtimeConfigErr = tt.runtimeConfig, tt.configErr
			}
			e := testEnv(t, rt, nil, Options{ProcRoot: proc, SysRoot: sys})
			fs := fakeFS{}
			for p, st := range tt.fs {
				fs[filepath.Join(sys, p)] = st
			}
			e.statfs = fs.statfs
			checkResult(t, e.checkCgroups(t.Context(), askedRuntime(t, e)), tt.want, tt.wantIn)
		})
	}
}

// TestInitIsSystemd reads PID 1's comm, and no comm is not systemd.
func TestInitIsSystemd(t *testing.T) {
	proc := t.TempDir()
	e := testEnv(t, nil, nil, Options{ProcRoot: proc})
	if e.initIsSystemd() {
		t.Error("systemd without a comm file")
	}
	if err := os.MkdirAll(filepath.Join(proc, "1"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(proc, "1", "comm"), "systemd\n", 0o644)
	if !e.initIsSystemd() {
		t.Error("not systemd with comm systemd")
	}
}
