package podrules

import (
	"reflect"
	"sort"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Warning is a field of a pod that berth accepts and does nothing with.
type Warning struct {
	// Field is the path of the set field, as in the manifest.
	Field string
	// Message says why it has no effect, starting "ignored: ".
	Message string
}

// ignoredPath is a registry path of an Ignored field, resolved against
// the API types once, so that checking a pod walks struct fields by index
// and builds a path string only for a field that is set.
type ignoredPath struct {
	steps   []pathStep
	message string
}

// pathStep is one segment of an ignoredPath: the struct field (index for
// reflect.Value.FieldByIndex, through inlined structs) and whether it is
// a list whose every item goes on.
type pathStep struct {
	name  string
	index []int
	each  bool
}

// ignoredPaths are the registry's Ignored entries (fields.go), container
// fields for init and app containers alike, sorted so warnings come out
// in a stable order.
var ignoredPaths = func() []ignoredPath {
	var paths []string
	for path, e := range podFields {
		if e.support != Ignored {
			continue
		}
		paths = append(paths, path)
		if rest, ok := strings.CutPrefix(path, "spec.containers[*]."); ok {
			paths = append(paths, "spec.initContainers[*]."+rest)
		}
	}
	sort.Strings(paths)
	out := make([]ignoredPath, 0, len(paths))
	for _, path := range paths {
		entry := podFields[path]
		if rest, ok := strings.CutPrefix(path, "spec.initContainers[*]."); ok {
			entry = podFields["spec.containers[*]."+rest]
		}
		out = append(out, ignoredPath{steps: resolvePath(reflect.TypeOf(v1.Pod{}), path), message: ignoredMessage(entry.note)})
	}
	return out
}()

// resolvePath turns a registry path into the struct fields it names from
// t. A path the API types do not have panics at start: the registry test
// (TestFieldRegistryComplete) keeps them in step.
func resolvePath(t reflect.Type, path string) []pathStep {
	var steps []pathStep
	for _, seg := range strings.Split(path, ".") {
		name, each := strings.CutSuffix(seg, "[*]")
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		f, ok := jsonField(t, name)
		if !ok {
			panic("podrules: the registry path " + path + " is not a field of " + t.String())
		}
		steps = append(steps, pathStep{name: name, index: f.Index, each: each})
		t = f.Type
		if each {
			t = t.Elem()
		}
	}
	return steps
}

// jsonField is the field of struct t whose JSON name is name, looking
// into inlined structs.
func jsonField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if tag == name {
			return f, true
		}
		if f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct {
			if inner, ok := jsonField(f.Type, name); ok {
				inner.Index = append([]int{i}, inner.Index...)
				return inner, true
			}
		}
	}
	return reflect.StructField{}, false
}

// IgnoredFields lists the fields the registry calls Ignored that the pod
// sets, so users learn that berth accepts and ignores them. It must see
// the pod as decoded, before Default: a field the API defaults (such as
// schedulerName) is set by berth, not by the user. Values that ask for
// what berth does anyway (spec.os.name linux, enableServiceLinks false)
// are not reported. Container fields are reported for init and app
// containers alike.
func IgnoredFields(pod *v1.Pod) []Warning {
	var out []Warning
	root := reflect.ValueOf(pod).Elem()
	for _, ip := range ignoredPaths {
		ip.walk(root, 0, nil, func(f string) {
			if !asBerthDoes(pod, f) {
				out = append(out, Warning{Field: f, Message: ip.message})
			}
		})
	}
	return out
}

// walk follows the steps from v, with the list indexes taken so far, and
// calls found with the path of each set value at the end.
func (ip ignoredPath) walk(v reflect.Value, i int, indexes []int, found func(string)) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	if i == len(ip.steps) {
		if v.IsZero() || (v.Kind() == reflect.Slice || v.Kind() == reflect.Map) && v.Len() == 0 {
			return
		}
		found(ip.path(indexes))
		return
	}
	f := v.FieldByIndex(ip.steps[i].index)
	if !ip.steps[i].each {
		ip.walk(f, i+1, indexes, found)
		return
	}
	for j := 0; j < f.Len(); j++ {
		ip.walk(f.Index(j), i+1, append(indexes, j), found)
	}
}

// path is the field path with the list indexes taken.
func (ip ignoredPath) path(indexes []int) string {
	var b strings.Builder
	for _, st := range ip.steps {
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(st.name)
		if st.each {
			b.WriteString("[" + strconv.Itoa(indexes[0]) + "]")
			indexes = indexes[1:]
		}
	}
	return b.String()
}

// ignoredMessage words a warning by the class of the registry's note.
func ignoredMessage(note string) string {
	note = strings.ReplaceAll(note, "`", "")
	switch {
	case strings.HasPrefix(note, "no scheduler"):
		return "ignored: berth runs the pod on this node without scheduling"
	case note == "not applied yet":
		return "ignored: berth does not apply it yet"
	case note == "Linux only":
		return "ignored: berth runs Linux pods only"
	}
	return "ignored: " + note
}

// asBerthDoes reports whether a set ignored field asks for what berth
// does anyway.
func asBerthDoes(pod *v1.Pod, f string) bool {
	switch f {
	case "spec.os":
		return pod.Spec.OS != nil && pod.Spec.OS.Name == v1.Linux
	case "spec.enableServiceLinks":
		return pod.Spec.EnableServiceLinks != nil && !*pod.Spec.EnableServiceLinks
	}
	return false
}
