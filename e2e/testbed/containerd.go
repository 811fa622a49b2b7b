package testbed

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// EnvContainerd selects the runtime a bed runs when Options.Containerd is
// empty: a containerd, "1.6" (Debian's package, the default), "1.7",
// "2.1", "2.3" or "2.4" (built from their Go modules) or an exact upstream
// version such as "2.3.7"; or "crio" (RuntimeCRIO) for CRI-O built from
// its Go module.
const EnvContainerd = "BERTH_CONTAINERD"

// DefaultContainerd is the containerd of Debian 12, installed by `make
// testbed`.
const DefaultContainerd = "1.6"

// containerdReleases pins the release a short version name builds: the
// newest patch release tested with berth.
var containerdReleases = map[string]string{
	"1.7": "1.7.35",
	"2.1": "2.1.9",
	"2.3": "2.3.7",
	"2.4": "2.4.2",
}

// containerdBinaries are the three programs of one containerd version: the
// daemon, its runc shim (found by the daemon on PATH) and ctr.
var containerdBinaries = []string{"containerd", "containerd-shim-runc-v2", "ctr"}

// runtimeVersion is the runtime a bed runs and what differs with it.
type runtimeVersion struct {
	// Name is what was asked for: "1.6", "1.7", "2.1", "2.3", "2.4", an
	// exact version or "crio".
	Name string `json:"name"`
	// CRIO is set for CRI-O; the rest of the fields then describe CRI-O's
	// release and build, and the containerd-only methods do not apply.
	CRIO bool `json:"crio,omitempty"`
	// Release is the upstream release built, e.g. "2.1.9"; "" for
	// Debian's package.
	Release string `json:"release,omitempty"`
	// BinDir holds the built binaries, put first on containerd's PATH so
	// it starts the shim of its own version; "" runs the ones on PATH.
	BinDir string `json:"binDir,omitempty"`
}

// major and minor are the release's version numbers, 1.6 for Debian's
// package.
func (v runtimeVersion) major() int { return v.versionPart(0, 1) }
func (v runtimeVersion) minor() int { return v.versionPart(1, 6) }

// versionPart is the i-th number of Release, def for Debian's package.
func (v runtimeVersion) versionPart(i, def int) int {
	if v.Release == "" {
		return def
	}
	parts := strings.Split(v.Release, ".")
	if i >= len(parts) {
		return 0
	}
	n, _ := strconv.Atoi(parts[i])
	return n
}

// configVersion is the version of config.toml this containerd reads
// without migrating it: 4 from 2.3 on (the listeners as server plugins),
// 3 from 2.0 (the CRI plugin split in io.containerd.cri.v1.images and
// io.containerd.cri.v1.runtime), 2 before.
func (v runtimeVersion) configVersion() int {
	switch {
	case v.major() == 1:
		return 2
	case v.major() == 2 && v.minor() < 3:
		return 3
	}
	return 4
}

// hasNRI reports whether this containerd has the NRI plugin (1.7 on),
// which the bed disables: every containerd would listen on the one fixed
// /var/run/nri/nri.sock.
func (v runtimeVersion) hasNRI() bool { return v.Release != "" }

// bin is the path to run one of containerdBinaries with.
func (v runtimeVersion) bin(name string) string {
	if v.BinDir == "" {
		return name
	}
	return filepath.Join(v.BinDir, name)
}

// env is the environment containerd runs in: its own shim first on PATH.
func (v runtimeVersion) env() []string {
	env := os.Environ()
	if v.BinDir == "" {
		return env
	}
	for i, kv := range env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			env[i] = "PATH=" + v.BinDir + string(os.PathListSeparator) + p
			return env
		}
	}
	return append(env, "PATH="+v.BinDir+":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
}

var releasePattern = regexp.MustCompile(`^v?([12])\.([0-9]+)\.([0-9]+)$`)

// parseContainerd maps a requested version to what to run. Only releases
// with the CRI v1 API and GetContainerEvents semantics berth knows are
// accepted: Debian's 1.6, and 1.7.x or 2.x built from source.
func parseContainerd(name string) (runtimeVersion, error) {
	if name == "" {
		name = DefaultContainerd
	}
	if name == DefaultContainerd {
		return runtimeVersion{Name: name}, nil
	}
	if name == RuntimeCRIO {
		return runtimeVersion{Name: name, CRIO: true, Release: crioRelease}, nil
	}
	release := containerdReleases[name]
	if release == "" {
		m := releasePattern.FindStringSubmatch(name)
		if m == nil {
			return runtimeVersion{}, fmt.Errorf("containerd version %q: want 1.6 (Debian's), 1.7, 2.1, 2.3, 2.4, an exact 1.7.x / 2.x.y release, or crio", name)
		}
		if minor, _ := strconv.Atoi(m[2]); m[1] == "1" && minor < 7 {
			return runtimeVersion{}, fmt.Errorf("containerd version %q: 1.x releases before 1.7 are not built (1.6 is Debian's package)", name)
		}
		release = m[1] + "." + m[2] + "." + m[3]
	}
	return runtimeVersion{Name: name, Release: release}, nil
}

