package podrules

import (
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

const (
	fieldsPage  = "../../docs/pod-fields.md"
	fieldsBegin = "<!-- BEGIN GENERATED: pod fields. Edit internal/podrules/fields.go, then: UPDATE_GOLDEN=1 go test ./internal/podrules -run TestPodFieldsPage -->"
	fieldsEnd   = "<!-- END GENERATED: pod fields -->"
)

// registryStructs are the API types whose every field the registry
// classifies, with the path of their fields.
var registryStructs = []struct {
	prefix string
	typ    any
}{
	{"spec.", v1.PodSpec{}},
	{"spec.containers[*].", v1.Container{}},
	{"spec.containers[*].env[*].valueFrom.", v1.EnvVarSource{}},
	{"spec.containers[*].lifecycle.", v1.Lifecycle{}},
	{"spec.containers[*].volumeMounts[*].", v1.VolumeMount{}},
	{"spec.containers[*].securityContext.", v1.SecurityContext{}},
	{"spec.securityContext.", v1.PodSecurityContext{}},
	{"spec.volumes[*].", v1.VolumeSource{}},
}

// TestFieldRegistryComplete walks the API types: a field k8s.io/api gains
// fails this test until fields.go says what berth does with it, and an
// entry for a field that no longer exists fails it too.
func TestFieldRegistryComplete(t *testing.T) {
	seen := map[string]bool{}
	for _, s := range registryStructs {
		typ := reflect.TypeOf(s.typ)
		for i := range typ.NumField() {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			path := s.prefix + name
			seen[path] = true
			e, ok := podFields[path]
			if !ok {
				t.Errorf("%s (%s.%s) is not in the field registry (manifest/fields.go)", path, typ.Name(), typ.Field(i).Name)
				continue
			}
			if e.support != Honoured && e.note == "" {
				t.Errorf("%s is %s without a reason", path, e.support)
			}
		}
	}
	var stale []string
	for path := range podFields {
		if !seen[path] {
			stale = append(stale, path)
		}
	}
	sort.Strings(stale)
	if len(stale) > 0 {
		t.Errorf("registry entries for no field of the API: %v", stale)
	}
}

// TestRegistryMatchesStandalone: the volume types Parse accepts are the
// ones the registry honours, and a rejected one is refused.
func TestRegistryMatchesStandalone(t *testing.T) {
	for path, e := range podFields {
		name, ok := strings.CutPrefix(path, "spec.volumes[*].")
		if !ok {
			continue
		}
		if supportedVolumes[name] != (e.support == Honoured) {
			t.Errorf("volume type %s: supported %v, registry %s", name, supportedVolumes[name], e.support)
		}
	}
	pod := &v1.Pod{Spec: v1.PodSpec{
		Containers: []v1.Container{{Name: "app", Image: "busybox"}},
		Volumes:    []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{NFS: &v1.NFSVolumeSource{Server: "nas", Path: "/x"}}}},
	}}
	if errs := CheckStandalone(pod); len(errs) != 1 || errs[0].Field != "spec.volumes[0].nfs" {
		t.Errorf("an nfs volume: errors %v; want it refused", errs)
	}
}

// TestPodFieldsPage keeps docs/pod-fields.md's table of pod fields equal
// to the registry.
func TestPodFieldsPage(t *testing.T) {
	readme, err := os.ReadFile(fieldsPage)
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	begin := strings.Index(text, fieldsBegin)
	end := strings.Index(text, fieldsEnd)
	if begin < 0 || end < begin {
		t.Fatalf("%s lacks the markers %q ... %q", fieldsPage, fieldsBegin, fieldsEnd)
	}
	generated := FieldsTable()
	if text[begin+len(fieldsBegin):end] == generated {
		return
	}
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		text = text[:begin+len(fieldsBegin)] + generated + text[end:]
		if err := os.WriteFile(fieldsPage, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Errorf("%s's table of pod fields is out of date; regenerate it with\n  UPDATE_GOLDEN=1 go test ./internal/podrules -run TestPodFieldsPage", fieldsPage)
}
