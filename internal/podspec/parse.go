package podspec

import (
	"slices"
	"sort"

	"github.com/berth-agent/berth/internal/podrules"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Problem reasons of the validation stage.
const (
	ReasonInvalid     = "Invalid"
	ReasonUnsupported = "Unsupported"
)

// Result is what one manifest (a file or an HTTP body) yields: the pods berth
// accepts and the problems of everything it refuses.
type Result struct {
	// Pods are defaulted, validated and carry their static-pod identity.
	Pods []*v1.Pod
	// Lines[i] is the line of Pods[i] in its manifest, for later
	// duplicate-name problems.
	Lines []int
	// Objects are the ConfigMaps and Secrets the manifest holds, for the
	// pods of its source to reference (see package podsnapshot).
	Objects []Object
	// Problems are sorted by line.
	Problems []Problem
	// extra[i] is what resolving Pods[i]'s references needs of its
	// manifest; a missing entry (a pod restored from an older state) is
	// the zero podExtra.
	extra []podExtra
	// secret: the manifest holds a Secret, valid or not, or may (see
	// decodeManifests).
	secret bool
}

// podExtra is what parsing knows of a pod that its object does not say.
type podExtra struct {
	// derivedUID: the UID is berth's hash of the manifest (no
	// metadata.uid), so the values the pod takes as environment from
	// ConfigMaps and Secrets join it: an edit of one restarts the pod.
	derivedUID bool
	// refLines are the lines of the pod's references to ConfigMaps and
	// Secrets, by field path.
	refLines map[string]int
	prefix   string // of the pod in its manifest, as decoded.prefix
	// legacyUID is the UID a berth before the node's UID key derived
	// for the pod ("" when the UID is explicit or unkeyed); see
	// keepLegacyUIDs.
	legacyUID types.UID
	// warnings are the pod's warnings (podWarnings); hostPortLines the
	// lines of its host-port claims (hostPortLines).
	warnings      []Problem
	hostPortLines map[string]int
}

// extraOf is the podExtra of Pods[i].
func (r Result) extraOf(i int) podExtra {
	if i < len(r.extra) {
		return r.extra[i]
	}
	return podExtra{}
}

// Parse runs the whole pipeline on one manifest: decode, static-pod
// identity, API defaults, validation, and the checks for what a standalone
// node cannot honour. A pod that fails any step becomes a Problem (named
// when decoding got that far) and never affects its siblings. It does not
// check the size: readers enforce the limit while reading. Nor does it
// limit the number of documents: sources use ParseLimited. The UIDs it
// derives are unkeyed, as berth validate shows them; the sources' are
// keyed with the node's UID key (contentUID).
func Parse(data []byte, origin Origin, nodeName string) Result {
	return parse(data, origin, nodeName, 0, nil)
}

// parse is Parse with a document limit (0: none), see decodeManifests, and
// the node's UID key (nil: none).
func parse(data []byte, origin Origin, nodeName string, limit int, key []byte) Result {
	docs, decodeProblems, secret := decodeManifests(data, origin, limit)
	res := Result{secret: secret}
	for i := range decodeProblems {
		p := &decodeProblems[i]
		if p.Name != "" {
			p.Name, p.Namespace = staticName(p.Name, p.Namespace, nodeName)
		}
	}
	res.Problems = decodeProblems
	for _, d := range docs {
		if d.obj != nil {
			tooMany := validateObjectKeyCount(d.obj)
			defaultObject(d.obj)
			bad := objectProblems(append(tooMany, validateObject(d.obj)...), ReasonInvalid, d, origin)
			bad = append(bad, objectProblems(unsupportedObject(d.obj), ReasonUnsupported, d, origin)...)
			if len(bad) > 0 {
				res.Problems = append(res.Problems, bad...)
				continue
			}
			res.Objects = append(res.Objects, *d.obj)
			continue
		}
		pod := d.pod
		named := pod.Name != ""
		derived := pod.UID == ""
		legacy := applyIdentity(pod, nodeName, origin, key)
		warnings := podWarnings(pod, d, origin)
		podrules.Default(pod)
		errs := podrules.Validate(pod)
		if !named {
			// Without a name only the node suffix is left; say what is missing.
			errs = slices.DeleteFunc(errs, func(e *field.Error) bool { return e.Field == "metadata.name" })
			errs = append(field.ErrorList{field.Required(field.NewPath("metadata", "name"), "a static pod needs a name")}, errs...)
		}
		bad := fieldProblems(errs, ReasonInvalid, d, origin)
		bad = append(bad, fieldProblems(podrules.CheckStandalone(pod), ReasonUnsupported, d, origin)...)
		if len(bad) > 0 {
			if named {
				for i := range bad {
					bad[i].Name, bad[i].Namespace = pod.Name, pod.Namespace
				}
			}
			res.Problems = append(res.Problems, bad...)
			continue
		}
		res.Pods = append(res.Pods, pod)
		res.Lines = append(res.Lines, lineOf(d.node, "metadata.name"))
		for i := range warnings {
			warnings[i].Name, warnings[i].Namespace = pod.Name, pod.Namespace
		}
		res.extra = append(res.extra, podExtra{derivedUID: derived, refLines: refLines(pod, d), prefix: d.prefix, legacyUID: legacy,
			warnings: warnings, hostPortLines: hostPortLines(pod, d)})
	}
	sort.SliceStable(res.Problems, func(i, j int) bool { return res.Problems[i].Line < res.Problems[j].Line })
	return res
}

// staticName is the identity a pod named name in namespace gets on this
// node, as applyIdentity gives it.
func staticName(name, namespace, nodeName string) (string, string) {
	if namespace == "" {
		namespace = "default"
	}
	return name + "-" + nodeName, namespace
}

// fieldProblems turns validation errors into Problems pointing at the line
// of each field in the pod's manifest.
func fieldProblems(errs field.ErrorList, reason string, d decoded, origin Origin) []Problem {
	out := make([]Problem, 0, len(errs))
	for _, e := range errs {
		msg := e.ErrorBody()
		if reason == ReasonUnsupported {
			msg = "not supported on a standalone node: " + e.Detail
		}
		out = append(out, Problem{
			Source: origin.Source, Origin: origin.Path, Line: lineOf(d.node, e.Field),
			Field: d.prefix + e.Field, Reason: reason, Message: msg,
		})
	}
	return out
}

// HoldsSecret reports whether the manifest holds a Secret, valid or not,
// or may: its file must then be as private as a Secret's.
func (r Result) HoldsSecret() bool { return r.secret }

// LegacyUID is the plain-hash UID an earlier berth gave Pods[i], which
// it keeps while that pod runs under it; "" when there is none.
func (r Result) LegacyUID(i int) types.UID { return r.extraOf(i).legacyUID }

// RefLine is the line of the field path fieldPath, a reference of Pods[i]
// to a ConfigMap or Secret (see ObjectRefs), in its manifest; 0 when
// unknown.
func (r Result) RefLine(i int, fieldPath string) int { return r.extraOf(i).refLines[fieldPath] }

// FieldPath is fieldPath of Pods[i] as its manifest locates it: with the
// "items[N]." of a PodList.
func (r Result) FieldPath(i int, fieldPath string) string { return r.extraOf(i).prefix + fieldPath }

// DerivedUID reports whether the UID of Pods[i] is berth's hash of its
// manifest rather than its metadata.uid.
func (r Result) DerivedUID(i int) bool { return r.extraOf(i).derivedUID }

// AddPodOf appends Pods[i] of from, with its line and what resolving its
// references needs.
func (r *Result) AddPodOf(from Result, i int) {
	r.Pods = append(r.Pods, from.Pods[i])
	r.Lines = append(r.Lines, from.Lines[i])
	r.extra = append(r.extra, from.extraOf(i))
}

// AddRestored appends a pod restored from persisted state, read at line
// of its manifest; derivedUID is what DerivedUID said of it.
func (r *Result) AddRestored(pod *v1.Pod, line int, derivedUID bool) {
	r.Pods = append(r.Pods, pod)
	r.Lines = append(r.Lines, line)
	r.extra = append(r.extra, podExtra{derivedUID: derivedUID})
}
