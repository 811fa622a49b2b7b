package podsnapshot

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/berth-agent/berth/internal/podspec"
)

// ReasonMissingObject rejects a pod that references a ConfigMap, a Secret
// or one of their keys that its source does not hold.
const ReasonMissingObject = "MissingObject"

// PodObjects are the ConfigMaps and Secrets one pod references, found in
// its own source and namespace: what the runtime reads its configMap and
// secret volumes, its environment and its image pull credentials from.
// Only objects that exist are here (an optional reference may find none).
// They are shared and must not be modified.
type PodObjects struct {
	ConfigMaps map[string]*v1.ConfigMap
	Secrets    map[string]*v1.Secret
}

// EqualObjects reports whether two pods' objects hold the same data, so a
// re-read that changed nothing is no update.
func EqualObjects(a, b *PodObjects) bool {
	if a == nil || b == nil {
		return a == b
	}
	return equality.Semantic.DeepEqual(a.ConfigMaps, b.ConfigMaps) && equality.Semantic.DeepEqual(a.Secrets, b.Secrets)
}

// objectIndex is the ConfigMaps and Secrets of one source: the first of a
// kind, namespace and name in manifest order counts.
type objectIndex map[podspec.ObjectKey]podspec.Object

// indexObjects collects a source's objects, in the order of its manifests,
// with a DuplicateName problem for each later copy.
func indexObjects(source string, results []Merged) (objectIndex, []podspec.Problem) {
	idx := objectIndex{}
	where := map[podspec.ObjectKey]string{}
	var problems []podspec.Problem
	for _, m := range results {
		for _, o := range m.Result.Objects {
			k := o.Key()
			here := m.Origin.Path
			if o.Line > 0 {
				here += ":" + strconv.Itoa(o.Line)
			}
			if first, dup := where[k]; dup {
				problems = append(problems, podspec.Problem{Source: source, Origin: m.Origin.Path, Line: o.Line, Field: "metadata.name",
					Reason: ReasonDuplicateName, Message: fmt.Sprintf("%s is already defined by %s; this one is ignored until that one is removed", k, first)})
				continue
			}
			idx[k], where[k] = o, here
		}
	}
	return idx, problems
}

// resolution is the outcome of resolving one pod: its objects, and the
// digest of the values it takes as environment ("" when none).
type resolution struct {
	objects *PodObjects
	envSum  string
}

// resolvePod resolves a pod's references in its namespace of idx with the
// API's semantics: a missing object or key fails the pod unless the
// reference is optional, in which case a volume lacks those files and an
// environment variable is unset. A pull secret must hold registry
// credentials.
func resolvePod(pod *v1.Pod, idx objectIndex) (resolution, field.ErrorList) {
	refs := podspec.ObjectRefs(pod)
	if len(refs) == 0 {
		return resolution{}, nil
	}
	var errs field.ErrorList
	objs := &PodObjects{}
	env := sha256.New()
	usesEnv := false
	for _, r := range refs {
		o, ok := idx[podspec.ObjectKey{Kind: r.Kind, Namespace: pod.Namespace, Name: r.Name}]
		if !ok {
			if !r.Optional {
				errs = append(errs, field.Invalid(field.NewPath(r.Field), r.Name, fmt.Sprintf(
					"no %s of that name in namespace %q of this source: define it in the same manifest file, directory or URL as the pod (or mark the reference optional)",
					r.Kind, pod.Namespace)))
			}
			if r.Env {
				// Its absence is part of the environment too: adding
				// it later changes the values.
				usesEnv = true
				fmt.Fprintf(env, "%s\x00%s\x00absent\x00", r.Kind, r.Name)
			}
			continue
		}
		for _, k := range r.Keys {
			get := o.Value
			if r.Env {
				get = o.EnvValue
			}
			if _, has := get(k.Key); !has && !r.Optional {
				errs = append(errs, field.Invalid(field.NewPath(k.Field), k.Key, fmt.Sprintf("%s %q has no key %q", r.Kind, r.Name, k.Key)))
			}
		}
		if r.Pull {
			if err := podspec.CheckPullSecret(o.Secret); err != nil {
				errs = append(errs, field.Invalid(field.NewPath(r.Field), r.Name, fmt.Sprintf("Secret %q: %v", r.Name, err)))
			}
		}
		if o.ConfigMap != nil {
			if objs.ConfigMaps == nil {
				objs.ConfigMaps = map[string]*v1.ConfigMap{}
			}
			objs.ConfigMaps[r.Name] = o.ConfigMap
		} else {
			if objs.Secrets == nil {
				objs.Secrets = map[string]*v1.Secret{}
			}
			objs.Secrets[r.Name] = o.Secret
		}
		if !r.Env {
			continue
		}
		usesEnv = true
		keys := o.EnvKeys()
		if !r.EnvAll {
			keys = []string{r.Keys[0].Key}
		}
		fmt.Fprintf(env, "%s\x00%s\x00", r.Kind, r.Name)
		for _, k := range keys {
			v, has := o.EnvValue(k)
			fmt.Fprintf(env, "%s\x00%t\x00%d\x00", k, has, len(v))
			env.Write(v)
		}
	}
	if len(errs) > 0 {
		return resolution{}, errs
	}
	res := resolution{objects: objs}
	if usesEnv {
		res.envSum = hex.EncodeToString(env.Sum(nil))
	}
	return res, nil
}

