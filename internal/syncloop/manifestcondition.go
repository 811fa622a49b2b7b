package syncloop

import (
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/source/httpsource"
)

// problemIndex finds the manifest problems that concern a pod: the ones
// naming it, and the ones of its file or URL that could not name any pod
// (a syntax error, an emptied or unreadable file).
type problemIndex struct {
	named   map[string][]podspec.Problem // origin + "\x00" + full name
	unnamed map[string][]podspec.Problem // origin
}

// indexProblems builds the index once per listing, so mapping N pods costs
// N lookups, not N scans of every problem.
func indexProblems(problems []podspec.Problem) problemIndex {
	ix := problemIndex{named: map[string][]podspec.Problem{}, unnamed: map[string][]podspec.Problem{}}
	for _, p := range problems {
		// An unreachable URL says nothing about the manifest: the pods it
		// served before run as they were, and /problems reports the outage.
		if p.Reason == httpsource.ReasonUnreachable {
			continue
		}
		if p.Name == "" {
			ix.unnamed[p.Origin] = append(ix.unnamed[p.Origin], p)
			continue
		}
		key := p.Origin + "\x00" + podspec.JoinFullName(p.Name, p.Namespace)
		ix.named[key] = append(ix.named[key], p)
	}
	return ix
}

// of returns the problems of pod's manifest. A problem naming the pod must
// come from the pod's own file or URL: another file defining the same name
// is refused as a duplicate, which is that file's problem, not this pod's.
func (ix problemIndex) of(pod *v1.Pod) []podspec.Problem {
	origin := pod.Annotations[podspec.AnnotationOrigin]
	named := ix.named[origin+"\x00"+podspec.JoinFullName(pod.Name, pod.Namespace)]
	unnamed := ix.unnamed[origin]
	if len(unnamed) == 0 {
		return named
	}
	// Both come from the pod's one origin: keep them in line order, as
	// /problems lists them.
	all := append(append([]podspec.Problem(nil), named...), unnamed...)
	slices.SortStableFunc(all, func(a, b podspec.Problem) int { return a.Line - b.Line })
	return all
}

// setCondition returns conds with c in place of the condition of its type,
// or appended. It never writes into conds: the status store's pods are
// shared with every reader.
func setCondition(conds []v1.PodCondition, c v1.PodCondition) []v1.PodCondition {
	out := make([]v1.PodCondition, 0, len(conds)+1)
	replaced := false
	for _, old := range conds {
		if old.Type == c.Type {
			old, replaced = c, true
		}
		out = append(out, old)
	}
	if !replaced {
		out = append(out, c)
	}
	return out
}
