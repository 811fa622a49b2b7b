package testbed

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"text/template"
)

// RuntimeCRIO is the value of $BERTH_CONTAINERD (Options.Containerd) that
// runs CRI-O instead of a containerd.
const RuntimeCRIO = "crio"

// crioRelease is the CRI-O release a "crio" bed builds: the one the Go
// module proxy serves and berth was tested with.
const crioRelease = "1.34.0"

// crioBuildTags drop every cgo dependency of CRI-O, so it builds with
// CGO_ENABLED=0 like containerd: gpgme (openpgp in Go instead), ostree,
// btrfs and devicemapper storage, seccomp (no `seccomp` tag: containers
// run unconfined), SELinux and AppArmor (no tags).
const crioBuildTags = "containers_image_openpgp containers_image_ostree_stub exclude_graphdriver_btrfs exclude_graphdriver_devicemapper btrfs_noversion"

// crioBinaries are what a CRI-O bed runs from its build directory: the
// daemon and pinns, the small C helper it pins namespaces with. conmon
// and runc are Debian's.
var crioBinaries = []string{"crio", "pinns"}

// buildCRIO returns the directory under cache holding crio and pinns of
// release, building them when missing: crio from its Go module (CGO off,
// about 4 minutes), pinns from the C sources in that module with the C
// compiler (static, a second). Like buildContainerd, it builds into a
// temporary directory renamed into place, under a lock.
func buildCRIO(release, cache string) (string, error) {
	dir := filepath.Join(cache, "crio-"+release)
	return dir, buildLocked(dir, cache, crioBinaries, func(out string) error {
		src, err := downloadModule("github.com/cri-o/cri-o", "v"+release)
		if err != nil {
			return err
		}
		cmd := exec.Command("go", "build", "-trimpath", "-tags", crioBuildTags,
			"-ldflags", "-s -w", "-o", out+"/", "./cmd/crio")
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false", "GOWORK=off", "GO111MODULE=on")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build crio %s: %w\n%s", release, err, out)
		}
		sources, err := filepath.Glob(filepath.Join(src, "pinns", "src", "*.c"))
		if err != nil || len(sources) == 0 {
			return fmt.Errorf("build pinns %s: no C sources in %s (%v)", release, src, err)
		}
		cc := exec.Command("cc", append([]string{"-std=c99", "-Os", "-static", "-o", filepath.Join(out, "pinns")}, sources...)...)
		if out, err := cc.CombinedOutput(); err != nil {
			return fmt.Errorf("build pinns %s: %w\n%s", release, err, out)
		}
		return nil
	})
}

// crioConfig is what differs between beds in crio.conf. As with
// containerd, every path is inside the bed's Dir: CRI-O's defaults
// (/var/lib/containers/storage, /var/run/crio, /var/run/netns,
// /var/log/crio, /etc/containers/...) would be shared with the machine's
// own CRI-O and between beds.
type crioConfig struct {
	Root, RunRoot string // containers/storage
	Driver        string // "overlay", or "vfs" where overlay cannot mount
	Dir           string // the bed's Dir: CRI-O's own state goes below it
	Socket        string
	BinDir        string // where pinns is
	RuncRoot      string
	CNIConfDir    string
	CNIBinDir     string
	PauseImage    string
	Registry      string // "127.0.0.1:PORT" pulled from over plain HTTP, or ""
	Policy        string // the signature policy file
}

// crioTemplate is crio.conf for a bed. Notes:
//   - cgroupfs: PID 1 here is not systemd.
//   - conmon_cgroup "pod": the only value cgroupfs accepts.
//   - no seccomp profile and no AppArmor/SELinux: the build has none.
//   - the pause image is pinned (never garbage collected) and imported
//     offline; pause_image_auth_file and registries stay unused.
//   - irqbalance's restore file "disable": the default writes below /etc.
//   - enable_pod_events: GetContainerEvents, which berth watches the
//     runtime with, is off by default in CRI-O.
//   - NRI off: its socket is fixed, as with containerd.
var crioTemplate = template.Must(template.New("crio.conf").Funcs(template.FuncMap{"q": strconv.Quote}).Parse(`[crio]
root = {{q .Root}}
runroot = {{q .RunRoot}}
storage_driver = {{q .Driver}}
log_dir = {{q (printf "%s/crio/pods" .Dir)}}
version_file = {{q (printf "%s/crio/version" .Dir)}}
version_file_persist = {{q (printf "%s/crio/version-persist" .Dir)}}
clean_shutdown_file = {{q (printf "%s/crio/clean.shutdown" .Dir)}}

[crio.api]
listen = {{q .Socket}}
stream_address = "127.0.0.1"
stream_port = "0"

[crio.runtime]
default_runtime = "runc"
cgroup_manager = "cgroupfs"
conmon_cgroup = "pod"
seccomp_profile = ""
apparmor_profile = ""
selinux = false
hooks_dir = []
default_mounts_file = ""
cdi_spec_dirs = []
namespaces_dir = {{q (printf "%s/crio/ns" .Dir)}}
pinns_path = {{q (printf "%s/pinns" .BinDir)}}
container_exits_dir = {{q (printf "%s/crio/exits" .Dir)}}
container_attach_socket_dir = {{q (printf "%s/crio/attach" .Dir)}}
irqbalance_config_file = ""
irqbalance_config_restore_file = "disable"
enable_pod_events = true

[crio.runtime.runtimes.runc]
runtime_path = "/usr/sbin/runc"
runtime_type = "oci"
runtime_root = {{q .RuncRoot}}
monitor_path = "/usr/bin/conmon"
monitor_cgroup = "pod"

[crio.image]
pause_image = {{q .PauseImage}}
pinned_images = [{{q .PauseImage}}]
signature_policy = {{q .Policy}}
{{- if .Registry}}
insecure_registries = [{{q .Registry}}]
{{- end}}
big_files_temporary_dir = {{q (printf "%s/tmp" .Dir)}}

[crio.network]
network_dir = {{q .CNIConfDir}}
plugin_dirs = [{{q .CNIBinDir}}]

[crio.metrics]
enable_metrics = false

[crio.nri]
enable_nri = false
`))

// crioPolicy is the bed's containers signature policy: accept any image,
// as containerd does (the machine's /etc/containers/policy.json may not).
const crioPolicy = `{"default": [{"type": "insecureAcceptAnything"}]}` + "\n"

// crioRegistries is the bed's registries.conf.
const crioRegistries = `unqualified-search-registries = ["docker.io"]
short-name-mode = "permissive"
`

// render produces crio.conf.
func (c crioConfig) render() ([]byte, error) {
	var buf bytes.Buffer
	if err := crioTemplate.Execute(&buf, c); err != nil {
		return nil, fmt.Errorf("render crio config: %w", err)
	}
	return buf.Bytes(), nil
}

// storageRef is the containers-storage transport reference of ref in the
// bed's storage, for skopeo.
func (c crioConfig) storageRef(ref string) string {
	return fmt.Sprintf("containers-storage:[%s@%s+%s]%s", c.Driver, c.Root, c.RunRoot, ref)
}

// crioStorageDriver is the containers/storage driver for a bed in dir:
// overlay where it mounts, else vfs.
func crioStorageDriver(dir string) string {
	if overlayUsable(dir) {
		return "overlay"
	}
	return "vfs"
}
