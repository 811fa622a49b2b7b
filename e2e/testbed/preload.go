package testbed

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"strings"
)

// Archive formats PreloadImageArchive writes.
const (
	FormatOCI    = "oci"    // an OCI image layout tarball
	FormatDocker = "docker" // a `docker save` tarball (legacy layout)
)

// PreloadImageArchive returns, as format, an image named ref (a full
// reference with a tag) that runs: the host's static busybox as /bin/sh,
// sleep and cat, and a file /ref holding ref, so every name gives an image
// of its own ID. It is what an operator drops into berth's image preload
// directory.
func PreloadImageArchive(ref, format string) ([]byte, error) {
	_, tag, ok := strings.Cut(ref[strings.LastIndex(ref, "/")+1:], ":")
	if !ok || tag == "" {
		return nil, fmt.Errorf("preload image %q: the reference needs a tag", ref)
	}
	if err := checkStatic("/usr/bin/busybox"); err != nil {
		return nil, err
	}
	binary, err := os.ReadFile("/usr/bin/busybox")
	if err != nil {
		return nil, fmt.Errorf("read busybox binary: %w", err)
	}
	spec := imageSpec{
		Ref: ref, Tag: tag, Cmd: []string{"sh"}, Env: []string{defaultPath},
		Files: []fileEntry{
			{Path: "bin", Mode: 0o755, Dir: true},
			{Path: "bin/busybox", Mode: 0o755, Data: binary},
			{Path: "bin/sh", Mode: 0o777, Link: "/bin/busybox"},
			{Path: "bin/sleep", Mode: 0o777, Link: "/bin/busybox"},
			{Path: "bin/cat", Mode: 0o777, Link: "/bin/busybox"},
			{Path: "ref", Mode: 0o644, Data: []byte(ref + "\n")},
		},
	}
	img, err := spec.build()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	switch format {
	case FormatOCI:
		err = writeLayout(&buf, img)
	case FormatDocker:
		err = writeDockerArchive(&buf, ref, img)
	default:
		err = fmt.Errorf("archive format %q", format)
	}
	if err != nil {
		return nil, fmt.Errorf("preload image %q: %w", ref, err)
	}
	return buf.Bytes(), nil
}

// writeDockerArchive writes img as `docker save` does (before Docker 25):
// manifest.json, the config as HEX.json and the layer as HEX/layer.tar.
func writeDockerArchive(w *bytes.Buffer, ref string, img builtImage) error {
	// build's blobs are the layer, the config and the manifest.
	layer, cfg := img.Blobs[0], img.Blobs[1]
	hex := func(d string) string { return strings.TrimPrefix(d, "sha256:") }
	manifest, err := json.Marshal([]map[string]any{{
		"Config": hex(cfg.Digest) + ".json", "RepoTags": []string{ref},
		"Layers": []string{hex(layer.Digest) + "/layer.tar"},
	}})
	if err != nil {
		return err
	}
	tw := tar.NewWriter(w)
	for _, f := range []struct {
		name string
		data []byte
		dir  bool
	}{
		{name: hex(cfg.Digest) + ".json", data: cfg.Data},
		{name: hex(layer.Digest) + "/", dir: true},
		{name: hex(layer.Digest) + "/layer.tar", data: layer.Data},
		{name: "manifest.json", data: manifest},
	} {
		hdr := &tar.Header{Name: f.name, Mode: 0o644, ModTime: buildEpoch, Typeflag: tar.TypeReg, Size: int64(len(f.data))}
		if f.dir {
			hdr.Typeflag, hdr.Mode = tar.TypeDir, 0o755
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}
