package volumes

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/podpath"
	"github.com/berth-agent/berth/internal/statefile"
)

// hostHostsFile is the host's hosts file, the base of a host-network pod's
// /etc/hosts when it has hostAliases.
const hostHostsFile = "/etc/hosts"

// hostsFileContent is the pod's /etc/hosts as the kubelet writes it: the
// loopback and IPv6 lines, the pod's own names on its IPs, then hostAliases.
// On the host network it is the host's file plus hostAliases. ok is false
// when the pod keeps the runtime's /etc/hosts: on the host network without
// aliases, or before the pod has an IP.
func hostsFileContent(pod *v1.Pod, podIPs []string, hostname, domain string) (content []byte, ok bool, err error) {
	var b bytes.Buffer
	if pod.Spec.HostNetwork {
		if len(pod.Spec.HostAliases) == 0 {
			return nil, false, nil
		}
		host, err := os.ReadFile(hostHostsFile)
		if err != nil {
			return nil, false, fmt.Errorf("read the host's %s: %w", hostHostsFile, err)
		}
		b.Write(host)
		if len(host) > 0 && host[len(host)-1] != '\n' {
			b.WriteByte('\n')
		}
	} else {
		if len(podIPs) == 0 {
			return nil, false, nil
		}
		b.WriteString("# Kubernetes-managed hosts file.\n")
		b.WriteString("127.0.0.1\tlocalhost\n")
		b.WriteString("::1\tlocalhost ip6-localhost ip6-loopback\n")
		b.WriteString("fe00::0\tip6-localnet\n")
		b.WriteString("fe00::0\tip6-mcastprefix\n")
		b.WriteString("fe00::1\tip6-allnodes\n")
		b.WriteString("fe00::2\tip6-allrouters\n")
		for _, ip := range podIPs {
			if domain != "" {
				fmt.Fprintf(&b, "%s\t%s.%s\t%s\n", ip, hostname, domain, hostname)
			} else {
				fmt.Fprintf(&b, "%s\t%s\n", ip, hostname)
			}
		}
	}
	if len(pod.Spec.HostAliases) > 0 {
		b.WriteString("\n# Entries added by HostAliases.\n")
		for _, a := range pod.Spec.HostAliases {
			fmt.Fprintf(&b, "%s\t%s\n", a.IP, strings.Join(a.Hostnames, "\t"))
		}
	}
	return b.Bytes(), true, nil
}

// EnsureHostsFile writes the pod's managed hosts file, with the pod's
// hostname and domain, and returns its path,
// or "" when the pod keeps the runtime's /etc/hosts. Every container of the
// pod mounts the same file. It is checked at each container start and
// replaced when it differs, so it follows the pod's IP when the sandbox is
// recreated (which restarts every container, so none keeps a stale copy).
func (h *Host) EnsureHostsFile(pod *v1.Pod, podIPs []string, hostname, domain string) (string, error) {
	content, ok, err := hostsFileContent(pod, podIPs, hostname, domain)
	if err != nil || !ok {
		return "", err
	}
	path, err := h.podSubdir(pod.UID, "etc-hosts")
	if err != nil {
		return "", err
	}
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, content) {
		return path, nil
	}
	if err := podpath.MkdirAll(h.opts.RootDir, filepath.Dir(path), 0o750); err != nil {
		return "", fmt.Errorf("write the pod's hosts file: %w", err)
	}
	// Through a rename, so a container starting meanwhile never
	// bind-mounts a half-written file; the rename replaces a symbolic link
	// at path, never writes through it.
	if err := statefile.Replace(filepath.Dir(path), filepath.Base(path), content, 0o644); err != nil {
		return "", fmt.Errorf("write the pod's hosts file: %w", err)
	}
	return path, nil
}
