package doctor

import (
	"os"
	"path/filepath"
	"testing"
)

// TestCheckManifestDir: the file source's rule, reported: a root-only
// directory is OK, a missing one a WARN, one others may write a FAIL.
func TestCheckManifestDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the rule trusts root-owned directories above the temp dir; needs root")
	}
	tests := []struct {
		name   string
		setup  func(t *testing.T, dir string) string
		want   Status
		wantIn string
	}{
		{"root only", func(t *testing.T, dir string) string { return dir }, OK, "is writable by root only"},
		{"missing", func(t *testing.T, dir string) string { return filepath.Join(dir, "none") }, Warn, "does not exist"},
		{"group-writable", func(t *testing.T, dir string) string {
			if err := os.Chmod(dir, 0o775); err != nil {
				t.Fatal(err)
			}
			return dir
		}, Fail, "is mode 0775, writable by group or others"},
		{"off", func(t *testing.T, dir string) string { return "" }, OK, "the file source is off"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "manifests")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			checkResult(t, checkManifestDir(tt.setup(t, dir)), tt.want, tt.wantIn)
		})
	}
}
