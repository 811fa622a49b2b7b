package volumes

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// envFileCases feed TestEnvFileValue and seed FuzzEnvFileValue.
var envFileCases = []struct {
	name, data, key string
	want            string
	found           bool
	wantErr         string
}{
	{name: "plain", data: "A='1'\nB='two words'\n", key: "B", want: "two words", found: true},
	{name: "leading blanks, comments, blank lines", data: "# hi\n\n   \t# x\n  A='1'\n\t\nB='2'", key: "A", want: "1", found: true},
	{name: "literal, no escapes or expansion", data: `A='$(B) ${C} \n "q"'`, key: "A", want: `$(B) ${C} \n "q"`, found: true},
	{name: "multi-line value", data: "A='l1\nl2'\nB='x'\n", key: "A", want: "l1\nl2", found: true},
	{name: "line count across a multi-line value", data: "A='l1\nl2'\nB=bad\n", key: "A", wantErr: "line 3: the value of B must be in single quotes"},
	{name: "comment after the value", data: "A='1' # one\n", key: "A", want: "1", found: true},
	{name: "empty value", data: "A=\nB=''\n", key: "A", want: "", found: true},
	{name: "blank after = assigns empty", data: "A= 'x'\n", key: "A", want: "", found: true},
	{name: "first assignment wins", data: "A='1'\nA='2'\n", key: "A", want: "1", found: true},
	{name: "absent", data: "A='1'\n", key: "B", found: false},
	{name: "empty file", data: "", key: "B", found: false},
	{name: "value may hold = and #", data: "A='x=y#z'\n", key: "A", want: "x=y#z", found: true},
	{name: "unquoted value", data: "A=1\n", key: "A", wantErr: "line 1: the value of A must be in single quotes"},
	{name: "blank before =", data: "A ='1'\n", key: "A", wantErr: `line 1: blank before '=' in "A"`},
	{name: "no =", data: "A='1'\njunk\n", key: "A", wantErr: "line 2: not NAME='value'"},
	{name: "unclosed quote", data: "A='1\n", key: "A", wantErr: "line 1: the quote opened here is never closed"},
	{name: "junk after the quote", data: "A='1'x\n", key: "A", wantErr: `line 1: unexpected "x" after the closing quote`},
	{name: "error after the key still fails", data: "A='1'\nB=2\n", key: "A", wantErr: "line 2"},
	{name: "no name", data: "A='1'\n='2'\n", key: "A", wantErr: "line 2: no name before '='"},
	{name: "NUL", data: "A='\x00'", key: "A", wantErr: "NUL"},
}

func TestEnvFileValue(t *testing.T) {
	for _, tt := range envFileCases {
		t.Run(tt.name, func(t *testing.T) {
			got, found, err := envFileValue([]byte(tt.data), tt.key)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want || found != tt.found {
				t.Fatalf("= %q, %v, %v; want %q, %v", got, found, err, tt.want, tt.found)
			}
		})
	}
}

// FuzzEnvFileValue reads arbitrary env files (a container writes them).
// A value found is a piece of the file, and a file the parser accepts
// yields every value it found when written back in the same format.
func FuzzEnvFileValue(f *testing.F) {
	for _, tt := range envFileCases {
		f.Add([]byte(tt.data), tt.key)
	}
	f.Fuzz(func(t *testing.T, data []byte, key string) {
		v, found, err := envFileValue(data, key)
		if err != nil {
			return
		}
		if !found && v != "" {
			t.Fatalf("value %q without found", v)
		}
		if !strings.Contains(string(data), v) {
			t.Fatalf("value %q is not in %q", v, data)
		}
		if found && !strings.Contains(v, "'") && !strings.ContainsAny(key, "= \t\n#'") && key != "" {
			again, ok, err := envFileValue([]byte(key+"='"+v+"'\n"), key)
			if err != nil || !ok || again != v {
				t.Fatalf("round trip of %q=%q: %q, %v, %v", key, v, again, ok, err)
			}
		}
	})
}

func TestFileKeyValue(t *testing.T) {
	root := t.TempDir()
	m := newHost(t, Options{RootDir: root})
	pod := &v1.Pod{}
	pod.UID = types.UID("uid-1")
	dir, err := m.emptyDirPath(pod.UID, "cfg")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	secret := filepath.Join(root, "secret.env")
	write := func(path, data string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(secret, "PW='hunter2'\n")
	write(filepath.Join(dir, "sub", "app.env"), "DB='db:5432'\n")
	write(filepath.Join(dir, "big.env"), "A='"+strings.Repeat("x", maxEnvFileBytes)+"'\n")
	if err := os.Symlink(secret, filepath.Join(dir, "abs.env")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../../../../secret.env", filepath.Join(dir, "rel.env")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub/app.env", filepath.Join(dir, "inside.env")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("sub", filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.env"), 0o644); err != nil {
		t.Fatal(err)
	}
	yes := true
	// Without openat2 no link is followed: one that stays inside the
	// volume is refused too, and the escapes are refused as links.
	openModes(t, func(t *testing.T) {
		fallback := noOpenat2.Load()
		inside, escape := "", "the path leaves the volume"
		if fallback {
			inside, escape = "is a symbolic link, which berth does not follow", "is a symbolic link"
		}
		testFileKeyValue(t, m, pod, inside, escape, yes)
	})
}

func testFileKeyValue(t *testing.T, m *Host, pod *v1.Pod, insideErr, escapeErr string, yes bool) {
	tests := []struct {
		name, path, key string
		optional        bool
		want            string
		found           bool
		wantErr         string
	}{
		{name: "found", path: "sub/app.env", key: "DB", want: "db:5432", found: true},
		{name: "link inside the volume", path: "inside.env", key: "DB", want: "db:5432", found: insideErr == "", wantErr: insideErr},
		{name: "missing key", path: "sub/app.env", key: "NO", wantErr: `key "NO" is not in file "sub/app.env" of volume "cfg"`},
		{name: "missing key, optional", path: "sub/app.env", key: "NO", optional: true},
		{name: "missing file", path: "none.env", key: "DB", wantErr: `file "none.env" does not exist in volume "cfg"`},
		{name: "missing file, optional", path: "none.env", key: "DB", optional: true},
		{name: "absolute link out of the volume", path: "abs.env", key: "PW", wantErr: escapeErr},
		{name: "relative link out of the volume", path: "rel.env", key: "PW", wantErr: escapeErr},
		{name: "dot-dot", path: "../../../../secret.env", key: "PW", wantErr: "the path leaves the volume"},
		{name: "optional does not excuse an escape", path: "abs.env", key: "PW", optional: true, wantErr: escapeErr},
		{name: "link in the middle", path: "link/app.env", key: "DB", want: "db:5432", found: insideErr == "", wantErr: insideErr},
		{name: "fifo never blocks", path: "fifo.env", key: "A", wantErr: "not a regular file"},
		{name: "directory", path: "sub", key: "A", wantErr: "not a regular file"},
		{name: "too large", path: "big.env", key: "A", wantErr: "larger than 65536 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ref := &v1.FileKeySelector{VolumeName: "cfg", Path: tt.path, Key: tt.key}
			if tt.optional {
				ref.Optional = &yes
			}
			got, found, err := m.FileKeyValue(pod, ref)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want || found != tt.found {
				t.Fatalf("= %q, %v, %v; want %q, %v", got, found, err, tt.want, tt.found)
			}
		})
	}
}
