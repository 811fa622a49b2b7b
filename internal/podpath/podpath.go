package podpath

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// maxElem is NAME_MAX: a longer element fails in the kernel anyway, better
// to say why before.
const maxElem = 255

// Elem checks that s names exactly one entry of a directory: not empty, not
// "." or "..", without '/', NUL or any control character (a newline in a
// path would also forge lines wherever the path is logged).
func Elem(s string) error {
	switch {
	case s == "":
		return errors.New("empty path element")
	case s == "." || s == "..":
		return fmt.Errorf("path element %q", s)
	case len(s) > maxElem:
		return fmt.Errorf("path element of %d bytes, more than %d", len(s), maxElem)
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == '/' || c < 0x20 || c == 0x7f {
			return fmt.Errorf("path element %q has a %q", s, c)
		}
	}
	return nil
}

// Within joins elem below root after checking that each is one safe path
// element, and checks that the result lies strictly below root. It is pure:
// it never looks at the filesystem.
func Within(root string, elem ...string) (string, error) {
	if root == "" {
		return "", errors.New("empty root directory")
	}
	if len(elem) == 0 {
		return "", fmt.Errorf("no path below %s", root)
	}
	for _, e := range elem {
		if err := Elem(e); err != nil {
			return "", fmt.Errorf("path below %s: %w", root, err)
		}
	}
	p := filepath.Join(append([]string{root}, elem...)...)
	if !Under(root, p) {
		return "", fmt.Errorf("path %s is not below %s", p, root)
	}
	return p, nil
}

// Under reports whether path, lexically cleaned, lies strictly below root.
// It is the check for paths berth did not build itself, such as a log path
// a runtime reports, before berth removes or rotates what they name.
func Under(root, path string) bool {
	if root == "" || path == "" {
		return false
	}
	root, path = filepath.Clean(root), filepath.Clean(path)
	if filepath.IsAbs(root) != filepath.IsAbs(path) {
		return false
	}
	prefix := root + string(filepath.Separator)
	if root == string(filepath.Separator) {
		prefix = root
	}
	return strings.HasPrefix(path, prefix) && len(path) > len(prefix)
}

// LogDir is a pod's directory in the CRI log layout,
// <root>/<namespace>_<name>_<uid>. None of the three may contain '_', so
// the name splits back into them one way only and the directory of one UID
// never matches another's.
func LogDir(root, namespace, name, uid string) (string, error) {
	for _, part := range []string{namespace, name, uid} {
		err := Elem(part)
		if err == nil && strings.Contains(part, "_") {
			err = fmt.Errorf("%q has a '_'", part)
		}
		if err != nil {
			return "", fmt.Errorf("pod log directory of %s/%s (uid %q): %w", namespace, name, uid, err)
		}
	}
	return Within(root, namespace+"_"+name+"_"+uid)
}

// MkdirAll creates dir, which must lie below root, and its parents below
// root, like os.MkdirAll, but refuses to go through anything below root
// that is not a directory, a symbolic link included: a link planted in a
// pod's directory must not make berth create or chmod files elsewhere.
// root itself is created with os.MkdirAll: it comes from berth's own
// configuration.
func MkdirAll(root, dir string, perm os.FileMode) error {
	if !Under(root, dir) {
		return fmt.Errorf("create %s: not below %s", dir, root)
	}
	root, dir = filepath.Clean(root), filepath.Clean(dir)
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	rel, err := filepath.Rel(root, dir)
	if err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	cur := root
	for _, e := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, e)
		if err := os.Mkdir(cur, perm); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		fi, err := os.Lstat(cur)
		if err != nil {
			return err
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return fmt.Errorf("create %s: %s is a symbolic link", dir, cur)
		}
		if !fi.IsDir() {
			return fmt.Errorf("create %s: %s is not a directory", dir, cur)
		}
	}
	return nil
}