// withEnvUID returns the pod with a UID that also hashes the values it
// takes as environment, so that an edit of one is a new pod, restarted as
// for any edit of its manifest. With the node's key (kept by the sources) the hash
// is an HMAC: a UID reveals nothing a guess of a Secret's value could be
// checked against. The pod as parsed is not modified.
func withEnvUID(pod *v1.Pod, envSum string, key []byte) *v1.Pod {
	h := sha256.New()
	if key != nil {
		h = hmac.New(sha256.New, key)
	}
	h.Write([]byte(pod.UID))
	h.Write([]byte{0})
	h.Write([]byte(envSum))
	out := pod.DeepCopy()
	out.UID = types.UID(hex.EncodeToString(h.Sum(nil))[:32])
	out.Annotations[podspec.AnnotationHash] = string(out.UID)
	return out
}

// resolvedPod is a pod of the last snapshot with what resolving it gave.
type resolvedPod struct {
	in      *v1.Pod // as its manifest yielded it
	out     *v1.Pod // as sent: with its environment's UID
	envSum  string
	objects *PodObjects
}

// Resolver resolves the references of one source's pods to the source's
// ConfigMaps and Secrets, and keeps the last good resolution of each pod:
// an object that breaks or goes away never stops a pod that runs with it
// (as a broken manifest never does), the pod keeps the data it had and the
// problem says so. It belongs to its source's goroutine.
type Resolver struct {
	key  []byte                 // the node's UID key; nil without one
	last map[string]resolvedPod // by full name
}

// NewResolver is the Resolver of one source; key is the node's UID key
// (nil: unkeyed, as berth validate shows).
func NewResolver(key []byte) *Resolver { return &Resolver{key: key} }

// resolve completes snap, assembled from results: each pod's objects in
// snap.Objects, its UID updated for the values it takes as environment,
// pods whose references fail replaced by their last good resolution or
// dropped with a problem, and the problems of duplicate objects.
func (r *Resolver) resolve(snap *Snapshot, results []Merged) {
	idx, problems := indexObjects(snap.Source, results)
	snap.Problems = append(snap.Problems, problems...)
	// from is where a pod came from: its manifest's origin and result,
	// and its index there.
	type from struct {
		origin podspec.Origin
		result podspec.Result
		i      int
	}
	origins := map[*v1.Pod]from{}
	for _, m := range results {
		for i, p := range m.Result.Pods {
			origins[p] = from{m.Origin, m.Result, i}
		}
	}
	next := make(map[string]resolvedPod, len(snap.Pods))
	pods := snap.Pods[:0]
	for _, p := range snap.Pods {
		name := podspec.FullName(p)
		prev, hadPrev := r.last[name]
		f := origins[p]
		res, errs := resolvePod(p, idx)
		if len(errs) > 0 {
			keep := hadPrev && prev.in.Annotations[podspec.AnnotationOrigin] == p.Annotations[podspec.AnnotationOrigin]
			// In the order of the manifest's lines, as the pod's other
			// problems are.
			sort.SliceStable(errs, func(i, j int) bool {
				return f.result.RefLine(f.i, errs[i].Field) < f.result.RefLine(f.i, errs[j].Field)
			})
			for _, e := range errs {
				line, fieldPath := f.result.RefLine(f.i, e.Field), f.result.FieldPath(f.i, e.Field)
				msg := e.ErrorBody()
				if keep {
					msg += " (the last good version of this pod keeps running)"
				}
				snap.Problems = append(snap.Problems, podspec.Problem{Source: snap.Source, Origin: f.origin.Path, Line: line,
					Field: fieldPath, Reason: ReasonMissingObject, Message: msg, Name: p.Name, Namespace: p.Namespace})
			}
			if keep {
				next[name] = prev
				pods = append(pods, prev.out)
			}
			continue
		}
		out := p
		switch {
		case hadPrev && prev.in == p && prev.envSum == res.envSum:
			out = prev.out // unchanged: the same object, which the store compares by pointer first
		case res.envSum != "" && f.result.DerivedUID(f.i):
			out = withEnvUID(p, res.envSum, r.key)
		}
		next[name] = resolvedPod{in: p, out: out, envSum: res.envSum, objects: res.objects}
		pods = append(pods, out)
	}
	snap.Pods = pods
	r.last = next
	snap.Objects = make(map[types.UID]*PodObjects, len(next))
	for _, rp := range next {
		if rp.objects != nil {
			snap.Objects[rp.out.UID] = rp.objects
		}
	}
}
