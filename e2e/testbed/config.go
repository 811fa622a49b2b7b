package testbed

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"text/template"

	"golang.org/x/sys/unix"
)

// containerdConfig is what differs between beds in containerd's
// config.toml. Every path is inside the bed's Dir, so two beds (or a bed
// and the machine's own containerd) share nothing but /var/run/netns and
// /run/containerd/s, where containerd 1.6 hard-codes network namespaces
// and shim sockets (the latter hashed with our socket path).
type containerdConfig struct {
	Root        string
	State       string
	Socket      string
	RuncRoot    string
	OptDir      string
	CNIConfDir  string
	CNIBinDir   string
	RegistryDir string // config_path: one hosts.toml per registry host
	Snapshotter string // "overlayfs", or "native" where overlay cannot mount
	SandboxImg  string
	// Version is the config format: 2 for containerd 1.x, 3 for 2.0 to
	// 2.2, 4 for 2.3 on.
	Version int
	// DisableNRI turns the NRI plugin off (containerd 1.7 on have it):
	// its socket, /var/run/nri/nri.sock, is fixed and so would be shared.
	DisableNRI bool
}

// commonConfig is what every config version says alike, after their
// top-level keys: the bed's sockets, no metrics listener, the opt
// directory, and NRI off where asked. Version 4 (containerd 2.3 on) moved
// the listeners from the [grpc], [ttrpc] and [metrics] sections to the
// io.containerd.server.v1 plugins; there each listener is configured
// alone, so the ttrpc socket is named outright (left out, it would be
// the fixed /run/containerd/containerd.sock.ttrpc every bed shares), and
// the metrics listener is off unless given an address.
const commonConfig = `{{define "common"}}{{if ge .Version 4}}
[plugins."io.containerd.server.v1.grpc"]
  address = {{q .Socket}}

[plugins."io.containerd.server.v1.ttrpc"]
  address = {{q (printf "%s.ttrpc" .Socket)}}
{{else}}
[grpc]
  address = {{q .Socket}}

[ttrpc]
  address = {{q (printf "%s.ttrpc" .Socket)}}

[metrics]
  address = ""
{{end}}
[plugins."io.containerd.internal.v1.opt"]
  path = {{q .OptDir}}
{{if .DisableNRI}}
[plugins."io.containerd.nri.v1.nri"]
  disable = true
{{end}}{{end}}`

// configTemplate parses one config version's template with commonConfig.
func configTemplate(text string) *template.Template {
	return template.Must(template.Must(template.New("config.toml").Funcs(template.FuncMap{"q": strconv.Quote}).Parse(commonConfig)).Parse(text))
}

// containerdTemplate is a version 2 config for containerd 1.6 and 1.7.
// Notes:
//   - restrict_oom_score_adj: these machines lack CAP_SYS_RESOURCE, and
//     without it every sandbox fails with "can't get final child's PID
//     from pipe: EOF".
//   - stream_server_port 0: the default, 10010, would collide between
//     concurrent beds.
//   - the runc options' Root keeps runc's state in the bed, so teardown can
//     find (and force-delete) every container of this bed alone.
//   - unused snapshotters are disabled to keep containerd.log readable.
var containerdTemplate = configTemplate(`version = 2
root = {{q .Root}}
state = {{q .State}}
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs"]
{{template "common" .}}
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = {{q .SandboxImg}}
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = {{q .Snapshotter}}
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        Root = {{q .RuncRoot}}

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = {{q .CNIBinDir}}
    conf_dir = {{q .CNIConfDir}}
    max_conf_num = 1

  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = {{q .RegistryDir}}
`)

// containerdV3Template is the version 3 config of containerd 2.0 to 2.2,
// and with version 4's listeners (see commonConfig) the config of 2.3 on:
// the same settings as containerdTemplate in the places 2.x moved them to.
// The CRI plugin is split into io.containerd.cri.v1.images (snapshotter,
// registry, the sandbox image as pinned_images.sandbox) and
// io.containerd.cri.v1.runtime (runtimes, CNI with bin_dirs, the only
// form 2.4 reads, and restrict_oom_score_adj, still needed), while the
// stream server stays with io.containerd.grpc.v1.cri.
//
// cgroup v1, which the test machines run, is deprecated from 2.2 on (its
// removal planned for 2029 at the earliest) and still runs, but its
// deprecation warning turns CRI's ContainerdHasNoDeprecationWarnings
// condition false, and a bed is ready only when every condition is true.
// ignore_deprecation_warnings names that one warning: it says what the
// machine is, not what the bed's configuration does wrong, so any other
// deprecation (a config key the bed still uses) keeps stopping the bed.
var containerdV3Template = configTemplate(`version = {{.Version}}
root = {{q .Root}}
state = {{q .State}}
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.blockfile", "io.containerd.snapshotter.v1.erofs"]
{{template "common" .}}
[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = {{q .Snapshotter}}

  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = {{q .SandboxImg}}

  [plugins."io.containerd.cri.v1.images".registry]
    config_path = {{q .RegistryDir}}

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  ignore_deprecation_warnings = ["io.containerd.deprecation/cgroup-v1"]

  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"

    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      snapshotter = {{q .Snapshotter}}

      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        Root = {{q .RuncRoot}}

  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = [{{q .CNIBinDir}}]
    conf_dir = {{q .CNIConfDir}}
    max_conf_num = 1
`)

// render produces config.toml in the format of c.Version (2 when unset).
func (c containerdConfig) render() ([]byte, error) {
	tmpl := containerdTemplate
	if c.Version >= 3 {
		tmpl = containerdV3Template
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, c); err != nil {
		return nil, fmt.Errorf("render containerd config: %w", err)
	}
	return buf.Bytes(), nil
}

// registryHostsTOML is the hosts.toml that makes containerd (1.6 honours
// config_path for CRI pulls) talk plain HTTP to a registry at host.
func registryHostsTOML(host string) []byte {
	return fmt.Appendf(nil, "server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\", \"push\"]\n",
		"http://"+host, "http://"+host)
}

// overlayUsable reports whether an overlay filesystem can be mounted on
// dir's filesystem (not the case on some nested or exotic setups), by
// mounting one and unmounting it again.
func overlayUsable(dir string) bool {
	probe, err := os.MkdirTemp(dir, "overlay-probe-")
	if err != nil {
		return false
	}
	defer os.RemoveAll(probe)
	lower, upper, work, merged := filepath.Join(probe, "l"), filepath.Join(probe, "u"), filepath.Join(probe, "w"), filepath.Join(probe, "m")
	for _, d := range []string{lower, upper, work, merged} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return false
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", lower, upper, work)
	if err := unix.Mount("overlay", merged, "overlay", 0, opts); err != nil {
		return false
	}
	return unix.Unmount(merged, unix.MNT_DETACH) == nil
}
