package systemdbed

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// rootfsVersion names the cached rootfs: bump it whenever rootfsPackages or
// the debootstrap command change, and the next run builds a fresh one.
const rootfsVersion = "bookworm-2"

// rootfsPackages is what the booted Debian has besides minbase: systemd as
// PID 1, and the runtime berth's .deb recommends, run by that systemd as it
// is on an appliance (containerd.service, runc, the CNI plugins, and the
// iptables and ip tools the plugins call), and openssh-client, whose
// ssh-keygen verifies the release's signature as docs/install.md says.
var rootfsPackages = []string{"systemd", "systemd-sysv", "dbus", "containerd", "runc", "containernetworking-plugins", "iptables", "iproute2", "openssh-client"}

// defaultMirror is used when apt's sources name no Debian mirror.
const defaultMirror = "http://deb.debian.org/debian"

// Rootfs returns the cached Debian bookworm rootfs below cache, building
// it with debootstrap (about two minutes) when it is missing. The build
// goes to a temporary directory renamed into place when complete, so a
// killed build never leaves a half rootfs; a lock file serializes
// concurrent builds. The cached tree is never booted itself: a bed boots
// an overlay on it.
func Rootfs(cache string, logf func(format string, args ...any)) (string, error) {
	final := filepath.Join(cache, "systemdbed-rootfs-"+rootfsVersion)
	if _, err := os.Stat(filepath.Join(final, "sbin", "init")); err == nil {
		return final, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("create cache dir: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(cache, "systemdbed-rootfs.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("open rootfs lock: %w", err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return "", fmt.Errorf("lock rootfs cache: %w", err)
	}
	// Another process may have built it while this one waited.
	if _, err := os.Stat(filepath.Join(final, "sbin", "init")); err == nil {
		return final, nil
	}
	// Under the lock, any build directory is a killed build's leftover;
	// so is a rootfs of an older version.
	stale, _ := filepath.Glob(filepath.Join(cache, ".systemdbed-build-*"))
	old, _ := filepath.Glob(filepath.Join(cache, "systemdbed-rootfs-*"))
	for _, d := range append(stale, old...) {
		if d != final {
			if err := removeBuild(d); err != nil {
				return "", fmt.Errorf("remove stale rootfs: %w", err)
			}
		}
	}
	tmp, err := os.MkdirTemp(cache, ".systemdbed-build-")
	if err != nil {
		return "", fmt.Errorf("create rootfs build dir: %w", err)
	}
	defer removeBuild(tmp)
	mirror := aptMirror()
	started := time.Now()
	logf("systemdbed: building Debian bookworm rootfs with debootstrap from %s (about 2 minutes, cached in %s)", mirror, final)
	cmd := exec.Command("debootstrap", "--variant=minbase", "--include="+strings.Join(rootfsPackages, ","), "bookworm", filepath.Join(tmp, "rootfs"), mirror)
	// A test binary killed mid-build takes debootstrap along (its
	// subshells and chrooted dpkg live on: see killBuilders).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("debootstrap: %w\n%s", err, tail(string(out), 20))
	}
	if err := os.Rename(filepath.Join(tmp, "rootfs"), final); err != nil {
		return "", fmt.Errorf("store rootfs: %w", err)
	}
	logf("systemdbed: rootfs built in %s", time.Since(started).Round(time.Second))
	return final, nil
}

// removeBuild removes a build directory, even one a killed debootstrap
// left with processes still working in it and /proc or /sys mounted in it.
func removeBuild(dir string) error {
	killBuilders(dir)
	if err := unmountBelow(dir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove %s: %w", dir, err)
	}
	return nil
}

// killBuilders SIGKILLs what is left of a killed build in dir:
// debootstrap's subshells (dir is in their command line) and the dpkg
// they run chrooted into it (their root is below dir), so removing the
// directory does not race them.
func killBuilders(dir string) {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		root, _ := os.Readlink("/proc/" + e.Name() + "/root")
		if strings.Contains(string(cmdline), dir) || root == dir || strings.HasPrefix(root, dir+"/") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// aptMirror returns the Debian mirror the host's apt already uses (the
// first deb.debian.org-style URI serving bookworm in sources.list or a
// deb822 .sources file), so the build works wherever apt works.
func aptMirror() string {
	files, _ := filepath.Glob("/etc/apt/sources.list.d/*.sources")
	lists, _ := filepath.Glob("/etc/apt/sources.list.d/*.list")
	files = append(append(files, "/etc/apt/sources.list"), lists...)
	for _, f := range files {
		if m := mirrorIn(f); m != "" {
			return m
		}
	}
	return defaultMirror
}

// mirrorIn finds a Debian main archive serving bookworm in one apt
// sources file, either one-line ("deb URI bookworm main") or deb822.
func mirrorIn(file string) string {
	f, err := os.Open(file)
	if err != nil {
		return ""
	}
	defer f.Close()
	var uri string
	var suites []string
	sc := bufio.NewScanner(f)
	flush := func() string {
		defer func() { uri, suites = "", nil }()
		for _, s := range suites {
			if s == "bookworm" && !strings.Contains(uri, "security") {
				return uri
			}
		}
		return ""
	}
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		fields := strings.Fields(line)
		switch {
		case line == "":
			if m := flush(); m != "" {
				return m
			}
		case strings.HasPrefix(line, "#"):
		case len(fields) >= 3 && fields[0] == "deb":
			// Options in brackets come before the URI.
			i := 1
			for i < len(fields) && strings.HasPrefix(fields[i], "[") {
				for i < len(fields) && !strings.HasSuffix(fields[i], "]") {
					i++
				}
				i++
			}
			if i+1 < len(fields) && fields[i+1] == "bookworm" && !strings.Contains(fields[i], "security") {
				return fields[i]
			}
		case strings.HasPrefix(line, "URIs:") && len(fields) > 1:
			uri = fields[1]
		case strings.HasPrefix(line, "Suites:"):
			suites = fields[1:]
		}
	}
	return flush()
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
