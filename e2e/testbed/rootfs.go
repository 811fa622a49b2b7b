package testbed

import (
	"bytes"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
)

// The images every bed imports. Manifests and examples name them as
// `busybox:1.36` and containerd's sandbox_image points at the pause image,
// so nothing is ever pulled from the internet.
const (
	BusyboxRef = "docker.io/library/busybox:1.36"
	PauseRef   = "registry.k8s.io/pause:3.9"
)

// imageFormat versions the way images are built: bump it whenever the
// specs below change, so cached archives of the old shape are not reused.
const imageFormat = "1"

// defaultPath is the PATH of both images, the one Docker's busybox has.
const defaultPath = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// busyboxSpec is a busybox image much like Docker Hub's: the static binary,
// one symlink per applet (paths as `busybox --list-full` gives them), root
// and nobody accounts, and the usual directories, so sh, httpd, sleep, cat,
// nc and wget work as tests expect.
func busyboxSpec(binary []byte, applets []string) imageSpec {
	dirs := map[string]int64{
		"bin": 0o755, "dev": 0o755, "etc": 0o755, "home": 0o755, "proc": 0o755,
		"root": 0o700, "run": 0o755, "sys": 0o755, "tmp": 0o1777, "usr": 0o755,
		"var": 0o755, "var/www": 0o755, "var/tmp": 0o1777,
	}
	files := []fileEntry{
		{Path: "bin/busybox", Mode: 0o755, Data: binary},
		{Path: "etc/passwd", Mode: 0o644, Data: []byte(
			"root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/home:/bin/false\n")},
		{Path: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnobody:x:65534:\n")},
	}
	for _, a := range applets {
		a = strings.TrimPrefix(a, "/")
		if a == "" || a == "bin/busybox" {
			continue
		}
		for d := path.Dir(a); d != "."; d = path.Dir(d) {
			if _, ok := dirs[d]; !ok {
				dirs[d] = 0o755
			}
		}
		files = append(files, fileEntry{Path: a, Mode: 0o777, Link: "/bin/busybox"})
	}
	for d, mode := range dirs {
		files = append(files, fileEntry{Path: d, Mode: mode, Dir: true})
	}
	return imageSpec{
		Ref:   BusyboxRef,
		Tag:   "1.36",
		Cmd:   []string{"sh"},
		Env:   []string{defaultPath},
		Files: files,
	}
}

// pauseSpec is the sandbox image: just busybox, whose sleep never returns.
// CRI stops sandboxes with SIGKILL, so it needs no signal handling.
func pauseSpec(binary []byte) imageSpec {
	return imageSpec{
		Ref:        PauseRef,
		Tag:        "3.9",
		Entrypoint: []string{"/bin/sleep", "infinity"},
		Env:        []string{defaultPath},
		Files: []fileEntry{
			{Path: "bin", Mode: 0o755, Dir: true},
			{Path: "bin/busybox", Mode: 0o755, Data: binary},
			{Path: "bin/sleep", Mode: 0o777, Link: "/bin/busybox"},
		},
	}
}

// listApplets asks the busybox binary which applets it has and where they
// belong (bin/sh, usr/bin/wget, ...).
func listApplets(busybox string) ([]string, error) {
	out, err := exec.Command(busybox, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list-full: %w", busybox, err)
	}
	return strings.Fields(string(out)), nil
}

// imageArchive returns the path of an OCI layout tarball holding the
// busybox and pause images built from the busybox binary, building it into
// cacheDir unless an archive for the same binary is already there. The
// archive is written to a temporary name and renamed, so concurrent beds
// never see a half-written one.
func imageArchive(cacheDir, busybox string) (string, error) {
	if err := checkStatic(busybox); err != nil {
		return "", err
	}
	binary, err := os.ReadFile(busybox)
	if err != nil {
		return "", fmt.Errorf("read busybox binary: %w", err)
	}
	sum := sha256.Sum256(append([]byte(imageFormat+"\x00"), binary...))
	archive := filepath.Join(cacheDir, "images-"+hex.EncodeToString(sum[:8])+".tar")
	if _, err := os.Stat(archive); err == nil {
		return archive, nil
	}
	applets, err := listApplets(busybox)
	if err != nil {
		return "", err
	}
	data, err := buildArchive(binary, applets)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("create image cache: %w", err)
	}
	tmp, err := os.CreateTemp(cacheDir, ".images-*.tar")
	if err != nil {
		return "", fmt.Errorf("create image archive: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return "", fmt.Errorf("write image archive: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("write image archive: %w", err)
	}
	if err := os.Rename(tmp.Name(), archive); err != nil {
		return "", fmt.Errorf("store image archive: %w", err)
	}
	// Archives of an older busybox or image format are of no more use.
	old, _ := filepath.Glob(filepath.Join(cacheDir, "images-*.tar"))
	for _, o := range old {
		if o != archive {
			os.Remove(o)
		}
	}
	return archive, nil
}

// checkStatic fails unless file is a statically linked ELF executable: the
// images hold nothing but busybox, so a dynamic one (Debian's `busybox`
// package rather than `busybox-static`) could not even start.
func checkStatic(file string) error {
	f, err := elf.Open(file)
	if err != nil {
		return fmt.Errorf("read %s: %w", file, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked: the test images need busybox-static (run `make testbed`)", file)
		}
	}
	return nil
}

// buildArchive serializes the busybox and pause images into one OCI
// layout tarball.
func buildArchive(binary []byte, applets []string) ([]byte, error) {
	busyboxImg, err := busyboxSpec(binary, applets).build()
	if err != nil {
		return nil, err
	}
	pauseImg, err := pauseSpec(binary).build()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := writeLayout(&buf, busyboxImg, pauseImg); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
