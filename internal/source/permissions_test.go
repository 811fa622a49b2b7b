package source

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podspec/podspectest"
	"github.com/berth-agent/berth/internal/store"
)

const nobody = 65534

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func chown(t *testing.T, path string, uid int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files away")
	}
	if err := os.Lchown(path, uid, -1); err != nil {
		t.Fatal(err)
	}
}

// TestCheckManifestPermissions walks the rules: who may own and write a
// manifest, its directory, and the directories above it.
func TestCheckManifestPermissions(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, top, dir, file string)
		want  string // substring of the refusal; "" accepts
	}{
		{"root 0755 dir, 0644 file", func(t *testing.T, top, dir, file string) {}, ""},
		{"0600 file", func(t *testing.T, top, dir, file string) { chmod(t, file, 0o600) }, ""},
		{"group-writable file", func(t *testing.T, top, dir, file string) { chmod(t, file, 0o664) }, "mode 0664, writable by group or others"},
		{"world-writable file", func(t *testing.T, top, dir, file string) { chmod(t, file, 0o666) }, "mode 0666"},
		{"file owned by nobody", func(t *testing.T, top, dir, file string) { chown(t, file, nobody) }, "owned by uid 65534"},
		{"world-writable dir", func(t *testing.T, top, dir, file string) { chmod(t, dir, 0o777) }, "manifest directory " + "DIR is mode 0777"},
		{"sticky world-writable dir", func(t *testing.T, top, dir, file string) { chmod(t, dir, os.ModeSticky|0o777) }, "is mode 1777"},
		{"group-writable dir", func(t *testing.T, top, dir, file string) { chmod(t, dir, 0o775) }, "is mode 0775"},
		{"dir owned by nobody", func(t *testing.T, top, dir, file string) { chown(t, dir, nobody) }, "owned by uid 65534"},
		{"world-writable parent", func(t *testing.T, top, dir, file string) { chmod(t, top, 0o777) }, "above the manifests is mode 0777"},
		{"sticky root-owned parent, like /tmp", func(t *testing.T, top, dir, file string) { chmod(t, top, os.ModeSticky|0o777) }, ""},
		{"sticky parent owned by nobody", func(t *testing.T, top, dir, file string) {
			chmod(t, top, os.ModeSticky|0o777)
			chown(t, top, nobody)
		}, "owned by uid 65534"},
		{"symlinked dir into a world-writable one", func(t *testing.T, top, dir, file string) {
			real := filepath.Join(top, "real")
			if err := os.Mkdir(real, 0o755); err != nil {
				t.Fatal(err)
			}
			chmod(t, real, 0o777)
			write(t, filepath.Join(real, "b.yaml"), podspectest.Manifest("b", "img:1"))
			os.Remove(file)
			if err := os.Symlink(filepath.Join(real, "b.yaml"), file); err != nil {
				t.Fatal(err)
			}
		}, "real is mode 0777"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			top := filepath.Join(t.TempDir(), "top")
			dir := filepath.Join(top, "manifests")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			chmod(t, top, 0o755)
			file := filepath.Join(dir, "a.yaml")
			write(t, file, podspectest.Manifest("a", "img:1"))
			chmod(t, file, 0o644)
			tt.setup(t, top, dir, file)
			err := checkManifestDir(dir)
			if err == nil {
				var m openedManifest
				if m, err = readManifestFile(file, podspec.DefaultMaxBytes); err == nil {
					err = m.perm
				}
			}
			want := strings.ReplaceAll(tt.want, "DIR", dir)
			switch {
			case want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case want != "" && (err == nil || !strings.Contains(err.Error(), want) || !isPermissionError(err)):
				t.Errorf("err %v, want a permission refusal with %q", err, want)
			}
		})
	}
}

