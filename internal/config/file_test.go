package config

import (
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

const versioned = "apiVersion: berth.io/v1alpha1\nkind: BerthConfiguration\n"

// TestConfigFileErrors: every kind of problem of a config file, each as
// FILE:LINE: field: message, all of them at once.
func TestConfigFileErrors(t *testing.T) {
	tests := []struct {
		name string
		body string
		want []string // each a line of the error, after the file's path
	}{
		{"unknown field with a suggestion", versioned + "staticPodPth: /x\n", []string{":3: staticPodPth: unknown field (did you mean staticPodPath?)"}},
		{"unknown field with nothing close", versioned + "colour: blue\n", []string{":3: colour: unknown field"}},
		{"integer given a string", versioned + "maxPods: many\n", []string{`:3: maxPods: must be an integer, got string "many"`}},
		{"integer given a number", versioned + "maxPods: 1.5\n", []string{`:3: maxPods: must be an integer, got number "1.5"`}},
		{"string given a list", versioned + "staticPodPath: [a]\n", []string{":3: staticPodPath: must be a string, got a list"}},
		{"duration", versioned + "syncFrequency: soon\n", []string{`:3: syncFrequency: must be a duration such as 20s or 1m30s, got "soon"`}},
		{"duration given a mapping", versioned + "syncFrequency: {a: 1}\n", []string{":3: syncFrequency: must be a duration such as 20s or 1m30s, got a mapping"}},
		{"list item", versioned + "clusterDNS:\n- 10.0.0.1\n- {a: b}\n", []string{":5: clusterDNS[1]: must be a string, got a mapping"}},
		{"list given a string", versioned + "clusterDNS: 10.0.0.1\n", []string{`:3: clusterDNS: must be a list, got string "10.0.0.1"`}},
		{"header value", versioned + "staticPodURLHeader:\n  Authorization: Bearer x\n", []string{`:4: staticPodURLHeader.Authorization: must be a list, got string "Bearer x"`}},
		{"label value", versioned + "labels:\n  site: [a]\n", []string{":4: labels.site: must be a string, got a list"}},
		{"taint part", versioned + "kubeconfig: /k\nregisterWithTaints:\n- key: a\n  efect: NoSchedule\n", []string{`:6: registerWithTaints[0]: unknown field "efect"`}},
		{"taint given a string", versioned + "kubeconfig: /k\nregisterWithTaints:\n- a=b:NoSchedule\n", []string{`:5: registerWithTaints[0]: must be a mapping, got string "a=b:NoSchedule"`}},
		{"twice", versioned + "maxPods: 1\nmaxPods: 2\n", []string{":4: maxPods: given twice (first on line 3)"}},
		{"old and new name", versioned + "crashLoopBackoffMax: 1m\ncrashLoopBackOffMax: 2m\n", []string{":4: crashLoopBackOffMax: sets crashLoopBackOffMax, which line 3 sets too: keep only crashLoopBackOffMax"}},
		{"wrong apiVersion", "apiVersion: berth.io/v1\nkind: BerthConfiguration\n", []string{`:1: apiVersion: want berth.io/v1alpha1 (kind BerthConfiguration), got "berth.io/v1"`}},
		{"apiVersion without kind", "apiVersion: berth.io/v1alpha1\nmaxPods: 3\n", []string{":1: kind: missing: want BerthConfiguration"}},
		{"foreign kind", "apiVersion: v1\nkind: Pod\n", []string{`:2: kind: want BerthConfiguration (or a kubelet's KubeletConfiguration), got "Pod"`}},
		{"not a mapping", "- a\n", []string{":1: must be a mapping of settings (a BerthConfiguration), got a list"}},
		{"two documents", versioned + "maxPods: 3\n---\nmaxPods: 4\n", []string{":4: a config file is one document: remove this second one"}},
		{"an empty document after it is fine, a bad value is not", versioned + "maxPods: x\n---\n", []string{`:3: maxPods: must be an integer, got string "x"`}},
		{"syntax", versioned + "maxPods: [1\n", []string{":3: did not find expected ',' or ']'"}},
		{"every problem at once", versioned + "maxPods: many\nstaticPodPth: /x\nsyncFrequency: 1\n", []string{
			`:3: maxPods: must be an integer, got string "many"`,
			":4: staticPodPth: unknown field (did you mean staticPodPath?)",
			`:5: syncFrequency: must be a duration such as 20s or 1m30s, got "1"`,
		}},
		{"decoding and validation problems at once", versioned + "maxPods: many\nlogFormat: xml\n", []string{
			`:3: maxPods: must be an integer, got string "many"`,
			`:4: logFormat: log format "xml": must be one of text, json, journald`,
		}},
		{"validation with the file's line", versioned + "staticPodPath: /x\nmaxPods: 0\n", []string{":4: maxPods: must be positive, got 0"}},
		{"validation in words of the file", versioned + "containerLogMaxFiles: 1\nstaticPodURLCA: /ca.pem\n", []string{
			":3: containerLogMaxFiles: must be at least 2, got 1",
			":4: staticPodURLCA: needs an https:// --manifest-url",
		}},
		{"socket group unknown", versioned + "socketGroup: no-such-group-berth\n", []string{":3: socketGroup: group: unknown group no-such-group-berth"}},
		{"log format", versioned + "logFormat: xml\n", []string{`:3: logFormat: log format "xml": must be one of text, json, journald`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.body)
			_, _, err := Parse([]string{"--config", path}, io.Discard)
			if err == nil {
				t.Fatal("no error")
			}
			var want []string
			for _, w := range tt.want {
				want = append(want, path+w)
			}
			if got := strings.Split(err.Error(), "\n"); !reflect.DeepEqual(got, want) {
				t.Errorf("errors\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

// TestConfigFileRenames: each older field name is read into the same
// setting as its new name, with a warning naming the file, the line and
// the new name; an unversioned file is read with a warning too.
func TestConfigFileRenames(t *testing.T) {
	values := map[string]string{
		"podManifestAllowedSigners": "/etc/berth/signers",
		"manifestPermissions":       "warn",
		"manifestURLCA":             "/etc/berth/ca.pem",
		"manifestURLAllowedSigners": "/etc/berth/signers",
		"httpCheckBackoffMax":       "7m",
		"crashLoopBackoffInitial":   "3s",
		"crashLoopBackoffMax":       "7m",
	}
	if !reflect.DeepEqual(slices.Sorted(maps.Keys(values)), slices.Sorted(maps.Keys(renamedKeys))) {
		t.Fatalf("the test covers %v, the renames are %v", slices.Sorted(maps.Keys(values)), slices.Sorted(maps.Keys(renamedKeys)))
	}
	const base = "staticPodURL: https://h/p\n"
	for old, value := range values {
		t.Run(old, func(t *testing.T) {
			oldPath := writeConfig(t, versioned+base+old+": "+value+"\n")
			fromOld := Defaults()
			warnings, err := LoadConfigFile(oldPath, &fromOld)
			if err != nil {
				t.Fatal(err)
			}
			want := oldPath + ":4: " + old + " is deprecated: rename it " + renamedKeys[old]
			if !reflect.DeepEqual(warnings, []string{want}) {
				t.Errorf("warnings %q, want %q", warnings, want)
			}
			fromNew := Defaults()
			warnings, err = LoadConfigFile(writeConfig(t, versioned+base+renamedKeys[old]+": "+value+"\n"), &fromNew)
			if err != nil {
				t.Fatal(err)
			}
			if len(warnings) != 0 {
				t.Errorf("the new name warns: %q", warnings)
			}
			if !reflect.DeepEqual(fromOld, fromNew) || reflect.DeepEqual(fromNew, func() Settings { s := Defaults(); s.ManifestURL = "https://h/p"; return s }()) {
				t.Errorf("%s and %s read differently, or set nothing:\n%+v\n%+v", old, renamedKeys[old], fromOld, fromNew)
			}
		})
	}
	t.Run("unversioned", func(t *testing.T) {
		for _, body := range []string{"maxPods: 3\n", "kind: BerthConfiguration\nmaxPods: 3\n"} {
			path := writeConfig(t, body)
			s := Defaults()
			warnings, err := LoadConfigFile(path, &s)
			if err != nil || s.MaxPods != 3 {
				t.Fatalf("%q: maxPods %d, %v", body, s.MaxPods, err)
			}
			if len(warnings) != 1 || !strings.HasPrefix(warnings[0], path) || !strings.Contains(warnings[0], "without apiVersion is deprecated") {
				t.Errorf("%q: warnings %q", body, warnings)
			}
		}
	})
}

// TestEveryFieldDecodes: every config file field reads from a file and
// marshals back to the same settings, so no field has a type decodeValue
// cannot read.
func TestEveryFieldDecodes(t *testing.T) {
	s := fullSettingsForKeys()
	s.ManifestURL, s.StatusURL = "https://h/p", "https://h/s"
	s.SyncFrequency.Duration = 90 * time.Second
	out, err := s.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	got := Settings{}
	if _, err := LoadConfigFile(writeConfig(t, string(out)), &got); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !reflect.DeepEqual(got, s) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, s)
	}
}

// TestFlagKeys: every flag but --config maps to its config file field.
func TestFlagKeys(t *testing.T) {
	keys := flagKeys()
	for flag, key := range map[string]string{"max-pods": "maxPods", "manifest-url-header": "staticPodURLHeader", "crashloop-backoff-max": "crashLoopBackOffMax", "cluster-dns": "clusterDNS", "shutdown-grace-period": "shutdownGracePeriod"} {
		if keys[flag] != key {
			t.Errorf("--%s maps to %q, want %q", flag, keys[flag], key)
		}
	}
	if len(keys) != len(settingFields())-1 { // labels has no flag
		t.Errorf("%d flags map to fields, want %d", len(keys), len(settingFields())-1)
	}
}

// TestRedacted: config view hides header values and URL credentials.
func TestRedacted(t *testing.T) {
	s := Defaults()
	s.ManifestURL = "https://user:pw@h/p?token=s3cret"
	s.ManifestURLHeader = map[string][]string{"Authorization": {"Bearer s3cret"}}
	s.StatusURL = "https://h/s?k=s3cret"
	s.StatusURLHeader = map[string][]string{"X-Key": {"s3cret", "other"}}
	out, err := s.Redacted().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "s3cret") || strings.Contains(string(out), ":pw@") {
		t.Errorf("secret printed:\n%s", out)
	}
	for _, want := range []string{"apiVersion: berth.io/v1alpha1\n", "kind: BerthConfiguration\n", "Authorization:\n  - REDACTED\n", "token=REDACTED"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
	if s.ManifestURLHeader["Authorization"][0] != "Bearer s3cret" {
		t.Error("Redacted changed the settings it was called on")
	}
}
