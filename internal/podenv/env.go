package podenv

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Expand replaces $(NAME) references in s with lookup(NAME), the way the
// kubelet expands env values, command and args: "$$" is a literal "$", a
// reference to an unknown name stays as written, a "$" not followed by
// "(" or "$" is kept, and a "$(" that no ")" closes is kept while the rest
// is still expanded ("$(A$$" is "$(A$"). lookup reports whether the name
// is defined.
func Expand(s string, lookup func(name string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString("$(")
				i++
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

// Context is what env values may refer to: the pod, the container, and
// the runtime facts only known at start (pod IPs, host IP, node capacity).
type Context struct {
	Pod         *v1.Pod
	Container   *v1.Container
	PodIPs      []string
	HostIP      string
	Allocatable v1.ResourceList
	Objects     PodObjects
	// FileKey reads a fileKeyRef's value (the runtime manager reads the
	// env file in its volume); found is false for an optional one whose
	// file or key is absent.
	FileKey func(ref *v1.FileKeySelector) (value string, found bool, err error)
}

// Resolve is the container's environment as the kubelet makes it:
// first envFrom (each ConfigMap's or Secret's keys, prefixed, in key order,
// a later source overriding an earlier one), then env in spec order, each
// value expanded against the variables defined before it. Values taken
// from ConfigMaps and Secrets are never expanded.
func Resolve(ec Context) ([]Var, error) {
	c := ec.Container
	var out []Var
	index := map[string]int{}
	lookup := func(name string) (string, bool) {
		if i, ok := index[name]; ok {
			return out[i].Value, true
		}
		return "", false
	}
	set := func(name, value string) {
		// A later definition of the same name replaces the earlier one in
		// place, as the kubelet's env list does.
		if i, ok := index[name]; ok {
			out[i].Value = value
			return
		}
		index[name] = len(out)
		out = append(out, Var{Name: name, Value: value})
	}
	for _, src := range c.EnvFrom {
		vars, err := ec.Objects.envFrom(src)
		if err != nil {
			return nil, err
		}
		for _, v := range vars {
			set(v.Name, v.Value)
		}
	}
	for _, e := range c.Env {
		var value string
		switch {
		case e.ValueFrom == nil:
			value = Expand(e.Value, lookup)
		case e.ValueFrom.FieldRef != nil:
			v, err := ec.fieldRef(e.ValueFrom.FieldRef)
			if err != nil {
				return nil, fmt.Errorf("env %q: %w", e.Name, err)
			}
			value = v
		case e.ValueFrom.ResourceFieldRef != nil:
			v, err := ec.resourceFieldRef(e.ValueFrom.ResourceFieldRef)
			if err != nil {
				return nil, fmt.Errorf("env %q: %w", e.Name, err)
			}
			value = v
		case e.ValueFrom.FileKeyRef != nil:
			v, ok, err := ec.FileKey(e.ValueFrom.FileKeyRef)
			if err != nil {
				return nil, fmt.Errorf("env %q: %w", e.Name, err)
			}
			if !ok {
				continue // optional and absent: the variable is not set
			}
			value = v
		case e.ValueFrom.ConfigMapKeyRef != nil, e.ValueFrom.SecretKeyRef != nil:
			v, ok, err := ec.Objects.keyRef(e.ValueFrom)
			if err != nil {
				return nil, fmt.Errorf("env %q: %w", e.Name, err)
			}
			if !ok {
				continue // optional, and absent: the variable is unset
			}
			value = v
		default:
			return nil, fmt.Errorf("env %q: valueFrom names no source berth supports", e.Name)
		}
		set(e.Name, value)
	}
	return out, nil
}

// Var is one resolved environment variable.
type Var struct{ Name, Value string }

// ExpandSubPath expands a volumeMount's subPathExpr as the kubelet does:
// unlike in env values, command and args, a reference to a variable that
// is undefined or empty is an error, never a path with "$(" in it or a
// path that silently lands at the volume's root.
func ExpandSubPath(expr string, env []Var) (string, error) {
	lookup := Lookup(env)
	var missing []string
	out := Expand(expr, func(name string) (string, bool) {
		v, ok := lookup(name)
		if !ok || v == "" {
			if !slices.Contains(missing, name) {
				missing = append(missing, name)
			}
			return "", true
		}
		return v, true
	})
	if len(missing) > 0 {
		slices.Sort(missing)
		return "", fmt.Errorf("subPathExpr %q: missing value for %s", expr, strings.Join(missing, ", "))
	}
	return out, nil
}

// Lookup turns a resolved environment into the lookup expand takes, for
// command, args and subPathExpr.
func Lookup(env []Var) func(string) (string, bool) {
	m := make(map[string]string, len(env))
	for _, e := range env {
		m[e.Name] = e.Value
	}
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}

// fieldRef resolves a downward API field path, with the paths the kubelet
// offers to env vars.
func (ec Context) fieldRef(f *v1.ObjectFieldSelector) (string, error) {
	if f.APIVersion != "" && f.APIVersion != "v1" {
		return "", fmt.Errorf("fieldRef apiVersion %q is not supported (only v1)", f.APIVersion)
	}
	pod := ec.Pod
	path := f.FieldPath
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		if len(ec.PodIPs) == 0 {
			return "", nil
		}
		return ec.PodIPs[0], nil
	case "status.podIPs":
		return strings.Join(ec.PodIPs, ","), nil
	case "status.hostIP", "status.hostIPs":
		return ec.HostIP, nil
	}
	return "", fmt.Errorf("fieldRef %q is not supported", path)
}

// subscript parses `prefix['key']` (or double quotes) and returns key.
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"[")
	if !ok || len(rest) < 3 || rest[len(rest)-1] != ']' {
		return "", false
	}
	quoted := rest[:len(rest)-1]
	q := quoted[0]
	if (q != '\'' && q != '"') || quoted[len(quoted)-1] != q {
		return "", false
	}
	return quoted[1 : len(quoted)-1], true
}

