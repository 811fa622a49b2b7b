package statefile

import (
	"errors"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// nobody is a user other than the one the tests run as (root).
const nobody = 65534

// file creates dir/name with content and exactly mode perm (not cut by
// the umask).
func file(t *testing.T, dir, name, content string, perm os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, perm); err != nil {
		t.Fatal(err)
	}
	return p
}

func chown(t *testing.T, p string, uid int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("changing a file's owner needs root")
	}
	if err := os.Lchown(p, uid, -1); err != nil {
		t.Fatal(err)
	}
}

// TestRead: a file is read only when it is a regular file of ours that no
// one else may write (nor read, for ReadPrivate), within the limit; a
// symbolic link is not followed and a FIFO does not block the read.
func TestRead(t *testing.T) {
	const limit = 16
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string) string
		private bool
		want    string // the content read; "" when refused
		wantErr string // a part of the error; "" when read
		errIs   error
	}{
		{name: "ours 0600", setup: func(t *testing.T, dir string) string {
			return file(t, dir, "f", "state", 0o600)
		}, want: "state"},
		{name: "ours 0644", setup: func(t *testing.T, dir string) string {
			return file(t, dir, "f", "state", 0o644)
		}, want: "state"},
		{name: "at the limit", setup: func(t *testing.T, dir string) string {
			return file(t, dir, "f", strings.Repeat("x", limit), 0o600)
		}, want: strings.Repeat("x", limit)},
		{name: "private 0600", private: true, setup: func(t *testing.T, dir string) string {
			return file(t, dir, "f", "key", 0o600)
		}, want: "key"},
		{name: "missing", setup: func(t *testing.T, dir string) string {
			return filepath.Join(dir, "none")
		}, errIs: fs.ErrNotExist},
		{name: "symlink refused", setup: func(t *testing.T, dir string) string {
			target := file(t, dir, "target", "state", 0o600)
			link := filepath.Join(dir, "link")
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			return link
		}, errIs: syscall.ELOOP},
		{name: "owned by nobody", setup: func(t *testing.T, dir string) string {
			p := file(t, dir, "f", "state", 0o600)
			chown(t, p, nobody)
			return p
		}, wantErr: "owned by uid 65534, not 0"},
		{name: "group-writable", setup: func(t *testing.T, dir string) string {
			return file(t, dir, "f", "state", 0o620)
		}, wantErr: "writable by group or others (mode -rw--w----)"},
		{name: "others-writable", setup: func(t *testing.T, dir string) string {
			return file(t, dir, "f", "state", 0o602)
		}, wantErr: "writable by group or others"},
		{name: "private readable by group", private: true, setup: func(t *testing.T, dir string) string {
			return file(t, dir, "f", "key", 0o640)
		}, wantErr: "readable by group or others (mode -rw-r-----)"},
		{name: "private readable by others", private: true, setup: func(t *testing.T, dir string) string {
			return file(t, dir, "f", "key", 0o604)
		}, wantErr: "readable by group or others"},
		{name: "too large", setup: func(t *testing.T, dir string) string {
			return file(t, dir, "f", strings.Repeat("x", limit+1), 0o600)
		}, wantErr: "larger than the limit of 16 bytes"},
		{name: "FIFO not blocking", setup: func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "fifo")
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
			return p
		}, wantErr: "not a regular file (p---------)"},
		{name: "directory", setup: func(t *testing.T, dir string) string {
			p := filepath.Join(dir, "sub")
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
			return p
		}, wantErr: "not a regular file (d---------)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.setup(t, t.TempDir())
			read := ReadOwned
			if tt.private {
				read = ReadPrivate
			}
			data, err := read(p, limit)
			switch {
			case tt.errIs != nil:
				if !errors.Is(err, tt.errIs) {
					t.Fatalf("err %v, want %v", err, tt.errIs)
				}
			case tt.wantErr != "":
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
			case err != nil:
				t.Fatalf("err %v", err)
			}
			if string(data) != tt.want {
				t.Errorf("read %q, want %q", data, tt.want)
			}
		})
	}
}

// TestMakePrivateDir: the directory is made 0700 under parents made 0750,
// an existing one is kept when it is ours alone, and anything else is
// refused.
func TestMakePrivateDir(t *testing.T) {
	tests := []struct {
		name       string
		setup      func(t *testing.T, dir string)
		parentMode os.FileMode // 0: not checked
		wantErr    string
	}{
		{name: "new", setup: func(*testing.T, string) {}, parentMode: 0o750},
		{name: "existing", setup: func(t *testing.T, dir string) {
			mkdir(t, dir, 0o700)
		}},
		{name: "existing 0755", setup: func(t *testing.T, dir string) {
			mkdir(t, dir, 0o755)
		}},
		{name: "group-writable", setup: func(t *testing.T, dir string) {
			mkdir(t, dir, 0o770)
		}, wantErr: "writable by group or others (mode -rwxrwx---)"},
		{name: "owned by nobody", setup: func(t *testing.T, dir string) {
			mkdir(t, dir, 0o700)
			chown(t, dir, nobody)
		}, wantErr: "owned by uid 65534"},
		{name: "a file", setup: func(t *testing.T, dir string) {
			mkdir(t, filepath.Dir(dir), 0o750)
			file(t, filepath.Dir(dir), filepath.Base(dir), "", 0o600)
		}, wantErr: "not a directory (----------)"},
		{name: "symlink to a directory", setup: func(t *testing.T, dir string) {
			mkdir(t, filepath.Dir(dir), 0o750)
			mkdir(t, dir+".real", 0o700)
			if err := os.Symlink(dir+".real", dir); err != nil {
				t.Fatal(err)
			}
		}, wantErr: "not a directory (L---------)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "parent", "state")
			tt.setup(t, dir)
			err := MakePrivateDir(dir)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if tt.parentMode != 0 {
				if fi, err := os.Lstat(filepath.Dir(dir)); err != nil || fi.Mode().Perm() != tt.parentMode {
					t.Errorf("parent: %v, want mode %v", err, tt.parentMode)
				}
			}
			if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm()&0o022 != 0 {
				t.Errorf("dir: %v, want a directory writable by us alone", err)
			}
		})
	}
}

