package podrules

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// validateHostPorts is the API server's checkHostPortConflicts: two ports of
// a pod's app containers asking for the same hostPort, protocol and hostIP
// are a Duplicate value at the second, keyed as PROTOCOL/HOSTIP/PORT. Like
// the API server it looks at spec.containers only: the runtime maps the
// host ports of app containers alone (internal/criconfig), as the kubelet
// does, so an init container's hostPort claims nothing.
func validateHostPorts(spec *v1.PodSpec, p *field.Path) field.ErrorList {
	var errs field.ErrorList
	seen := sets.New[string]()
	for ci, c := range spec.Containers {
		for pi, port := range c.Ports {
			if port.HostPort == 0 {
				continue
			}
			key := fmt.Sprintf("%s/%s/%d", port.Protocol, port.HostIP, port.HostPort)
			if seen.Has(key) {
				errs = append(errs, field.Duplicate(p.Child("containers").Index(ci).Child("ports").Index(pi).Child("hostPort"), key))
				continue
			}
			seen.Insert(key)
		}
	}
	return errs
}

// HostPort is one host port a pod claims on the node.
type HostPort struct {
	Protocol v1.Protocol
	// IP is the host address bound; "" and 0.0.0.0 mean every address.
	IP   string
	Port int32
	// Field is the claim's path in the pod, as in its manifest.
	Field string
}

// String is the claim as the API server keys host ports, with the
// scheduler's defaults: PROTOCOL/IP/PORT.
func (h HostPort) String() string {
	return fmt.Sprintf("%s/%s/%d", h.protocol(), h.ip(), h.Port)
}

func (h HostPort) protocol() v1.Protocol {
	if h.Protocol == "" {
		return v1.ProtocolTCP
	}
	return h.Protocol
}

func (h HostPort) ip() string {
	if h.IP == "" {
		return "0.0.0.0"
	}
	return h.IP
}

// Clashes reports whether two claims cannot both be bound on one node, as
// the scheduler's NodePorts filter judges them: same protocol and port,
// and the same address or either one every address.
func (h HostPort) Clashes(o HostPort) bool {
	if h.Port != o.Port || h.protocol() != o.protocol() {
		return false
	}
	return h.ip() == o.ip() || h.ip() == "0.0.0.0" || o.ip() == "0.0.0.0"
}

// HostPorts are the host ports a defaulted pod claims on its node: the
// hostPort of each port of its app containers, which for a hostNetwork
// pod Default has set to the containerPort, as the scheduler counts it.
func HostPorts(pod *v1.Pod) []HostPort {
	var out []HostPort
	p := field.NewPath("spec", "containers")
	for ci, c := range pod.Spec.Containers {
		for pi, port := range c.Ports {
			if port.HostPort == 0 {
				continue
			}
			out = append(out, HostPort{Protocol: port.Protocol, IP: port.HostIP, Port: port.HostPort,
				Field: p.Index(ci).Child("ports").Index(pi).Child("hostPort").String()})
		}
	}
	return out
}
