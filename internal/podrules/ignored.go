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

// ignoredFields are the registry's Ignored entries (fields.go) with what
// IgnoredFields says of each, sorted so warnings come out in a stable
// order.
var ignoredFields = func() []string {
	var out []string
	for path, e := range podFields {
		if e.support == Ignored {
			out = append(out, path)
		}
	}
	sort.Strings(out)
	return out
}()

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
	for _, path := range ignoredFields {
		msg := ignoredMessage(podFields[path].note)
		for _, p := range expandPath(path) {
			for _, f := range setFields(root, strings.Split(p, "."), "") {
				if !asBerthDoes(pod, f) {
					out = append(out, Warning{Field: f, Message: msg})
				}
			}
		}
	}
	return out
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

// expandPath gives a container field's path for init containers too.
func expandPath(path string) []string {
	if rest, ok := strings.CutPrefix(path, "spec.containers[*]."); ok {
		return []string{"spec.initContainers[*]." + rest, path}
	}
	return []string{path}
}

// setFields walks v along the JSON names of segs ("name" or "name[*]"),
// returning the concrete paths (with indexes) of the non-zero values at
// the end. at is the path walked so far.
func setFields(v reflect.Value, segs []string, at string) []string {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	if len(segs) == 0 {
		if v.IsZero() || (v.Kind() == reflect.Slice || v.Kind() == reflect.Map) && v.Len() == 0 {
			return nil
		}
		return []string{at}
	}
	name, each := strings.CutSuffix(segs[0], "[*]")
	f, ok := jsonField(v, name)
	if !ok {
		return nil
	}
	at = strings.TrimPrefix(at+"."+name, ".")
	if !each {
		return setFields(f, segs[1:], at)
	}
	var out []string
	for i := 0; i < f.Len(); i++ {
		out = append(out, setFields(f.Index(i), segs[1:], at+"["+strconv.Itoa(i)+"]")...)
	}
	return out
}

// jsonField is the field of struct v whose JSON name is name.
func jsonField(v reflect.Value, name string) (reflect.Value, bool) {
	if v.Kind() != reflect.Struct {
		return reflect.Value{}, false
	}
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if tag == name {
			return v.Field(i), true
		}
		if t.Field(i).Anonymous && tag == "" {
			if f, ok := jsonField(v.Field(i), name); ok {
				return f, true
			}
		}
	}
	return reflect.Value{}, false
}
