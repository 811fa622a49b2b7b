package testbed

import (
	"os"
	"testing"
)

func TestCheckStatic(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		wantErr bool
	}{
		// Debian's dash, like almost every distribution binary, links libc.
		{name: "dynamic executable", file: "/bin/dash", wantErr: true},
		{name: "not an ELF file", file: "/etc/passwd", wantErr: true},
		{name: "missing file", file: "/nonexistent/busybox", wantErr: true},
		{name: "busybox-static", file: "/usr/bin/busybox"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := os.Stat(tc.file); err != nil && !tc.wantErr {
				t.Skipf("%s not here (run `make testbed`)", tc.file)
			}
			err := checkStatic(tc.file)
			if (err != nil) != tc.wantErr {
				t.Errorf("checkStatic(%s) = %v, want error %v", tc.file, err, tc.wantErr)
			}
		})
	}
}

func TestBusyboxSpecDirectories(t *testing.T) {
	spec := busyboxSpec([]byte("bin"), []string{"/bin/sh", "usr/local/bin/x", "bin/busybox"})
	paths := map[string]fileEntry{}
	for _, f := range spec.Files {
		if _, dup := paths[f.Path]; dup {
			t.Errorf("%s listed twice", f.Path)
		}
		paths[f.Path] = f
	}
	for _, d := range []string{"usr", "usr/local", "usr/local/bin", "bin", "tmp", "var/www"} {
		if f, ok := paths[d]; !ok || !f.Dir {
			t.Errorf("directory %s missing", d)
		}
	}
	if f := paths["usr/local/bin/x"]; f.Link != "/bin/busybox" {
		t.Errorf("usr/local/bin/x = %+v, want a link to /bin/busybox", f)
	}
	if f := paths["bin/busybox"]; f.Link != "" || string(f.Data) != "bin" {
		t.Errorf("bin/busybox = %+v, want the binary, not an applet link", f)
	}
}
