package source

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ReasonPermissions is a manifest, or a directory on its path, that someone
// other than root may write: whoever can write it can run a privileged pod.
const ReasonPermissions = "ManifestPermissions"

// Permissions says what berth does with a manifest others may write, like
// sshd's StrictModes.
type Permissions string

const (
	// PermissionsStrict refuses such a manifest (the default).
	PermissionsStrict Permissions = "strict"
	// PermissionsWarn logs a warning and reads it anyway.
	PermissionsWarn Permissions = "warn"
)

// ParsePermissions checks a --manifest-permissions value; "" is strict.
func ParsePermissions(s string) (Permissions, error) {
	switch Permissions(s) {
	case "", PermissionsStrict:
		return PermissionsStrict, nil
	case PermissionsWarn:
		return PermissionsWarn, nil
	}
	return "", fmt.Errorf("want strict or warn, got %q", s)
}

// permissionError is a manifest or directory refused for its owner or mode.
type permissionError struct{ msg string }

func (e *permissionError) Error() string { return e.msg }

// isPermissionError tells a refusal for ownership or mode from a failure to
// read.
func isPermissionError(err error) bool {
	var pe *permissionError
	return errors.As(err, &pe)
}

// trustedOwner is who may own manifests and their directories: root, and
// the user berth runs as (whoever starts berth already trusts that user
// with everything berth can do; it also lets an unprivileged berth, as in
// some tests, read its own files).
func trustedOwner(uid uint32) bool {
	return uid == 0 || int64(uid) == int64(os.Geteuid())
}

// ownerOf returns the uid owning info's file.
func ownerOf(info fs.FileInfo) uint32 {
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		return st.Uid
	}
	return 0
}

// checkManifestFile checks the owner and mode of an opened manifest, from
// its fstat: the file read is the file checked, whatever was renamed over
// the path in between.
func checkManifestFile(path string, info fs.FileInfo) error {
	if uid := ownerOf(info); !trustedOwner(uid) {
		return &permissionError{fmt.Sprintf("manifest %s is owned by uid %d; it must be owned by root (uid 0), "+
			"since its owner can run any pod as root (chown root %s, or --manifest-permissions=warn)", path, uid, path)}
	}
	if perm := info.Mode().Perm(); perm&0o022 != 0 {
		return &permissionError{fmt.Sprintf("manifest %s is mode %04o, writable by group or others; "+
			"it must be writable by its owner only (chmod go-w %s, or --manifest-permissions=warn)", path, perm, path)}
	}
	return nil
}

// checkSecretFile checks the mode of a manifest that holds a Secret: as
// ssh refuses a private key others may read, it must be readable by its
// owner only, else every local user (a 0644 file in a 0755 directory) can
// read the Secret's values. info is the fstat of the file read.
func checkSecretFile(path string, info fs.FileInfo) error {
	if perm := info.Mode().Perm(); perm&0o044 != 0 {
		return &permissionError{fmt.Sprintf("manifest %s holds a Secret and is mode %04o, readable by group or others; "+
			"it must be readable by its owner only (chmod 600 %s, or --manifest-permissions=warn)", path, perm, path)}
	}
	return nil
}

// checkManifestDir checks that nobody but root can change what dir holds:
// dir itself must be owned by root and not writable by group or others, and
// so must every directory above it, except that a root-owned sticky
// directory (/tmp) is fine above it: there others can create entries but
// cannot rename or remove ours. dir itself gets no such exception: in a
// sticky dir anyone could add a manifest, or a symlink to any root-owned
// file. Each prefix of the path is checked as it resolves (stat follows
// symlinks), and so is the fully resolved path: a symlink on the way is
// only as trustworthy as the directories it lives in and points into.
func checkManifestDir(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("manifest directory %s: %w", dir, err)
	}
	if err := checkDirChain(abs); err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return fmt.Errorf("manifest directory %s: %w", dir, err)
	}
	if real != abs {
		return checkDirChain(real)
	}
	return nil
}

// checkDirChain checks dir and every prefix of it, from / down.
func checkDirChain(dir string) error {
	prefixes := []string{dir}
	for p := dir; p != filepath.Dir(p); {
		p = filepath.Dir(p)
		prefixes = append(prefixes, p)
	}
	for i := len(prefixes) - 1; i >= 0; i-- {
		p := prefixes[i]
		info, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("manifest directory %s: %w", p, err)
		}
		if err := checkDir(p, info, i == 0); err != nil {
			return err
		}
	}
	return nil
}

// checkDir applies the rule of checkManifestDir to one directory; holder
// says it is the one holding the manifests.
func checkDir(path string, info fs.FileInfo, holder bool) error {
	what := "directory " + path + " above the manifests"
	if holder {
		what = "manifest directory " + path
	}
	if !info.IsDir() {
		return &permissionError{fmt.Sprintf("%s is not a directory", what)}
	}
	uid := ownerOf(info)
	if !trustedOwner(uid) {
		return &permissionError{fmt.Sprintf("%s is owned by uid %d; it must be owned by root (uid 0), "+
			"since its owner can run any pod as root (chown root %s, or --manifest-permissions=warn)", what, uid, path)}
	}
	mode := info.Mode()
	if mode.Perm()&0o022 == 0 || (!holder && uid == 0 && mode&fs.ModeSticky != 0) {
		return nil
	}
	return &permissionError{fmt.Sprintf("%s is mode %s, writable by group or others; "+
		"it must be writable by root only (chmod go-w %s, or --manifest-permissions=warn)", what, modeString(mode), path)}
}

// modeString renders a directory's mode as chmod takes it (1777, 0777).
func modeString(mode fs.FileMode) string {
	m := uint32(mode.Perm())
	if mode&fs.ModeSticky != 0 {
		m |= 0o1000
	}
	if mode&fs.ModeSetgid != 0 {
		m |= 0o2000
	}
	return fmt.Sprintf("%04o", m)
}

// CheckManifestPath applies the file source's rules for who may write
// --pod-manifest-path to the path, without reading a manifest: a
// directory is checked as checkManifestDir says, and a single manifest
// file as checkManifestFile says, together with the directory holding it.
// berth doctor reports what it returns. An error wrapping fs.ErrNotExist
// is a path (or a directory above it) that does not exist.
func CheckManifestPath(path string) error {
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("manifest path %s: %w", path, err)
	}
	if info.IsDir() {
		return checkManifestDir(path)
	}
	if err := checkManifestDir(filepath.Dir(path)); err != nil {
		return err
	}
	return checkManifestFile(path, info)
}
