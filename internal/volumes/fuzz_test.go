package volumes

import (
	"fmt"
	"strings"
	"testing"
)

// FuzzUnescapeMountPath: a mount point's path is chosen by whoever mounts
// it. What the kernel escapes unescapes to the path itself, and
// unescaping arbitrary text never lengthens it nor touches text without a
// backslash.
func FuzzUnescapeMountPath(f *testing.F) {
	for _, s := range []string{"/plain", `/with\040space`, `/tab\011and\134bs`, `/bad\09`, `/end\04`, `\777`, "/a b\n\\c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got := unescapeMountPath(escapeMountPath(s)); got != s {
			t.Fatalf("unescape(escape(%q)) = %q", s, got)
		}
		u := unescapeMountPath(s)
		if len(u) > len(s) {
			t.Fatalf("unescape(%q) = %q is longer", s, u)
		}
		if !strings.Contains(s, `\`) && u != s {
			t.Fatalf("unescape(%q) = %q without a backslash", s, u)
		}
	})
}

// escapeMountPath escapes a path as the kernel does in
// /proc/self/mountinfo (mangle_path with " \t\n\\").
func escapeMountPath(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == ' ' || c == '\t' || c == '\n' || c == '\\' {
			fmt.Fprintf(&b, "\\%03o", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}
