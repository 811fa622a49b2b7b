package manifest

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
			write(t, filepath.Join(real, "b.yaml"), podManifest("b", "img:1"))
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
			write(t, file, podManifest("a", "img:1"))
			chmod(t, file, 0o644)
			tt.setup(t, top, dir, file)
			err := checkManifestDir(dir)
			if err == nil {
				var m openedManifest
				if m, err = readManifestFile(file, DefaultMaxBytes); err == nil {
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
	write(t, a, podManifest("a", "img:1"))
	store := watchedSource(t, SourceConfig{ManifestPath: dir})
	if got := next(t, store); got != "ADD a-node1 img:1" {
		t.Fatalf("initial: %q", got)
	}

	evil := filepath.Join(dir, "evil.yaml")
	write(t, evil, podManifest("evil", "img:1"))
	chown(t, evil, nobody)
	eventually(t, "evil.yaml refused", func() bool { return problemsOf(store) == "ManifestPermissions evil.yaml " })
	quiet(t, store)

	chmod(t, a, 0o666)
	eventually(t, "a.yaml refused", func() bool { return strings.Contains(problemsOf(store), "ManifestPermissions a.yaml") })
	quiet(t, store) // a keeps running
	if ps := store.Problems(); !strings.Contains(ps[0].Message, "keep running") {
		t.Errorf("problem %q does not say the pods keep running", ps[0].Message)
	}
	chmod(t, a, 0o644)
	eventually(t, "a.yaml accepted again", func() bool { return problemsOf(store) == "ManifestPermissions evil.yaml " })
	quiet(t, store)

	chmod(t, dir, 0o777)
	eventually(t, "the directory refused", func() bool {
		return strings.Contains(problemsOf(store), "ManifestPermissions "+filepath.Base(dir))
	})
	if err := os.Remove(a); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "b.yaml"), podManifest("b", "img:1"))
	quiet(t, store)
	chmod(t, dir, 0o755)
	if got := next(t, store); got != "REMOVE a-node1 img:1" {
		t.Fatalf("directory fixed: %q", got)
	}
	if got := next(t, store); got != "ADD b-node1 img:1" {
		t.Fatalf("directory fixed: %q", got)
	}
}

// TestFileSourcePermissionsWarn checks --manifest-permissions=warn reads
// what strict refuses, and says so in the log.
func TestFileSourcePermissionsWarn(t *testing.T) {
	dir := t.TempDir()
	chmod(t, dir, 0o777)
	write(t, filepath.Join(dir, "a.yaml"), podManifest("a", "img:1"))
	chmod(t, filepath.Join(dir, "a.yaml"), 0o666)
	var logs strings.Builder
	cfg := SourceConfig{NodeName: testNode, ManifestPath: dir, Permissions: PermissionsWarn}
	store := NewStore(cfg.SourceNames()...)
	fs := newFileSource(cfg, store)
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
