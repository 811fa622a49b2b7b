package doctor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// cgroupVersion reads the cgroup layout from the filesystem mounted on
// <sys>/fs/cgroup: cgroup2 is v2 (unified); a tmpfs holding the v1
// hierarchies is v1, or hybrid when <sys>/fs/cgroup/unified is cgroup2.
func (e *env) cgroupVersion() (string, error) {
	root := filepath.Join(e.opts.SysRoot, "fs", "cgroup")
	var st unix.Statfs_t
	if err := e.statfs(root, &st); err != nil {
		return "", fmt.Errorf("statfs %s: %w", root, err)
	}
	switch int64(st.Type) {
	case unix.CGROUP2_SUPER_MAGIC:
		return "v2", nil
	case unix.TMPFS_MAGIC:
		var u unix.Statfs_t
		if err := e.statfs(filepath.Join(root, "unified"), &u); err == nil && int64(u.Type) == unix.CGROUP2_SUPER_MAGIC {
			return "v1 (hybrid)", nil
		}
		return "v1", nil
	}
	return "", fmt.Errorf("%s is neither cgroup2 nor the tmpfs of cgroup v1 (filesystem type %#x)", root, st.Type)
}

// cgroupDriver asks the runtime which cgroup manager it uses: CRI's
// RuntimeConfig (KEP-4033) where the runtime has it (containerd 2.x,
// CRI-O), whose answer wins over anything read from its configuration;
// else, where RuntimeConfig is Unimplemented (containerd 1.x) or answers
// without its Linux part (whose zero driver would read as systemd),
// containerd's configuration (the SystemdCgroup option of its default
// runtime, or the old top-level systemdCgroup). "" when it does not say.
func (e *env) cgroupDriver(ctx context.Context, ri *runtimeInfo) (string, error) {
	resp, err := e.rs.RuntimeConfig(ctx)
	if err == nil && resp.GetLinux() != nil {
		switch resp.GetLinux().GetCgroupDriver() {
		case runtimeapi.CgroupDriver_SYSTEMD:
			return "systemd", nil
		case runtimeapi.CgroupDriver_CGROUPFS:
			return "cgroupfs", nil
		}
	} else if err != nil && status.Code(err) != codes.Unimplemented {
		return "", fmt.Errorf("runtime config: %w", err)
	}
	if ri.status.GetInfo()["config"] == "" {
		return "", nil
	}
	if rt, ok := ri.config.Containerd.Runtimes[ri.config.Containerd.DefaultRuntimeName]; ok {
		if v, ok := rt.Options["SystemdCgroup"].(bool); ok && v {
			return "systemd", nil
		}
	}
	if ri.config.SystemdCgroup {
		return "systemd", nil
	}
	return "cgroupfs", nil
}

// initIsSystemd reports whether PID 1 is systemd, from <proc>/1/comm.
func (e *env) initIsSystemd() bool {
	comm, err := os.ReadFile(filepath.Join(e.opts.ProcRoot, "1", "comm"))
	return err == nil && strings.TrimSpace(string(comm)) == "systemd"
}

// checkCgroups: the cgroup version, and the runtime's cgroup driver
// against the init system. cgroup v1 is a WARN: Kubernetes keeps it only
// in maintenance and containerd 2.x deprecates it. The cgroupfs driver
// under systemd is a WARN: two managers of one cgroup tree disagree under
// pressure, which is why the kubelet's documentation asks for the systemd
// driver where systemd is init. A driver the runtime does not tell is a
// WARN too: it could not be checked.
func (e *env) checkCgroups(ctx context.Context, ri *runtimeInfo) Result {
	r := Result{Check: "cgroups", Status: OK}
	version, err := e.cgroupVersion()
	if err != nil {
		r.Status, r.Message = Warn, err.Error()
		r.Fix = "mount the cgroup filesystem on /sys/fs/cgroup (systemd does)"
		return r
	}
	r.Message = "cgroup " + version
	if strings.HasPrefix(version, "v1") {
		r.Status = Warn
		r.Message += ", which Kubernetes keeps in maintenance only and containerd 2 deprecates"
		r.Fix = "boot with cgroup v2 (systemd.unified_cgroup_hierarchy=1 on the kernel command line, the default of current distributions)"
	}
	if ri.err != nil {
		r.Message += "; the runtime's cgroup driver not checked: the runtime did not answer"
		r.Status = Warn
		r.Fix = strings.TrimPrefix(r.Fix+"; fix the runtime line first", "; ")
		return r
	}
	driver, err := e.cgroupDriver(ctx, ri)
	systemd := e.initIsSystemd()
	switch {
	case err != nil:
		r.Status, r.Message = Warn, r.Message+"; the runtime's cgroup driver: "+err.Error()
		r.Fix = strings.TrimPrefix(r.Fix+"; see the runtime's log (journalctl -u containerd)", "; ")
	case driver == "":
		r.Status, r.Message = Warn, r.Message+"; "+ri.name()+" does not report its cgroup driver"
		r.Fix = strings.TrimPrefix(r.Fix+"; check the runtime's configuration: with systemd as init it should use the systemd cgroup driver", "; ")
	case driver == "cgroupfs" && systemd:
		r.Status = Warn
		r.Message += "; " + ri.name() + " uses the cgroupfs driver while systemd is init: two managers of one cgroup tree"
		fix := "set SystemdCgroup = true in the runc options of containerd's config.toml (CRI-O: cgroup_manager = \"systemd\") and restart the runtime; pods it runs keep their cgroups until they restart"
		r.Fix = strings.TrimPrefix(r.Fix+"; "+fix, "; ")
	default:
		r.Message += "; " + ri.name() + " uses the " + driver + " cgroup driver"
		if systemd {
			r.Message += " (init: systemd)"
		}
	}
	return r
}
