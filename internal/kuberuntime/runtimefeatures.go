package kuberuntime

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/criconfig"
)

// runtimeVersion is a runtime's name and release as its CRI Version call
// reports them ("containerd", "v2.1.9" or Debian's "1.6.20~ds1").
type runtimeVersion struct {
	name         string
	version      string
	major, minor int
	parsed       bool
}

func (v runtimeVersion) String() string {
	return v.name + " " + v.version
}

// atLeast reports whether the runtime is name at major.minor or later. A
// version berth cannot read counts as new enough: the runtime then says
// itself what it cannot do.
func (v runtimeVersion) atLeast(name string, major, minor int) bool {
	if v.name != name || !v.parsed {
		return true
	}
	return v.major > major || v.major == major && v.minor >= minor
}

// parseRuntimeVersion reads "v2.1.9", "1.6.20~ds1" or "1.31.0-rc.1".
func parseRuntimeVersion(name, version string) runtimeVersion {
	v := runtimeVersion{name: name, version: version}
	fields := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(fields) < 2 {
		return v
	}
	major, err1 := strconv.Atoi(fields[0])
	minorDigits := strings.TrimRightFunc(fields[1], func(r rune) bool { return r < '0' || r > '9' })
	minor, err2 := strconv.Atoi(minorDigits)
	if err1 != nil || err2 != nil {
		return v
	}
	v.major, v.minor, v.parsed = major, minor, true
	return v
}

// checkRuntimeFeatures refuses, before its sandbox exists, a pod that asks
// for what the runtime cannot do, with the field and the runtime version
// that would: image volumes (KEP-4639) and user namespaces (hostUsers:
// false). It asks the runtime each time such a pod is created, so an
// upgraded runtime is seen without restarting berth; pods asking for
// neither cost no call.
func (m *Manager) checkRuntimeFeatures(ctx context.Context, pod *v1.Pod) error {
	imageVolume := -1
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Image != nil {
			imageVolume = i
			break
		}
	}
	userns := pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers
	if imageVolume < 0 && !userns {
		return nil
	}
	resp, err := m.runtime.Version(ctx, "v1")
	if err != nil {
		return fmt.Errorf("ask the runtime for its version: %w", err)
	}
	rv := parseRuntimeVersion(resp.GetRuntimeName(), resp.GetRuntimeVersion())
	if imageVolume >= 0 {
		if err := checkImageVolumes(rv, imageVolume); err != nil {
			return err
		}
	}
	if userns {
		status, err := m.runtime.Status(ctx, false)
		if err != nil {
			return fmt.Errorf("ask the runtime for its features: %w", err)
		}
		if err := checkUserNamespaces(rv, status, criconfig.RuntimeHandler(pod)); err != nil {
			return err
		}
	}
	return nil
}

// checkImageVolumes: containerd mounts image volumes from 2.1 on, CRI-O
// from 1.31; older releases ignore Mount.image and would bind-mount an
// empty host path instead.
func checkImageVolumes(rv runtimeVersion, volume int) error {
	need := map[string][2]int{"containerd": {2, 1}, "cri-o": {1, 31}}
	if v, ok := need[rv.name]; ok && !rv.atLeast(rv.name, v[0], v[1]) {
		return fmt.Errorf("spec.volumes[%d].image: image volumes need %s >= %d.%d (the runtime is %s)", volume, rv.name, v[0], v[1], rv)
	}
	return nil
}

// checkUserNamespaces: the runtime handler must report user-namespace
// support (CRI RuntimeStatus features, containerd >= 2.0, which reports it
// only with runc >= 1.2 and a kernel with idmap mounts for the pod's
// filesystems). Older runtimes report no handler features at all.
func checkUserNamespaces(rv runtimeVersion, status *runtimeapi.StatusResponse, handler string) error {
	const field = "spec.hostUsers: false: "
	if !rv.atLeast("containerd", 2, 0) {
		return fmt.Errorf(field+"user namespaces need containerd >= 2.0 with runc >= 1.2 (the runtime is %s)", rv)
	}
	for _, h := range status.GetRuntimeHandlers() {
		if h.GetName() != handler {
			continue
		}
		if h.GetFeatures().GetUserNamespaces() {
			return nil
		}
		break
	}
	name := handler
	if name == "" {
		name = "default"
	}
	return fmt.Errorf(field+"the runtime (%s) reports no user-namespace support for its %s handler: it needs runc >= 1.2 (or crun >= 1.9) and a kernel with idmap mounts (Linux >= 6.3 for tmpfs and overlayfs)", rv, name)
}