// TestFileSourcePermissions checks what the file source does with
// manifests others may write: a new one never starts; a running one made
// writable keeps its last good version (as after a broken edit, so a chmod
// is no outage) with the problem shown; a directory made writable freezes
// the source as it was, so files removed or renamed there stop nothing;
// warn mode reads them all.
func TestFileSourcePermissions(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give files away")
	}
	dir := t.TempDir()
	a := filepath.Join(dir, "a.yaml")
	write(t, a, podspectest.Manifest("a", "img:1"))
	st := watchedSource(t, Config{ManifestPath: dir})
	if got := next(t, st); got != "ADD a-node1 img:1" {
		t.Fatalf("initial: %q", got)
	}

	evil := filepath.Join(dir, "evil.yaml")
	write(t, evil, podspectest.Manifest("evil", "img:1"))
	chown(t, evil, nobody)
	eventually(t, "evil.yaml refused", func() bool { return problemsOf(st) == "ManifestPermissions evil.yaml " })
	quiet(t, st)

	chmod(t, a, 0o666)
	eventually(t, "a.yaml refused", func() bool { return strings.Contains(problemsOf(st), "ManifestPermissions a.yaml") })
	quiet(t, st) // a keeps running
	if ps := st.Problems(); !strings.Contains(ps[0].Message, "keep running") {
		t.Errorf("problem %q does not say the pods keep running", ps[0].Message)
	}
	chmod(t, a, 0o644)
	eventually(t, "a.yaml accepted again", func() bool { return problemsOf(st) == "ManifestPermissions evil.yaml " })
	quiet(t, st)

	chmod(t, dir, 0o777)
	eventually(t, "the directory refused", func() bool {
		return strings.Contains(problemsOf(st), "ManifestPermissions "+filepath.Base(dir))
	})
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "b.yaml"), podspectest.Manifest("b", "img:1"))
	quiet(t, st)
	chmod(t, dir, 0o755)
	if got := next(t, st); got != "REMOVE a-node1 img:1" {
		t.Fatalf("directory fixed: %q", got)
	}
	if got := next(t, st); got != "ADD b-node1 img:1" {
		t.Fatalf("directory fixed: %q", got)
	}
}

// TestFileSourcePermissionsWarn checks --manifest-permissions=warn reads
// what strict refuses, and says so in the log.
func TestFileSourcePermissionsWarn(t *testing.T) {
	dir := t.TempDir()
	chmod(t, dir, 0o777)
	write(t, filepath.Join(dir, "a.yaml"), podspectest.Manifest("a", "img:1"))
	chmod(t, filepath.Join(dir, "a.yaml"), 0o666)
	var logs strings.Builder
	cfg := Config{NodeName: podspectest.Node, ManifestPath: dir, Permissions: PermissionsWarn}
	st := store.New(cfg.SourceNames()...)
	fs := newFileSource(cfg, st)
	fs.watch = false
	fs.log = slog.New(slog.NewTextHandler(&logs, nil))
	fs.rescan(true)
	fs.rescan(true)
	if len(fs.files) != 1 || len(fs.files[filepath.Join(dir, "a.yaml")].res.Pods) != 1 {
		t.Fatalf("warn mode refused the pod: %+v", fs.files)
	}
	if n := strings.Count(logs.String(), "read anyway"); n != 2 {
		t.Errorf("%d warnings, want 2 (directory and file, each once):\n%s", n, logs.String())
	}
}

// TestCheckSecretFile: a manifest holding a Secret must be readable by its
// owner only; the refusal names the file and the fix.
func TestCheckSecretFile(t *testing.T) {
	tests := []struct {
		mode os.FileMode
		want string // substring of the refusal; "" accepts
	}{
		{0o600, ""},
		{0o400, ""},
		{0o700, ""},
		{0o640, "holds a Secret and is mode 0640, readable by group or others"},
		{0o604, "mode 0604"},
		{0o644, "it must be readable by its owner only (chmod 600 FILE, or --manifest-permissions=warn)"},
	}
	file := filepath.Join(t.TempDir(), "s.yaml")
	write(t, file, podspectest.Secret)
	for _, tt := range tests {
		chmod(t, file, tt.mode)
		info, err := os.Stat(file)
		if err != nil {
			t.Fatal(err)
		}
		err = checkSecretFile(file, info)
		want := strings.ReplaceAll(tt.want, "FILE", file)
		switch {
		case want == "" && err != nil:
			t.Errorf("%04o refused: %v", tt.mode, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want) || !isPermissionError(err)):
			t.Errorf("%04o: err %v, want a permission refusal with %q", tt.mode, err, want)
		}
	}
}

