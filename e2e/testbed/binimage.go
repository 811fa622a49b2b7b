package testbed

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// BinaryImageArchive writes archive, an OCI layout tarball of one image
// named ref holding binaries (host files, statically linked: the image has
// no libraries) in /usr/local/bin under their base names, on the PATH, with
// an empty /tmp. It is how the tests make the control-plane images kubeadm's
// manifests name (kube-apiserver, etcd, ...) without a registry. The
// archive is written to a temporary file renamed into place, so a cut
// build leaves no archive. ref is a full reference with a tag.
func BinaryImageArchive(archive, ref string, binaries []string) error {
	_, tag, ok := strings.Cut(ref[strings.LastIndex(ref, "/")+1:], ":")
	if !ok || tag == "" {
		return fmt.Errorf("binary image %q: the reference needs a tag", ref)
	}
	files := []fileEntry{
		{Path: "usr", Mode: 0o755, Dir: true},
		{Path: "usr/local", Mode: 0o755, Dir: true},
		{Path: "usr/local/bin", Mode: 0o755, Dir: true},
		{Path: "tmp", Mode: 0o1777, Dir: true},
	}
	for _, bin := range binaries {
		data, err := os.ReadFile(bin)
		if err != nil {
			return fmt.Errorf("binary image %q: %w", ref, err)
		}
		files = append(files, fileEntry{Path: "usr/local/bin/" + filepath.Base(bin), Mode: 0o755, Data: data})
	}
	img, err := imageSpec{
		Ref: ref, Tag: tag, Files: files,
		Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin"},
	}.build()
	if err != nil {
		return fmt.Errorf("binary image %q: %w", ref, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(archive), "."+filepath.Base(archive)+"-")
	if err != nil {
		return fmt.Errorf("binary image %q: %w", ref, err)
	}
	defer os.Remove(tmp.Name()) // gone after the rename, or the remains of a failed write
	w := bufio.NewWriter(tmp)
	if err := writeLayout(w, img); err != nil {
		tmp.Close()
		return fmt.Errorf("binary image %q: %w", ref, err)
	}
	if err := w.Flush(); err != nil {
		tmp.Close()
		return fmt.Errorf("binary image %q: write %s: %w", ref, archive, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("binary image %q: write %s: %w", ref, archive, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("binary image %q: %w", ref, err)
	}
	if err := os.Rename(tmp.Name(), archive); err != nil {
		return fmt.Errorf("binary image %q: install %s: %w", ref, archive, err)
	}
	return nil
}
