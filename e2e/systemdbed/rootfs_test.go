package systemdbed

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMirrorIn reads the Debian mirror out of apt's sources, in both
// formats, skipping security and other suites.
func TestMirrorIn(t *testing.T) {
	for _, tt := range []struct {
		name, content, want string
	}{
		{"deb822", "Types: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\n\nTypes: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\n", "http://mirror.example/debian"},
		{"deb822 last stanza", "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm\n", "http://mirror.example/debian"},
		{"one-line", "# comment\ndeb http://deb.debian.org/debian-security bookworm-security main\ndeb http://mirror.example/debian bookworm main\n", "http://mirror.example/debian"},
		{"one-line with options", "deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian bookworm main\n", "http://mirror.example/debian"},
		{"other suite only", "deb http://mirror.example/debian trixie main\n", ""},
		{"security only", "deb http://security.example/debian-security bookworm main\n", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "sources")
			if err := os.WriteFile(f, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := mirrorIn(f); got != tt.want {
				t.Errorf("mirrorIn = %q, want %q", got, tt.want)
			}
		})
	}
}
