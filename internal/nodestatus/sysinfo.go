package nodestatus

import (
	"bufio"
	"bytes"
	"os"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// SystemInfo reads the machine's part of the Node's nodeInfo as the
// kubelet's cAdvisor does: machine ID, system UUID, boot ID, kernel and OS
// image; runtimeVersion is the CRI runtime's as "NAME://VERSION". A figure
// it cannot read stays empty.
func SystemInfo(runtimeVersion string) v1.NodeSystemInfo {
	info := v1.NodeSystemInfo{
		MachineID:               readTrimmed("/etc/machine-id"),
		SystemUUID:              readTrimmed("/sys/class/dmi/id/product_uuid"),
		BootID:                  readTrimmed("/proc/sys/kernel/random/boot_id"),
		OSImage:                 osImage(),
		ContainerRuntimeVersion: runtimeVersion,
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		info.KernelVersion = unix.ByteSliceToString(u.Release[:])
	}
	return info
}

func readTrimmed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// osImage is PRETTY_NAME of os-release.
func osImage() string {
	for _, path := range []string{"/etc/os-release", "/usr/lib/os-release"} {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "PRETTY_NAME="); ok {
				return strings.Trim(v, `"'`)
			}
		}
	}
	return ""
}
