package podspec

import (
	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/podrules"
)

// Warning reasons: a pod berth runs all the same, with something the
// operator should know.
const (
	// ReasonIgnoredField: the pod sets a field berth accepts and ignores
	// (podrules.IgnoredFields).
	ReasonIgnoredField = "IgnoredField"
	// ReasonHostPortConflict: the pod claims a host port an earlier pod of
	// the source claims too.
	ReasonHostPortConflict = "HostPortConflict"
)

// podWarnings are the warnings of an accepted pod, decoded as d: the set
// fields berth ignores, at their lines. pod is as decoded, before
// defaults (see podrules.IgnoredFields).
func podWarnings(pod *v1.Pod, d decoded, origin Origin) []Problem {
	var out []Problem
	for _, w := range podrules.IgnoredFields(pod) {
		out = append(out, Problem{Source: origin.Source, Origin: origin.Path, Line: lineOf(d.node, w.Field),
			Field: d.prefix + w.Field, Reason: ReasonIgnoredField, Message: w.Message})
	}
	return out
}

// hostPortLines are the lines of a defaulted pod's host-port claims, by
// field path, for the clashes podsnapshot.Assemble reports.
func hostPortLines(pod *v1.Pod, d decoded) map[string]int {
	var out map[string]int
	for _, h := range podrules.HostPorts(pod) {
		if out == nil {
			out = map[string]int{}
		}
		out[h.Field] = lineOf(d.node, h.Field)
	}
	return out
}

// Warnings are the warnings of the result's pods, in their order.
func (r Result) Warnings() []Problem {
	var out []Problem
	for i := range r.Pods {
		out = append(out, r.extraOf(i).warnings...)
	}
	return out
}

// PodWarnings are the warnings of Pods[i].
func (r Result) PodWarnings(i int) []Problem { return r.extraOf(i).warnings }

// HostPortLine is the line of Pods[i]'s host-port claim at fieldPath (a
// podrules.HostPort's Field), 0 when unknown.
func (r Result) HostPortLine(i int, fieldPath string) int {
	return r.extraOf(i).hostPortLines[fieldPath]
}
