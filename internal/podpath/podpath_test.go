package podpath

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWithin(t *testing.T) {
	for _, tt := range []struct {
		root string
		elem []string
		want string // "" when refused
	}{
		{"/var/lib/berth", []string{"pods", "3f1c0a52-8d2e-4f0b"}, "/var/lib/berth/pods/3f1c0a52-8d2e-4f0b"},
		{"/var/lib/berth/", []string{"pods", "a.b"}, "/var/lib/berth/pods/a.b"},
		{"/", []string{"x"}, "/x"},
		{"rel", []string{"x"}, "rel/x"},
		{"/var/lib/berth", []string{"pods", "../../../victim"}, ""},
		{"/var/lib/berth", []string{"pods", ".."}, ""},
		{"/var/lib/berth", []string{"pods", "."}, ""},
		{"/var/lib/berth", []string{"pods", ""}, ""},
		{"/var/lib/berth", []string{"pods", "a/b"}, ""},
		{"/var/lib/berth", []string{"pods", "a\x00b"}, ""},
		{"/var/lib/berth", []string{"pods", "a\nb"}, ""},
		{"/var/lib/berth", []string{"pods", "a\x7fb"}, ""},
		{"/var/lib/berth", []string{"pods", strings.Repeat("a", 256)}, ""},
		{"/var/lib/berth", nil, ""},
		{"", []string{"x"}, ""},
	} {
		got, err := Within(tt.root, tt.elem...)
		if tt.want == "" && err == nil {
			t.Errorf("Within(%q, %q) = %q, want an error", tt.root, tt.elem, got)
		}
		if tt.want != "" && (err != nil || got != tt.want) {
			t.Errorf("Within(%q, %q) = %q, %v, want %q", tt.root, tt.elem, got, err, tt.want)
		}
	}
}

func TestUnder(t *testing.T) {
	for _, tt := range []struct {
		root, path string
		want       bool
	}{
		{"/var/log/pods", "/var/log/pods/ns_n_u/c/0.log", true},
		{"/var/log/pods/", "/var/log/pods/x", true},
		{"/var/log/pods", "/var/log/pods", false},
		{"/var/log/pods", "/var/log/pods/", false},
		{"/var/log/pods", "/var/log/podsx/a", false},
		{"/var/log/pods", "/var/log/pods/../../../etc/shadow", false},
		{"/var/log/pods", "/var/log/pods/a/../../x", false},
		{"/var/log/pods", "var/log/pods/a", false},
		{"/", "/etc", true},
		{"/", "/", false},
		{"", "/x", false},
		{"/x", "", false},
	} {
		if got := Under(tt.root, tt.path); got != tt.want {
			t.Errorf("Under(%q, %q) = %v, want %v", tt.root, tt.path, got, tt.want)
		}
	}
}

func TestLogDir(t *testing.T) {
	for _, tt := range []struct {
		ns, name, uid string
		want          string
	}{
		{"default", "web-node1", "0123abcd", "/var/log/pods/default_web-node1_0123abcd"},
		{"default", "web-node1", "../../victim", ""},
		{"default", "web-node1", "a_b", ""},
		{"..", "web-node1", "u", ""},
		{"default", "", "u", ""},
		{"default", "a/b", "u", ""},
		{"default", "web", "", ""},
		{"default", "web", "a\nb", ""},
	} {
		got, err := LogDir("/var/log/pods", tt.ns, tt.name, tt.uid)
		if tt.want == "" && err == nil {
			t.Errorf("LogDir(%q, %q, %q) = %q, want an error", tt.ns, tt.name, tt.uid, got)
		}
		if tt.want != "" && (err != nil || got != tt.want) {
			t.Errorf("LogDir(%q, %q, %q) = %q, %v, want %q", tt.ns, tt.name, tt.uid, got, err, tt.want)
		}
	}
}

// TestMkdirAllRefusesLinks plants a symbolic link where berth would create
// a pod's subdirectory: nothing may appear in the victim directory it
// points at.
func TestMkdirAllRefusesLinks(t *testing.T) {
	base := t.TempDir()
	root, victim := filepath.Join(base, "root"), filepath.Join(base, "victim")
	if err := os.MkdirAll(filepath.Join(root, "pods", "u"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(root, "pods", "u", "volumes")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "pods", "u", "etc-hosts"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{
		filepath.Join(root, "pods", "u", "volumes", "kubernetes.io~empty-dir", "data"),
		filepath.Join(root, "pods", "u", "etc-hosts", "x"),
		filepath.Join(root, "pods", "..", "..", "victim", "x"),
		root,
	} {
		if err := MkdirAll(root, dir, 0o750); err == nil {
			t.Errorf("MkdirAll(%s) went through", dir)
		}
	}
	if entries, _ := os.ReadDir(victim); len(entries) != 0 {
		t.Errorf("victim directory has %d entries", len(entries))
	}
	ok := filepath.Join(root, "pods", "v", "containers", "c")
	if err := MkdirAll(root, ok, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := MkdirAll(root, ok, 0o750); err != nil {
		t.Fatalf("second MkdirAll: %v", err)
	}
	if fi, err := os.Stat(ok); err != nil || !fi.IsDir() {
		t.Fatalf("%s: %v", ok, err)
	}
}
