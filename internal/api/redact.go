package api

import (
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/podspec"
)

// redacted replaces every value --listen-pods=redacted hides.
const redacted = "<redacted>"

// safeAnnotations are the annotations whose values berth writes itself and
// that hold nothing secret; every other annotation keeps its key only.
var safeAnnotations = map[string]bool{
	podspec.AnnotationHash:   true,
	podspec.AnnotationSource: true,
	podspec.AnnotationSeen:   true,
}

// redactPod returns a copy of p for --listen-pods=redacted: what a
// monitoring agent needs (identity, labels, images, phase, conditions,
// container states, restart counts, IPs), without what may carry a secret:
// environment values, commands and arguments, lifecycle hooks, probe
// commands, HTTP headers and query values, annotation values, and the
// free-text messages of statuses
// (a termination message is whatever the container wrote; a manifest error
// may quote a field's value). p is shared with other readers and is not
// modified.
func redactPod(p *v1.Pod) *v1.Pod {
	cp := *p
	if len(p.Annotations) > 0 {
		cp.Annotations = make(map[string]string, len(p.Annotations))
		for k, v := range p.Annotations {
			if !safeAnnotations[k] {
				v = redacted
			}
			cp.Annotations[k] = v
		}
	}
	cp.ManagedFields = nil
	cp.Spec.InitContainers = redactContainers(p.Spec.InitContainers)
	cp.Spec.Containers = redactContainers(p.Spec.Containers)
	cp.Spec.EphemeralContainers = nil
	cp.Status.Message = redactText(p.Status.Message)
	cp.Status.Conditions = append([]v1.PodCondition(nil), p.Status.Conditions...)
	for i := range cp.Status.Conditions {
		cp.Status.Conditions[i].Message = redactText(cp.Status.Conditions[i].Message)
	}
	cp.Status.InitContainerStatuses = redactContainerStatuses(p.Status.InitContainerStatuses)
	cp.Status.ContainerStatuses = redactContainerStatuses(p.Status.ContainerStatuses)
	cp.Status.EphemeralContainerStatuses = nil
	return &cp
}

func redactContainers(cs []v1.Container) []v1.Container {
	if cs == nil {
		return nil
	}
	out := make([]v1.Container, len(cs))
	for i, c := range cs {
		c.Command, c.Args = redactStrings(c.Command), redactStrings(c.Args)
		c.Env = append([]v1.EnvVar(nil), c.Env...)
		for j := range c.Env {
			if c.Env[j].Value != "" {
				c.Env[j].Value = redacted
			}
		}
		c.Lifecycle = nil
		c.LivenessProbe = redactProbe(c.LivenessProbe)
		c.ReadinessProbe = redactProbe(c.ReadinessProbe)
		c.StartupProbe = redactProbe(c.StartupProbe)
		out[i] = c
	}
	return out
}

// redactProbe keeps a probe's kind and timing, not its command, headers or
// query values (see redactHTTPPath).
func redactProbe(p *v1.Probe) *v1.Probe {
	if p == nil {
		return nil
	}
	cp := *p
	if p.Exec != nil {
		cp.Exec = &v1.ExecAction{Command: redactStrings(p.Exec.Command)}
	}
	if p.HTTPGet != nil {
		get := *p.HTTPGet
		get.HTTPHeaders = nil
		get.Path = redactHTTPPath(get.Path)
		cp.HTTPGet = &get
	}
	return &cp
}

// redactHTTPPath keeps the path of an HTTP probe, which says what is
// probed, and replaces the value of every query parameter, where servers
// take tokens (?token=...); the keys stay, so an operator still recognises
// the endpoint. A parameter without "=" may be a bare token and is
// replaced whole, and so is a fragment. This is the rule of a manifest URL
// (podspec.RedactURL): credentials go in the userinfo, which a probe's
// path has none of, or in the query, not in the path.
func redactHTTPPath(p string) string {
	i := strings.IndexAny(p, "?#")
	if i < 0 {
		return p
	}
	out, rest := p[:i], p[i:]
	if q, ok := strings.CutPrefix(rest, "?"); ok {
		query, _, hasFragment := strings.Cut(q, "#")
		out += "?" + redactQuery(query)
		if !hasFragment {
			return out
		}
	}
	return out + "#" + redacted
}

// redactQuery replaces every value of a raw query, keeping the keys and
// their order; a part without "=" is replaced whole.
func redactQuery(q string) string {
	parts := strings.Split(q, "&")
	for i, part := range parts {
		key, _, hasValue := strings.Cut(part, "=")
		switch {
		case hasValue:
			parts[i] = key + "=" + redacted
		case part != "":
			parts[i] = redacted
		}
	}
	return strings.Join(parts, "&")
}

func redactContainerStatuses(list []v1.ContainerStatus) []v1.ContainerStatus {
	if list == nil {
		return nil
	}
	out := make([]v1.ContainerStatus, len(list))
	for i, cs := range list {
		cs.State = redactState(cs.State)
		cs.LastTerminationState = redactState(cs.LastTerminationState)
		out[i] = cs
	}
	return out
}

func redactState(s v1.ContainerState) v1.ContainerState {
	if s.Waiting != nil {
		w := *s.Waiting
		w.Message = redactText(w.Message)
		s.Waiting = &w
	}
	if s.Terminated != nil {
		t := *s.Terminated
		t.Message = redactText(t.Message)
		s.Terminated = &t
	}
	return s
}

func redactStrings(s []string) []string {
	if len(s) == 0 {
		return s
	}
	return []string{redacted}
}

func redactText(s string) string {
	if s == "" {
		return ""
	}
	return redacted
}
