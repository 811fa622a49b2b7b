package testbed

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"runtime"
	"sort"
	"time"
)

// Media types and annotations of the OCI image layout written here. The
// layers are plain (uncompressed) tars: that keeps the build deterministic
// across Go versions and costs nothing on a local disk.
const (
	mediaTypeIndex    = "application/vnd.oci.image.index.v1+json"
	mediaTypeManifest = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeConfig   = "application/vnd.oci.image.config.v1+json"
	mediaTypeLayer    = "application/vnd.oci.image.layer.v1.tar"

	// annotationRefName is the OCI tag, which skopeo selects with
	// oci-archive:FILE:TAG.
	annotationRefName = "org.opencontainers.image.ref.name"
	// annotationImageName is the full reference `ctr images import` names
	// the image after, so no --base-name guessing is needed.
	annotationImageName = "io.containerd.image.name"
)

// buildEpoch is the fixed timestamp of every file and of the image
// configs: the same inputs must give the same digests, build after build.
var buildEpoch = time.Date(2023, time.May, 18, 0, 0, 0, 0, time.UTC)

// fileEntry is one entry of a layer tar. Exactly one of Dir, Link or Data
// describes it; Data may be empty for an empty file.
type fileEntry struct {
	Path string // relative, without a leading slash
	Mode int64
	Dir  bool
	Link string // symlink target
	Data []byte
}

// imageSpec is what an image is made of, before it is serialized.
type imageSpec struct {
	Ref        string // full reference, e.g. docker.io/library/busybox:1.36
	Tag        string // the tag alone, the OCI ref.name
	Entrypoint []string
	Cmd        []string
	Env        []string
	Files      []fileEntry
}

// descriptor is an OCI content descriptor.
type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Platform    *platform         `json:"platform,omitempty"`
}

type platform struct {
	Architecture string `json:"architecture"`
	OS           string `json:"os"`
}

type imageIndex struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

type imageManifest struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        descriptor   `json:"config"`
	Layers        []descriptor `json:"layers"`
}

type imageConfig struct {
	Created      string          `json:"created"`
	Architecture string          `json:"architecture"`
	OS           string          `json:"os"`
	Config       imageRunConfig  `json:"config"`
	RootFS       imageRootFS     `json:"rootfs"`
	History      []imageHistItem `json:"history"`
}

type imageRunConfig struct {
	Env        []string `json:"Env,omitempty"`
	Entrypoint []string `json:"Entrypoint,omitempty"`
	Cmd        []string `json:"Cmd,omitempty"`
	WorkingDir string   `json:"WorkingDir,omitempty"`
}

type imageRootFS struct {
	Type    string   `json:"type"`
	DiffIDs []string `json:"diff_ids"`
}

type imageHistItem struct {
	Created   string `json:"created"`
	CreatedBy string `json:"created_by"`
}

// blob is a piece of content addressed by its digest.
type blob struct {
	Digest string
	Data   []byte
}

// builtImage is an image serialized into blobs, with the descriptor of its
// manifest as it goes into index.json.
type builtImage struct {
	Manifest descriptor
	Blobs    []blob
}