// resourceFieldRef resolves a container's request or limit, in units of the
// divisor rounded up, as the kubelet does. A limit the spec leaves unset is
// the node's allocatable amount, and an unset request falls back to the
// limit, which is what API-server defaulting would have written into it.
func (ec Context) resourceFieldRef(r *v1.ResourceFieldSelector) (string, error) {
	c := ec.Container
	if r.ContainerName != "" && r.ContainerName != c.Name {
		other := SpecContainer(ec.Pod, r.ContainerName)
		if other == nil {
			return "", fmt.Errorf("resourceFieldRef names container %q, which is not in the pod", r.ContainerName)
		}
		c = other
	}
	kind, name, ok := strings.Cut(r.Resource, ".")
	if !ok || (kind != "limits" && kind != "requests") {
		return "", fmt.Errorf("resourceFieldRef resource %q is not supported", r.Resource)
	}
	res := v1.ResourceName(name)
	switch res {
	case v1.ResourceCPU, v1.ResourceMemory, v1.ResourceEphemeralStorage:
	default:
		if !strings.HasPrefix(name, v1.ResourceHugePagesPrefix) {
			return "", fmt.Errorf("resourceFieldRef resource %q is not supported", r.Resource)
		}
	}
	limit, hasLimit := c.Resources.Limits[res]
	if !hasLimit {
		limit = ec.Allocatable[res]
	}
	q := limit
	if kind == "requests" {
		req, ok := c.Resources.Requests[res]
		switch {
		case ok:
			q = req
		case !hasLimit:
			q = resource.Quantity{}
		}
	}
	divisor := r.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	if res == v1.ResourceCPU {
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	}
	return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
}

// SpecContainer returns the init or app container of that name, or nil.
func SpecContainer(pod *v1.Pod, name string) *v1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}
