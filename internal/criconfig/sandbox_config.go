package criconfig

import (
	"fmt"
	"maps"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/podpath"
	"github.com/berth-agent/berth/internal/podresources"
)

// maxHostnameLen is the longest hostname the kernel and DNS accept.
const maxHostnameLen = 63

// SandboxConfig is the CRI sandbox config for the pod's sandbox attempt.
//
// The cgroup parent is left empty on purpose: containerd then puts the pod
// under its own default parent, which is right for a standalone agent that
// does not manage a kubepods hierarchy of QoS cgroups, and berth's systemd
// unit can be restarted without moving running pods.
func (b *Builder) SandboxConfig(pod *v1.Pod, attempt uint32) (*runtimeapi.PodSandboxConfig, error) {
	fail := func(err error) (*runtimeapi.PodSandboxConfig, error) {
		return nil, fmt.Errorf("sandbox config for pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	logDir, err := b.podLogDir(pod)
	if err != nil {
		return fail(err)
	}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{
			Name:      pod.Name,
			Namespace: pod.Namespace,
			Uid:       string(pod.UID),
			Attempt:   attempt,
		},
		Labels:       sandboxLabels(pod),
		Annotations:  sandboxAnnotations(pod),
		LogDirectory: logDir,
	}
	if !pod.Spec.HostNetwork {
		hostname, domain, err := b.podHostnameAndDomain(pod)
		if err != nil {
			return fail(err)
		}
		if pod.Spec.SetHostnameAsFQDN != nil && *pod.Spec.SetHostnameAsFQDN && domain != "" {
			hostname = hostname + "." + domain
			if len(hostname) > maxHostnameLen+1 {
				return fail(fmt.Errorf("setHostnameAsFQDN: %q is longer than %d characters", hostname, maxHostnameLen+1))
			}
		}
		cfg.Hostname = hostname
	}
	dns, err := b.dns.For(pod)
	if err != nil {
		return fail(err)
	}
	cfg.DnsConfig = dns
	cfg.PortMappings = portMappings(pod)

	sc, err := b.sandboxSecurityContext(pod)
	if err != nil {
		return fail(err)
	}
	if err := b.applyUserns(pod, sc.NamespaceOptions); err != nil {
		return fail(err)
	}
	cfg.Linux = &runtimeapi.LinuxPodSandboxConfig{
		SecurityContext: sc,
		Sysctls:         sysctls(pod),
		Resources:       podresources.Linux(podresources.PodRequirements(pod)),
	}
	if len(pod.Spec.Overhead) > 0 {
		cfg.Linux.Overhead = podresources.Linux(v1.ResourceRequirements{Requests: pod.Spec.Overhead, Limits: pod.Spec.Overhead})
	}
	return cfg, nil
}

// RuntimeHandler is the CRI runtime handler the pod asks for: its
// runtimeClassName, taken as the handler name since there is no API server
// to look RuntimeClass objects up in; "" is the runtime's default.
func RuntimeHandler(pod *v1.Pod) string {
	if pod.Spec.RuntimeClassName == nil {
		return ""
	}
	return *pod.Spec.RuntimeClassName
}

// sandboxLabels are the pod's labels plus the identity labels, which win
// over a pod label of the same key so berth can always find its pods.
func sandboxLabels(pod *v1.Pod) map[string]string {
	labels := make(map[string]string, len(pod.Labels)+4)
	maps.Copy(labels, pod.Labels)
	labels[LabelPodName] = pod.Name
	labels[LabelPodNamespace] = pod.Namespace
	labels[LabelPodUID] = string(pod.UID)
	labels[LabelManaged] = "true"
	return labels
}

// sandboxAnnotations are the pod's annotations plus its grace period, which
// lets a later berth kill an adopted pod with the right grace.
func sandboxAnnotations(pod *v1.Pod) map[string]string {
	ann := make(map[string]string, len(pod.Annotations)+1)
	maps.Copy(ann, pod.Annotations)
	ann[AnnotationPodGracePeriod] = strconv.FormatInt(gracePeriod(pod), 10)
	return ann
}

// DefaultGracePeriodSeconds is the API default of
// terminationGracePeriodSeconds, used when nothing says otherwise.
const DefaultGracePeriodSeconds = 30

// gracePeriod is the pod's terminationGracePeriodSeconds, the API default
// when unset.
func gracePeriod(pod *v1.Pod) int64 {
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		return *g
	}
	return DefaultGracePeriodSeconds
}

// podLogDir is the pod's directory in the CRI log layout,
// PodLogsDir/<namespace>_<name>_<uid>, refused when a field would take it
// anywhere else.
func (b *Builder) podLogDir(pod *v1.Pod) (string, error) {
	return podpath.LogDir(b.opts.PodLogsDir, pod.Namespace, pod.Name, string(pod.UID))
}

// podHostnameAndDomain is the pod's hostname (spec.hostname, else its name cut
// to 63 characters without a trailing '-' or '.') and, when it has a
// subdomain and berth knows the cluster domain, its DNS domain.
func (b *Builder) podHostnameAndDomain(pod *v1.Pod) (hostname, domain string, err error) {
	hostname = pod.Name
	if pod.Spec.Hostname != "" {
		hostname = pod.Spec.Hostname
	}
	if len(hostname) > maxHostnameLen {
		hostname = strings.TrimRight(hostname[:maxHostnameLen], "-.")
		if hostname == "" {
			return "", "", fmt.Errorf("hostname %q is empty once cut to %d characters", pod.Name, maxHostnameLen)
		}
	}
	if pod.Spec.Subdomain != "" && b.opts.ClusterDomain != "" {
		domain = pod.Spec.Subdomain + "." + pod.Namespace + ".svc." + b.opts.ClusterDomain
	}
	return hostname, domain, nil
}

// portMappings are the container ports that ask for a host port; the others
// are informational, as in the kubelet.
func portMappings(pod *v1.Pod) []*runtimeapi.PortMapping {
	var out []*runtimeapi.PortMapping
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			out = append(out, &runtimeapi.PortMapping{
				Protocol:      protocol(p.Protocol),
				ContainerPort: p.ContainerPort,
				HostPort:      p.HostPort,
				HostIp:        p.HostIP,
			})
		}
	}
	return out
}

// protocol maps a port protocol to CRI; unset is TCP.
func protocol(p v1.Protocol) runtimeapi.Protocol {
	switch p {
	case v1.ProtocolUDP:
		return runtimeapi.Protocol_UDP
	case v1.ProtocolSCTP:
		return runtimeapi.Protocol_SCTP
	}
	return runtimeapi.Protocol_TCP
}

// sysctls are the pod's sysctls by their dotted names: a name written with
// '/' separators has its '/' and '.' swapped, as the kubelet does, so
// "net/ipv4/conf/eth0.100/forwarding" reaches the runtime as
// "net.ipv4.conf.eth0/100.forwarding".
func sysctls(pod *v1.Pod) map[string]string {
	sc := pod.Spec.SecurityContext
	if sc == nil || len(sc.Sysctls) == 0 {
		return nil
	}
	out := make(map[string]string, len(sc.Sysctls))
	for _, s := range sc.Sysctls {
		name := s.Name
		if strings.Contains(name, "/") {
			name = strings.Map(func(r rune) rune {
				switch r {
				case '/':
					return '.'
				case '.':
					return '/'
				}
				return r
			}, name)
		}
		out[name] = s.Value
	}
	return out
}