// digestOf returns the OCI digest ("sha256:HEX") of data.
func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// layerTar serializes files into a tar with fixed owners and timestamps, in
// path order, so equal inputs give byte-equal layers. Parent directories
// must be listed explicitly: a layer with implicit directories unpacks with
// surprising modes.
func layerTar(files []fileEntry) ([]byte, error) {
	sorted := append([]fileEntry(nil), files...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Path < sorted[j].Path })
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for i, f := range sorted {
		if i > 0 && sorted[i-1].Path == f.Path {
			return nil, fmt.Errorf("layer entry %q listed twice", f.Path)
		}
		hdr := &tar.Header{
			Name:    f.Path,
			Mode:    f.Mode,
			ModTime: buildEpoch,
			Format:  tar.FormatPAX,
		}
		switch {
		case f.Dir:
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
		case f.Link != "":
			hdr.Typeflag = tar.TypeSymlink
			hdr.Linkname = f.Link
		default:
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(f.Data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("layer entry %q: %w", f.Path, err)
		}
		if hdr.Typeflag == tar.TypeReg {
			if _, err := tw.Write(f.Data); err != nil {
				return nil, fmt.Errorf("layer entry %q: %w", f.Path, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close layer tar: %w", err)
	}
	return buf.Bytes(), nil
}

// build serializes the image for the machine's architecture: one layer, its
// config and its manifest.
func (s imageSpec) build() (builtImage, error) {
	layer, err := layerTar(s.Files)
	if err != nil {
		return builtImage{}, fmt.Errorf("image %s: %w", s.Ref, err)
	}
	layerDigest := digestOf(layer)
	created := buildEpoch.Format(time.RFC3339)
	cfg, err := json.Marshal(imageConfig{
		Created:      created,
		Architecture: runtime.GOARCH,
		OS:           "linux",
		Config: imageRunConfig{
			Env:        s.Env,
			Entrypoint: s.Entrypoint,
			Cmd:        s.Cmd,
			WorkingDir: "/",
		},
		// The layer is uncompressed, so its diff ID is its digest.
		RootFS:  imageRootFS{Type: "layers", DiffIDs: []string{layerDigest}},
		History: []imageHistItem{{Created: created, CreatedBy: "berth testbed"}},
	})
	if err != nil {
		return builtImage{}, fmt.Errorf("image %s: config: %w", s.Ref, err)
	}
	man, err := json.Marshal(imageManifest{
		SchemaVersion: 2,
		MediaType:     mediaTypeManifest,
		Config:        descriptor{MediaType: mediaTypeConfig, Digest: digestOf(cfg), Size: int64(len(cfg))},
		Layers:        []descriptor{{MediaType: mediaTypeLayer, Digest: layerDigest, Size: int64(len(layer))}},
	})
	if err != nil {
		return builtImage{}, fmt.Errorf("image %s: manifest: %w", s.Ref, err)
	}
	return builtImage{
		Manifest: descriptor{
			MediaType: mediaTypeManifest,
			Digest:    digestOf(man),
			Size:      int64(len(man)),
			Annotations: map[string]string{
				annotationImageName: s.Ref,
				annotationRefName:   s.Tag,
			},
			Platform: &platform{Architecture: runtime.GOARCH, OS: "linux"},
		},
		Blobs: []blob{{digestOf(layer), layer}, {digestOf(cfg), cfg}, {digestOf(man), man}},
	}, nil
}

// writeLayout writes images as one OCI image layout tarball (oci-layout,
// index.json, blobs/sha256/...), deterministically. Blobs shared between
// images are written once.
func writeLayout(w io.Writer, images ...builtImage) error {
	index := imageIndex{SchemaVersion: 2, MediaType: mediaTypeIndex}
	blobs := map[string][]byte{}
	for _, img := range images {
		index.Manifests = append(index.Manifests, img.Manifest)
		for _, b := range img.Blobs {
			blobs[b.Digest] = b.Data
		}
	}
	indexJSON, err := json.Marshal(index)
	if err != nil {
		return fmt.Errorf("marshal index.json: %w", err)
	}
	digests := make([]string, 0, len(blobs))
	for d := range blobs {
		digests = append(digests, d)
	}
	sort.Strings(digests)

	tw := tar.NewWriter(w)
	write := func(name string, mode int64, data []byte, dir bool) error {
		hdr := &tar.Header{Name: name, Mode: mode, ModTime: buildEpoch, Typeflag: tar.TypeReg, Size: int64(len(data))}
		if dir {
			hdr.Typeflag, hdr.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("layout entry %q: %w", name, err)
		}
		if _, err := tw.Write(data); err != nil {
			return fmt.Errorf("layout entry %q: %w", name, err)
		}
		return nil
	}
	if err := write("oci-layout", 0o644, []byte(`{"imageLayoutVersion":"1.0.0"}`), false); err != nil {
		return err
	}
	if err := write("index.json", 0o644, indexJSON, false); err != nil {
		return err
	}
	if err := write("blobs/", 0o755, nil, true); err != nil {
		return err
	}
	if err := write("blobs/sha256/", 0o755, nil, true); err != nil {
		return err
	}
	for _, d := range digests {
		if err := write(path.Join("blobs/sha256", d[len("sha256:"):]), 0o644, blobs[d], false); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("close layout tar: %w", err)
	}
	return nil
}