// TestFileSourceSecretPermissions: under strict, a manifest holding a
// Secret that group or others may read is refused: a new one yields
// nothing, one made readable keeps what it yielded before (as after a
// broken edit) with the problem shown, and the fix brings it back. A
// readable manifest without a Secret is read as before. Under warn it is
// read, and logged once.
func TestFileSourceSecretPermissions(t *testing.T) {
	dir := t.TempDir()
	withSecret, podOnly := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	write(t, withSecret, podspectest.Manifest("a", "img:1")+"---\n"+podspectest.Secret)
	chmod(t, withSecret, 0o600)
	write(t, podOnly, podspectest.Manifest("b", "img:1"))
	var logs strings.Builder
	source := func(perms Permissions) *fileSource {
		cfg := Config{NodeName: podspectest.Node, ManifestPath: dir, Permissions: perms}
		fs := newFileSource(cfg, store.New(cfg.SourceNames()...))
		fs.watch = false
		fs.log = slog.New(slog.NewTextHandler(&logs, nil))
		return fs
	}
	state := func(fs *fileSource, p string) string {
		res := fs.files[p].res
		out := fmt.Sprintf("%d pods %d objects", len(res.Pods), len(res.Objects))
		for _, pr := range res.Problems {
			out += "; " + pr.Reason + ": " + pr.Message
		}
		return out
	}
	fs := source(PermissionsStrict)
	fs.rescan(true)
	if got := state(fs, withSecret); got != "1 pods 1 objects" {
		t.Fatalf("0600: %s", got)
	}

	chmod(t, withSecret, 0o644)
	fs.rescan(false) // only the mode changed
	refused := "ManifestPermissions: manifest " + withSecret + " holds a Secret and is mode 0644"
	if got := state(fs, withSecret); !strings.HasPrefix(got, "1 pods 1 objects; "+refused) ||
		!strings.Contains(got, "chmod 600 "+withSecret) || !strings.Contains(got, "keep running") {
		t.Errorf("made readable: %s\nwant the last good pod and Secret kept, and %q", got, refused)
	}
	if got := state(fs, podOnly); got != "1 pods 0 objects" {
		t.Errorf("a readable manifest without a Secret: %s", got)
	}

	fresh := filepath.Join(dir, "c.yaml")
	write(t, fresh, podspectest.Manifest("c", "img:1")+"---\n"+strings.Replace(podspectest.Secret, "name: db", "name: c", 1))
	fs.rescan(false)
	if got := state(fs, fresh); !strings.HasPrefix(got, "0 pods 0 objects; ManifestPermissions: manifest "+fresh+" holds a Secret") {
		t.Errorf("a new readable manifest with a Secret: %s", got)
	}

	chmod(t, withSecret, 0o600)
	fs.rescan(false)
	if got := state(fs, withSecret); got != "1 pods 1 objects" {
		t.Errorf("fixed: %s", got)
	}

	chmod(t, withSecret, 0o644)
	logs.Reset()
	warn := source(PermissionsWarn)
	warn.rescan(true)
	warn.rescan(true)
	if got := state(warn, withSecret); got != "1 pods 1 objects" {
		t.Errorf("warn: %s", got)
	}
	if n := strings.Count(logs.String(), "holding a Secret others may read used anyway"); n != 2 {
		t.Errorf("%d warnings, want 2 (a.yaml and c.yaml, each once):\n%s", n, logs.String())
	}
}

// TestCheckManifestPath checks the exported rule berth doctor reports: a
// directory and a single manifest file, each with what refuses it, and a
// path that does not exist.
func TestCheckManifestPath(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(t *testing.T, dir, file string) string // returns the path checked
		want     string                                      // substring of the refusal; "" accepts
		notExist bool
	}{
		{"directory", func(t *testing.T, dir, file string) string { return dir }, "", false},
		{"group-writable directory", func(t *testing.T, dir, file string) string { chmod(t, dir, 0o775); return dir }, "is mode 0775", false},
		{"single file", func(t *testing.T, dir, file string) string { return file }, "", false},
		{"world-writable single file", func(t *testing.T, dir, file string) string { chmod(t, file, 0o666); return file }, "mode 0666", false},
		{"single file in a world-writable directory", func(t *testing.T, dir, file string) string { chmod(t, dir, 0o777); return file }, "is mode 0777", false},
		{"missing directory", func(t *testing.T, dir, file string) string { return filepath.Join(dir, "none") }, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "manifests")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			chmod(t, dir, 0o755)
			file := filepath.Join(dir, "a.yaml")
			write(t, file, podspectest.Manifest("a", "img:1"))
			chmod(t, file, 0o644)
			err := CheckManifestPath(tt.setup(t, dir, file))
			switch {
			case tt.notExist:
				if !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("err %v, want one wrapping fs.ErrNotExist", err)
				}
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || !isPermissionError(err)):
				t.Errorf("err %v, want a permission refusal with %q", err, tt.want)
			}
		})
	}
}