func mkdir(t *testing.T, dir string, perm os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(dir, perm); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, perm); err != nil {
		t.Fatal(err)
	}
}

// TestWrite: WriteAtomic and Replace leave dir/name with the data and the
// mode asked for, whatever the umask, replace a symbolic link rather than
// write through it, and leave no temporary file when they fail.
func TestWrite(t *testing.T) {
	write := map[string]func(dir, name string, data []byte, perm os.FileMode) error{
		"WriteAtomic": WriteAtomic,
		"Replace":     Replace,
	}
	tests := []struct {
		name    string
		setup   func(t *testing.T, dir string) // dir is the one written to
		perm    os.FileMode
		wantErr bool
		files   []string // what dir holds after
	}{
		{name: "new 0600", setup: func(t *testing.T, dir string) { mkdir(t, dir, 0o700) }, perm: 0o600, files: []string{"f"}},
		{name: "new 0644", setup: func(t *testing.T, dir string) { mkdir(t, dir, 0o700) }, perm: 0o644, files: []string{"f"}},
		{name: "over an older file", setup: func(t *testing.T, dir string) {
			mkdir(t, dir, 0o700)
			file(t, dir, "f", "older content, longer", 0o644)
		}, perm: 0o600, files: []string{"f"}},
		{name: "over a symlink", setup: func(t *testing.T, dir string) {
			mkdir(t, dir, 0o700)
			target := file(t, filepath.Dir(dir), "target", "untouched", 0o600)
			if err := os.Symlink(target, filepath.Join(dir, "f")); err != nil {
				t.Fatal(err)
			}
		}, perm: 0o600, files: []string{"f"}},
		{name: "a directory in the way", setup: func(t *testing.T, dir string) {
			mkdir(t, filepath.Join(dir, "f", "sub"), 0o700)
		}, perm: 0o600, wantErr: true, files: []string{"f"}},
		{name: "dir missing", setup: func(*testing.T, string) {}, perm: 0o600, wantErr: true},
	}
	for fn, write := range write {
		for _, tt := range tests {
			t.Run(fn+"/"+tt.name, func(t *testing.T) {
				top := t.TempDir()
				dir := filepath.Join(top, "state")
				tt.setup(t, dir)
				old := syscall.Umask(0o077)
				err := write(dir, "f", []byte("new"), tt.perm)
				syscall.Umask(old)
				if (err != nil) != tt.wantErr {
					t.Fatalf("err %v, want an error: %v", err, tt.wantErr)
				}
				var names []string
				entries, _ := os.ReadDir(dir)
				for _, e := range entries {
					names = append(names, e.Name())
				}
				if strings.Join(names, ",") != strings.Join(tt.files, ",") {
					t.Errorf("dir holds %v, want %v (no temporary file)", names, tt.files)
				}
				if tt.wantErr {
					return
				}
				p := filepath.Join(dir, "f")
				if data, err := os.ReadFile(p); err != nil || string(data) != "new" {
					t.Errorf("read %q, %v; want %q", data, err, "new")
				}
				if fi, err := os.Lstat(p); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != tt.perm {
					t.Errorf("file %v, mode %v, want a regular file of %v", err, fi.Mode(), tt.perm)
				}
				if data, err := os.ReadFile(filepath.Join(top, "target")); err == nil && string(data) != "untouched" {
					t.Errorf("written through the symlink: target holds %q", data)
				}
			})
		}
	}
}

// TestSync: SyncFile and SyncDir sync what exists and report what does
// not.
func TestSync(t *testing.T) {
	dir := t.TempDir()
	p := file(t, dir, "f", "state", 0o600)
	tests := []struct {
		name  string
		sync  func(string) error
		path  string
		errIs error
	}{
		{name: "file", sync: SyncFile, path: p},
		{name: "dir", sync: SyncDir, path: dir},
		{name: "missing file", sync: SyncFile, path: filepath.Join(dir, "none"), errIs: fs.ErrNotExist},
		{name: "missing dir", sync: SyncDir, path: filepath.Join(dir, "none"), errIs: fs.ErrNotExist},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.sync(tt.path); !errors.Is(err, tt.errIs) {
				t.Errorf("err %v, want %v", err, tt.errIs)
			}
		})
	}
}

// TestLeaf: the package imports nothing of berth, so that every package
// keeping state may use it.
func TestLeaf(t *testing.T) {
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); strings.HasPrefix(p, "github.com/berth-agent/berth/") {
				t.Errorf("%s imports %s", name, p)
			}
		}
	}
}

func TestListDir(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"b.json", "a.json"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		dir  string
		want []string
	}{
		{"names in order", dir, []string{"a.json", "b.json"}},
		{"missing directory is empty", filepath.Join(dir, "missing"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ListDir(tt.dir)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("ListDir(%s) = %q, %v; want %q", tt.dir, got, err, tt.want)
			}
		})
	}
	if _, err := ListDir(filepath.Join(dir, "a.json")); err == nil {
		t.Error("ListDir of a file: no error")
	}
}
