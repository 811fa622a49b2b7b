package volumes

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/podenv"
)

func TestObjectVolumePayload(t *testing.T) {
	yes := true
	mode := func(m int32) *int32 { return &m }
	objs := podenv.PodObjects{
		ConfigMaps: map[string]*v1.ConfigMap{"cm": {Data: map[string]string{"a": "1", "b": "2"}, BinaryData: map[string][]byte{"bin": {0, 1}}}},
		Secrets:    map[string]*v1.Secret{"s": {Data: map[string][]byte{"pw": []byte("x")}}},
	}
	tests := []struct {
		name    string
		vol     v1.VolumeSource
		want    string // "path:mode:data" sorted, space separated
		wantErr string
	}{
		{name: "every key with the default mode, binaryData too",
			vol:  v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, DefaultMode: mode(0o644)}},
			want: "a:-rw-r--r--:1 b:-rw-r--r--:2 bin:-rw-r--r--:\x00\x01"},
		{name: "items with their own modes and paths",
			vol: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "s", DefaultMode: mode(0o400),
				Items: []v1.KeyToPath{{Key: "pw", Path: "dir/password", Mode: mode(0o440)}, {Key: "pw", Path: "again"}}}},
			want: "again:-r--------:x dir/password:-r--r-----:x"},
		{name: "a missing object",
			vol:     v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "nope"}},
			wantErr: `secret volume "v": Secret "nope" not found`},
		{name: "an optional missing object is an empty volume",
			vol:  v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "nope", Optional: &yes}},
			want: ""},
		{name: "a missing key",
			vol:     v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Items: []v1.KeyToPath{{Key: "z", Path: "z"}}}},
			wantErr: `volume "v": ConfigMap "cm" has no key "z"`},
		{name: "an optional missing key is left out",
			vol: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}, Optional: &yes,
				Items: []v1.KeyToPath{{Key: "z", Path: "z"}, {Key: "a", Path: "a"}}}},
			want: "a:-rw-r--r--:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := objectVolumePayload(&v1.Volume{Name: "v", VolumeSource: tt.vol}, objs)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var parts []string
			for p, f := range got {
				parts = append(parts, p+":"+f.mode.String()+":"+string(f.data))
			}
			sort.Strings(parts)
			if s := strings.Join(parts, " "); s != tt.want {
				t.Errorf("payload %q, want %q", s, tt.want)
			}
		})
	}
}

// TestWriteObjectFiles checks the kubelet's atomic layout across updates:
// the visible names link through ..data into one timestamped directory,
// an unchanged payload writes nothing, a key removed loses its link, and
// what a kill left behind is cleaned up.
func TestWriteObjectFiles(t *testing.T) {
	dir := t.TempDir()
	write := func(payload map[string]objectFile, ts string) {
		t.Helper()
		if err := writeObjectFiles(dir, payload, nil, ts); err != nil {
			t.Fatal(err)
		}
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return "<" + err.Error() + ">"
		}
		return string(b)
	}
	entries := func() string {
		es, _ := os.ReadDir(dir)
		var names []string
		for _, e := range es {
			names = append(names, e.Name())
		}
		return strings.Join(names, " ")
	}
	write(map[string]objectFile{"a": {[]byte("1"), 0o644}, "sub/b": {[]byte("2"), 0o600}}, "..t1.")
	if read("a") != "1" || read("sub/b") != "2" {
		t.Fatalf("files: a=%q sub/b=%q", read("a"), read("sub/b"))
	}
	if l, _ := os.Readlink(filepath.Join(dir, "a")); l != "..data/a" {
		t.Errorf("a links to %q, want ..data/a", l)
	}
	first, _ := os.Readlink(filepath.Join(dir, "..data"))
	if !strings.HasPrefix(first, "..t1.") {
		t.Errorf("..data -> %q, want the timestamped directory", first)
	}
	if fi, err := os.Stat(filepath.Join(dir, "sub/b")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("sub/b mode %v (%v), want 0600", fi.Mode(), err)
	}

	// The same payload: nothing is rewritten.
	write(map[string]objectFile{"a": {[]byte("1"), 0o644}, "sub/b": {[]byte("2"), 0o600}}, "..t2.")
	if cur, _ := os.Readlink(filepath.Join(dir, "..data")); cur != first {
		t.Errorf("an unchanged payload was rewritten: ..data -> %q", cur)
	}

	// A kill left a half-made update behind; then a new payload without sub.
	if err := os.Mkdir(filepath.Join(dir, "..t2.stale"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("..t2.stale", filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	write(map[string]objectFile{"a": {[]byte("new"), 0o644}}, "..t3.")
	if read("a") != "new" {
		t.Errorf("a = %q after the update", read("a"))
	}
	cur, _ := os.Readlink(filepath.Join(dir, "..data"))
	if want := "..data " + cur + " a"; entries() != want {
		t.Errorf("entries %q, want %q: old data, the stale update and the link of the removed key gone", entries(), want)
	}

	// A mode change alone is an update.
	write(map[string]objectFile{"a": {[]byte("new"), 0o600}}, "..t4.")
	if fi, err := os.Stat(filepath.Join(dir, "a")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("a mode %v (%v) after a mode change, want 0600", fi.Mode(), err)
	}

	if err := writeObjectFiles(dir, map[string]objectFile{"../x": {}}, nil, "..t5."); err == nil {
		t.Errorf("a path leaving the volume was written")
	}
}