// containerdModule is the Go module a release is built from.
func containerdModule(release string) string {
	if strings.HasPrefix(release, "1.") {
		return "github.com/containerd/containerd"
	}
	return "github.com/containerd/containerd/v" + strings.SplitN(release, ".", 2)[0]
}

// resolveContainerd returns the runtime to run for name, building it into
// cache first when it is not there yet.
func resolveContainerd(name, cache string) (runtimeVersion, error) {
	v, err := parseContainerd(name)
	if err != nil || v.Release == "" {
		return v, err
	}
	if v.CRIO {
		v.BinDir, err = buildCRIO(v.Release, cache)
		return v, err
	}
	v.BinDir, err = buildContainerd(v.Release, cache)
	return v, err
}

// buildContainerd returns the directory under cache holding containerd,
// its runc shim and ctr of release, building them (about 2 minutes) when
// missing.
func buildContainerd(release, cache string) (string, error) {
	dir := filepath.Join(cache, "containerd-"+release)
	return dir, buildLocked(dir, cache, containerdBinaries, func(out string) error {
		src, err := downloadModule(containerdModule(release), "v"+release)
		if err != nil {
			return err
		}
		args := []string{"build", "-trimpath", "-tags", "no_btrfs no_devmapper no_zfs",
			"-ldflags", "-s -w -X " + containerdModule(release) + "/version.Version=v" + release, "-o", out + "/"}
		for _, b := range containerdBinaries {
			args = append(args, "./cmd/"+b)
		}
		cmd := exec.Command("go", args...)
		cmd.Dir = src // `go install` refuses the module for its exclude lines
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-buildvcs=false", "GOWORK=off", "GO111MODULE=on")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build containerd %s: %w\n%s", release, err, out)
		}
		return nil
	})
}

// buildLocked makes sure dir holds every one of binaries, running build
// with a fresh directory to put them in when it does not. The build goes
// to a temporary directory renamed into place, so a build cut short leaves
// nothing that looks complete; a lock file makes concurrent test binaries
// wait for one build instead of racing.
func buildLocked(dir, cache string, binaries []string, build func(out string) error) error {
	if haveBinaries(dir, binaries) {
		return nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return fmt.Errorf("create cache dir: %w", err)
	}
	lock, err := os.OpenFile(dir+".lock", os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("lock build of %s: %w", dir, err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX); err != nil {
		return fmt.Errorf("lock build of %s: %w", dir, err)
	}
	defer unix.Flock(int(lock.Fd()), unix.LOCK_UN) //nolint:errcheck // closing releases it too
	if haveBinaries(dir, binaries) {
		return nil // built by another process while we waited
	}
	if err := os.RemoveAll(dir); err != nil { // a partial dir of an older layout
		return fmt.Errorf("remove stale %s: %w", dir, err)
	}
	tmp, err := os.MkdirTemp(cache, "."+filepath.Base(dir)+"-")
	if err != nil {
		return fmt.Errorf("create build dir: %w", err)
	}
	defer os.RemoveAll(tmp) // gone after the rename, or the remains of a failed build
	if err := build(tmp); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil { // MkdirTemp's 0700 would hide it from other users' beds
		return fmt.Errorf("install %s: %w", dir, err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		return fmt.Errorf("install %s: %w", dir, err)
	}
	return nil
}

// haveBinaries reports whether dir holds every one of binaries.
func haveBinaries(dir string, binaries []string) bool {
	for _, b := range binaries {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil {
			return false
		}
	}
	return true
}

// downloadModule fetches module@version into the module cache through the
// Go module proxy and returns its directory there.
func downloadModule(module, version string) (string, error) {
	cmd := exec.Command("go", "mod", "download", "-json", module+"@"+version)
	cmd.Dir = "/" // outside any module: the download is not a dependency of berth
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var info struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &info); jerr != nil && err == nil {
		err = jerr
	}
	if err != nil || info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("download %s@%s: %v %s %s", module, version, err, info.Error, stderr.Bytes())
	}
	if _, err := os.Stat(filepath.Join(info.Dir, "go.mod")); errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("download %s@%s: no go.mod in %s", module, version, info.Dir)
	}
	return info.Dir, nil
}
