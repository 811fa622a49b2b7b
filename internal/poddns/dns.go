package poddns

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Config is what a pod's DNS config is made from, from berth's flags.
type Config struct {
	// ResolvConf is the host's resolver file for dnsPolicy Default and
	// ClusterFirst without cluster DNS; "" disables DNS config.
	ResolvConf string
	// ClusterDNS and ClusterDomain, for dnsPolicy ClusterFirst; optional.
	ClusterDNS    []string
	ClusterDomain string
}

// The resolver's limits the kubelet enforces, so a pod never gets a
// resolv.conf its libc silently truncates.
const (
	maxDNSNameservers     = 3
	maxDNSSearchPaths     = 32
	maxDNSSearchListChars = 2048
)

// resolvConf is the part of a resolv.conf file the pod's DNS config uses.
type resolvConf struct {
	nameservers []string
	searches    []string
	options     []string
}

// parseResolvConf reads nameserver, search/domain and options lines; the last
// search or domain line wins, as in glibc.
func parseResolvConf(r io.Reader) (resolvConf, error) {
	var rc resolvConf
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.IndexAny(line, "#;"); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "nameserver":
			if len(f) > 1 {
				rc.nameservers = append(rc.nameservers, f[1])
			}
		case "search", "domain":
			rc.searches = nil
			// Trailing dots go (the root's "." with them), so a domain
			// reads the same however many dots the file ends it with.
			for _, s := range f[1:] {
				if s = strings.TrimRight(s, "."); s != "" {
					rc.searches = append(rc.searches, s)
				}
			}
		case "options":
			rc.options = append(rc.options, f[1:]...)
		}
	}
	return rc, sc.Err()
}

// hostResolvConf reads the host's resolver file, or an empty one when berth
// is configured without one.
func (c Config) hostResolvConf() (resolvConf, error) {
	if c.ResolvConf == "" {
		return resolvConf{}, nil
	}
	f, err := os.Open(c.ResolvConf)
	if err != nil {
		return resolvConf{}, fmt.Errorf("read the host's resolver file: %w", err)
	}
	defer f.Close()
	rc, err := parseResolvConf(f)
	if err != nil {
		return resolvConf{}, fmt.Errorf("read %s: %w", c.ResolvConf, err)
	}
	return rc, nil
}

// effectiveDNSPolicy is the policy the kubelet actually applies: ClusterFirst
// on the host network means Default (ClusterFirstWithHostNet opts in), and
// ClusterFirst without cluster DNS configured falls back to Default.
func (c Config) effectiveDNSPolicy(pod *v1.Pod) v1.DNSPolicy {
	policy := pod.Spec.DNSPolicy
	switch policy {
	case "", v1.DNSClusterFirst:
		if pod.Spec.HostNetwork {
			policy = v1.DNSDefault
		} else {
			policy = v1.DNSClusterFirst
		}
	case v1.DNSClusterFirstWithHostNet:
		policy = v1.DNSClusterFirst
	}
	if policy == v1.DNSClusterFirst && len(c.ClusterDNS) == 0 {
		policy = v1.DNSDefault
	}
	return policy
}

// For is the sandbox's DNS config for the pod's dnsPolicy and
// dnsConfig. nil means "no opinion": the runtime copies the host's
// resolv.conf, which is what berth wants when it was given no resolver file.
func (c Config) For(pod *v1.Pod) (*runtimeapi.DNSConfig, error) {
	policy := c.effectiveDNSPolicy(pod)
	var rc resolvConf
	switch policy {
	case v1.DNSNone:
	case v1.DNSDefault:
		if c.ResolvConf == "" && pod.Spec.DNSConfig == nil {
			return nil, nil
		}
		host, err := c.hostResolvConf()
		if err != nil {
			return nil, err
		}
		rc = host
	case v1.DNSClusterFirst:
		host, err := c.hostResolvConf()
		if err != nil {
			return nil, err
		}
		rc.nameservers = slices.Clone(c.ClusterDNS)
		if d := c.ClusterDomain; d != "" {
			rc.searches = []string{pod.Namespace + ".svc." + d, "svc." + d, d}
		}
		rc.searches = append(rc.searches, host.searches...)
		rc.options = []string{"ndots:5"}
	default:
		return nil, fmt.Errorf("dnsPolicy %q is not supported", pod.Spec.DNSPolicy)
	}
	if dc := pod.Spec.DNSConfig; dc != nil {
		rc.nameservers = appendUnique(rc.nameservers, dc.Nameservers...)
		rc.searches = appendUnique(rc.searches, dc.Searches...)
		rc.options = mergeDNSOptions(rc.options, dc.Options)
	}
	if policy == v1.DNSNone && len(rc.nameservers) == 0 && len(rc.searches) == 0 && len(rc.options) == 0 {
		return nil, fmt.Errorf("dnsPolicy None needs dnsConfig with at least one nameserver, search or option")
	}
	if len(rc.nameservers) > maxDNSNameservers {
		rc.nameservers = rc.nameservers[:maxDNSNameservers]
	}
	rc.searches = limitSearches(rc.searches)
	return &runtimeapi.DNSConfig{Servers: rc.nameservers, Searches: rc.searches, Options: rc.options}, nil
}

// appendUnique appends the values of add not already in list.
func appendUnique(list []string, add ...string) []string {
	for _, a := range add {
		if !slices.Contains(list, a) {
			list = append(list, a)
		}
	}
	return list
}

// mergeDNSOptions overlays the pod's dnsConfig options on the base: an option
// of the same name is replaced in place, a new one appended, as the kubelet
// merges them.
func mergeDNSOptions(base []string, add []v1.PodDNSConfigOption) []string {
	out := slices.Clone(base)
	for _, o := range add {
		opt := o.Name
		if o.Value != nil {
			opt += ":" + *o.Value
		}
		i := slices.IndexFunc(out, func(s string) bool {
			name, _, _ := strings.Cut(s, ":")
			return name == o.Name
		})
		if i >= 0 {
			out[i] = opt
		} else {
			out = append(out, opt)
		}
	}
	return out
}

// limitSearches keeps the first search domains that fit the resolver's
// count and length limits.
func limitSearches(searches []string) []string {
	if len(searches) > maxDNSSearchPaths {
		searches = searches[:maxDNSSearchPaths]
	}
	total := 0
	for i, s := range searches {
		total += len(s)
		if i > 0 {
			total++ // the separating space
		}
		if total > maxDNSSearchListChars {
			return searches[:i]
		}
	}
	return searches
}
