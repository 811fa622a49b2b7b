package podsnapshot

import (
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/berth-agent/berth/internal/podspec"
)

// ReasonDuplicateName and ReasonDuplicateUID reject a pod whose full name or
// UID another manifest of the same source already uses.
const (
	ReasonDuplicateName = "DuplicateName"
	ReasonDuplicateUID  = "DuplicateUID"
)

// KeepLastGood merges a fresh result for one manifest with the pods that
// manifest had before, so a broken edit never stops a running pod: a pod
// whose new version is rejected under a known name keeps its previous
// version; when a rejection cannot be tied to a name (a syntax error, an
// unreadable or empty file) every previous pod without a new version is
// kept. Only pods the manifest no longer mentions at all are dropped.
// First, the pods of an earlier berth's unkeyed UIDs keep them
// (keepLegacyUIDs).
func KeepLastGood(prev, cur podspec.Result) podspec.Result {
	keepLegacyUIDs(prev, cur)
	if len(prev.Pods) == 0 && len(prev.Objects) == 0 || len(cur.Problems) == 0 {
		return cur
	}
	fresh := sets.New[string]()
	for _, p := range cur.Pods {
		fresh.Insert(podspec.FullName(p))
	}
	rejected := sets.New[string]()
	keepAll := false
	for _, p := range cur.Problems {
		if p.Name == "" {
			keepAll = true
		}
		rejected.Insert(podspec.JoinFullName(p.Name, p.Namespace))
	}
	out := podspec.Result{Objects: cur.Objects}
	for i := range cur.Pods {
		out.AddPodOf(cur, i)
	}
	kept := sets.New[string]()
	for i, p := range prev.Pods {
		name := podspec.FullName(p)
		if fresh.Has(name) || !(keepAll || rejected.Has(name)) {
			continue
		}
		out.AddPodOf(prev, i)
		kept.Insert(name)
	}
	// Objects have no pod name to tie a rejection to: a manifest with
	// any problem keeps those of its objects it no longer yields, so a
	// broken edit of a ConfigMap never takes it from the pods using it.
	freshObjects := map[podspec.ObjectKey]bool{}
	for _, o := range cur.Objects {
		freshObjects[o.Key()] = true
	}
	for _, o := range prev.Objects {
		if !freshObjects[o.Key()] {
			out.Objects = append(out.Objects, o)
		}
	}
	// Say so in the problems: the operator should know the edit did not
	// take effect and what is running instead.
	for _, p := range cur.Problems {
		switch {
		case p.Name != "" && kept.Has(podspec.JoinFullName(p.Name, p.Namespace)):
			p.Message += " (the last good version of this pod keeps running)"
		case p.Name == "" && kept.Len() > 0:
			p.Message += " (the pods this manifest defined before keep running)"
		}
		out.Problems = append(out.Problems, p)
	}
	return out
}

// keepLegacyUIDs gives each pod of cur the UID a berth before the node's
// UID key derived for it (Result.LegacyUID) in place of its keyed UID
// when prev, the manifest's previous version, has a pod of that UID: the
// very content that runs under it. After an upgrade prev is the version
// the last good state kept (written before the earlier berth ran any of
// it, see the source's lastGoodState.stage), so a running pod, a rollback's bad version
// and the pods a restart with a broken manifest keeps all keep the UIDs
// they run and are known by, and nothing restarts. Any new content gets
// its keyed UID, and so does content coming back to what had the unkeyed
// one: prev then has the keyed UID, and the unkeyed one is gone for good.
// The pods of cur are the manifest's fresh parse, not yet shared; their
// UIDs are set in place.
func keepLegacyUIDs(prev, cur podspec.Result) {
	var had sets.Set[types.UID]
	for i, p := range cur.Pods {
		legacy := cur.LegacyUID(i)
		if legacy == "" {
			continue
		}
		if had == nil {
			had = sets.New[types.UID]()
			for _, q := range prev.Pods {
				had.Insert(q.UID)
			}
		}
		if had.Has(legacy) {
			p.UID = legacy
			p.Annotations[podspec.AnnotationHash] = string(legacy)
		}
	}
}

// Merged is one manifest's result with where it came from, in the order
// duplicates are decided: files in lexical order, documents in file order.
type Merged struct {
	Origin podspec.Origin
	Result podspec.Result
}

// Assemble builds a source's snapshot from its manifests. Within a source a
// full name (and an explicit UID) may appear once: the first manifest in
// order keeps its pod and every later one is rejected with a problem naming
// the first, so what runs never depends on the order events arrived in.
//
// The pods' references to ConfigMaps and Secrets are then resolved across
// the whole source by r (see Resolver), which keeps the last good
// resolution of each pod between calls.
func Assemble(source string, results []Merged, failed bool, extra []podspec.Problem, r *Resolver) Snapshot {
	snap := Snapshot{Source: source, Failed: failed}
	owner := map[string]string{}
	uids := map[types.UID]string{}
	var accepted []placed
	for _, m := range results {
		snap.Problems = append(snap.Problems, m.Result.Problems...)
		for i, p := range m.Result.Pods {
			name := podspec.FullName(p)
			problem := podspec.Problem{Source: source, Origin: m.Origin.Path, Line: m.Result.Lines[i], Field: "metadata.name",
				Name: p.Name, Namespace: p.Namespace}
			if first, dup := owner[name]; dup {
				problem.Reason = ReasonDuplicateName
				problem.Message = fmt.Sprintf("pod %q in namespace %q is already defined by %s; this one is ignored until that one is removed", p.Name, p.Namespace, first)
				snap.Problems = append(snap.Problems, problem)
				continue
			}
			if first, dup := uids[p.UID]; dup {
				problem.Field, problem.Reason = "metadata.uid", ReasonDuplicateUID
				problem.Message = fmt.Sprintf("uid %q is already used by %s; this one is ignored until that one is removed", p.UID, first)
				snap.Problems = append(snap.Problems, problem)
				continue
			}
			where := m.Origin.Path
			if m.Result.Lines[i] > 0 {
				where = fmt.Sprintf("%s:%d", where, m.Result.Lines[i])
			}
			owner[name], uids[p.UID] = where, where
			snap.Pods = append(snap.Pods, p)
			snap.Warnings = append(snap.Warnings, m.Result.PodWarnings(i)...)
			accepted = append(accepted, placed{pod: p, origin: m.Origin.Path, res: m.Result, i: i})
		}
	}
	r.resolve(&snap, results)
	snap.Warnings = append(snap.Warnings, hostPortConflicts(source, running(accepted, snap.Pods))...)
	snap.Problems = append(snap.Problems, extra...)
	return snap
}
