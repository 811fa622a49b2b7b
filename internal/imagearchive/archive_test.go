package imagearchive

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// tarEntry is one entry of a test archive.
type tarEntry struct {
	name     string
	data     []byte
	typ      byte // tar.TypeReg when 0
	linkname string
}

// makeTar serializes entries as a tar.
func makeTar(t testing.TB, entries []tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: e.typ, Linkname: e.linkname}
		if hdr.Typeflag == 0 {
			hdr.Typeflag = tar.TypeReg
		}
		if hdr.Typeflag == tar.TypeReg {
			hdr.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(e.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gz(t testing.TB, data []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func zst(t testing.TB, data []byte) []byte {
	zw, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer zw.Close()
	return zw.EncodeAll(data, nil)
}

func mustJSON(t testing.TB, v any) []byte {
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// testImage is a one-layer image's parts.
type testImage struct {
	layer, config, manifest []byte
}

func newTestImage(t testing.TB, layer []byte, diffID string) testImage {
	if diffID == "" {
		diffID = digestOf(layer)
	}
	cfg := mustJSON(t, map[string]any{"architecture": "amd64", "os": "linux",
		"rootfs": map[string]any{"type": "layers", "diff_ids": []string{diffID}}})
	mt := "application/vnd.oci.image.layer.v1.tar"
	if bytes.HasPrefix(layer, []byte{0x1f, 0x8b}) {
		mt += "+gzip"
	}
	man := mustJSON(t, manifest{SchemaVersion: 2, MediaType: MediaTypeOCIManifest,
		Config: Descriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: digestOf(cfg), Size: int64(len(cfg))},
		Layers: []Descriptor{{MediaType: mt, Digest: digestOf(layer), Size: int64(len(layer))}}})
	return testImage{layer: layer, config: cfg, manifest: man}
}

func blobName(data []byte) string {
	return "blobs/sha256/" + strings.TrimPrefix(digestOf(data), "sha256:")
}

// ociEntries is an OCI layout of img named name.
func ociEntries(t testing.TB, img testImage, name string) []tarEntry {
	idx := mustJSON(t, map[string]any{"schemaVersion": 2, "manifests": []any{map[string]any{
		"mediaType": MediaTypeOCIManifest, "digest": digestOf(img.manifest), "size": len(img.manifest),
		"annotations": map[string]string{"io.containerd.image.name": name}}}})
	return []tarEntry{
		{name: "oci-layout", data: []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{name: "index.json", data: idx},
		{name: "blobs/", typ: tar.TypeDir},
		{name: "blobs/sha256/", typ: tar.TypeDir},
		{name: blobName(img.layer), data: img.layer},
		{name: blobName(img.config), data: img.config},
		{name: blobName(img.manifest), data: img.manifest},
	}
}

// dockerEntries is a legacy `docker save` archive of img tagged tag, its
// layer stored once and linked from a second directory as docker does
// for a shared layer.
func dockerEntries(t testing.TB, img testImage, tag string) []tarEntry {
	man := mustJSON(t, []dockerManifest{{Config: "cfg.json", RepoTags: []string{tag}, Layers: []string{"l1/layer.tar"}}})
	return []tarEntry{
		{name: "manifest.json", data: man},
		{name: "cfg.json", data: img.config},
		{name: "l0/", typ: tar.TypeDir},
		{name: "l0/layer.tar", data: img.layer},
		{name: "l1/", typ: tar.TypeDir},
		{name: "l1/layer.tar", typ: tar.TypeSymlink, linkname: "../l0/layer.tar"},
	}
}

func writeFile(t testing.TB, data []byte) string {
	p := filepath.Join(t.TempDir(), "img.tar")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRead(t *testing.T) {
	layer := makeTar(t, []tarEntry{{name: "hello", data: []byte("hi")}})
	img := newTestImage(t, layer, "")
	gzLayer := gz(t, layer)
	gzImg := newTestImage(t, gzLayer, digestOf(layer))
	wrongDiff := newTestImage(t, layer, digestOf([]byte("other")))

	replace := func(es []tarEntry, name string, e tarEntry) []tarEntry {
		out := append([]tarEntry(nil), es...)
		for i := range out {
			if out[i].name == name {
				out[i] = e
				return out
			}
		}
		return append(out, e)
	}
	oci := ociEntries(t, img, "example.com/app:1")
	small := DefaultLimits()
	small.JSONBytes = 64
	few := DefaultLimits()
	few.Entries = 3
	tiny := DefaultLimits()
	tiny.ArchiveBytes = 100
	bomb := DefaultLimits()
	bomb.TotalBytes = 1 << 10
	entryLim := DefaultLimits()
	entryLim.EntryBytes = 4000

	tests := []struct {
		name    string
		archive []byte
		limits  Limits
		format  Format
		names   []string
		layerMT string
		wantErr string
	}{
		{name: "OCI layout", archive: makeTar(t, oci), format: FormatOCI, names: []string{"example.com/app:1"}, layerMT: "application/vnd.oci.image.layer.v1.tar"},
		{name: "OCI layout, gzip", archive: gz(t, makeTar(t, oci)), format: FormatOCI, names: []string{"example.com/app:1"}},
		{name: "OCI layout, zstd", archive: zst(t, makeTar(t, oci)), format: FormatOCI, names: []string{"example.com/app:1"}},
		{name: "OCI layout, gzip layer", archive: makeTar(t, ociEntries(t, gzImg, "example.com/app:1")), format: FormatOCI, names: []string{"example.com/app:1"}, layerMT: "application/vnd.oci.image.layer.v1.tar+gzip"},
		{name: "docker archive, linked layer", archive: makeTar(t, dockerEntries(t, img, "app:1")), format: FormatDocker, names: []string{"app:1"}, layerMT: MediaTypeDockerLayer},
		{name: "docker archive, gzip layer", archive: makeTar(t, dockerEntries(t, gzImg, "app:1")), format: FormatDocker, names: []string{"app:1"}, layerMT: MediaTypeDockerLayerGz},

		{name: "not an image", archive: makeTar(t, []tarEntry{{name: "etc/passwd", data: []byte("root")}}), wantErr: "neither a docker archive"},
		{name: "not a tar", archive: []byte("hello, this is not a tar archive at all, but it is long enough to be read as a header block........................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................................."), wantErr: "not a readable tar"},
		{name: "path with ..", archive: makeTar(t, replace(oci, "x", tarEntry{name: "blobs/../../evil", data: []byte("x")})), wantErr: `entry "blobs/../../evil": path with a .. element`},
		{name: "absolute path", archive: makeTar(t, replace(oci, "x", tarEntry{name: "/etc/cron.d/x", data: []byte("x")})), wantErr: "absolute"},
		{name: "symlink out", archive: makeTar(t, replace(oci, "x", tarEntry{name: "blobs/x", typ: tar.TypeSymlink, linkname: "../../etc/shadow"})), wantErr: "out of the archive"},
		{name: "absolute symlink", archive: makeTar(t, replace(oci, "x", tarEntry{name: "blobs/x", typ: tar.TypeSymlink, linkname: "/etc/shadow"})), wantErr: "link to the absolute path"},
		{name: "hard link out", archive: makeTar(t, replace(oci, "x", tarEntry{name: "x", typ: tar.TypeLink, linkname: "../etc/shadow"})), wantErr: "out of the archive"},
		{name: "device", archive: makeTar(t, replace(oci, "x", tarEntry{name: "dev", typ: tar.TypeChar})), wantErr: "neither a file, a directory nor a link"},
		{name: "blob not its digest", archive: makeTar(t, replace(oci, blobName(img.layer), tarEntry{name: blobName(img.layer), data: append([]byte("X"), layer[1:]...)})), wantErr: "its content has digest"},
		{name: "blob missing", archive: makeTar(t, replace(oci, blobName(img.layer), tarEntry{name: "other", data: layer})), wantErr: "missing"},
		{name: "diff ID mismatch", archive: makeTar(t, ociEntries(t, wrongDiff, "example.com/app:1")), wantErr: "not the diff ID"},
		{name: "docker diff ID mismatch", archive: makeTar(t, dockerEntries(t, wrongDiff, "app:1")), wantErr: "not the diff ID"},
		{name: "no name", archive: makeTar(t, ociEntries(t, img, "")), wantErr: "no image name"},
		{name: "JSON over the limit", archive: makeTar(t, oci), limits: small, wantErr: "index.json: not a JSON document of at most the JSON limit"},
		{name: "too many entries", archive: makeTar(t, oci), limits: few, wantErr: "more than 3 entries"},
		{name: "archive too big", archive: makeTar(t, oci), limits: tiny, wantErr: "more than the limit of 100"},
		{name: "decompression bomb", archive: gz(t, makeTar(t, append(oci, tarEntry{name: "zeros", data: make([]byte, 1<<20)}))), limits: bomb, wantErr: "decompresses to more than the limit of 1024 bytes"},
		{name: "entry too big", archive: makeTar(t, append(oci, tarEntry{name: "zeros", data: make([]byte, 5000)})), limits: entryLim, wantErr: `entry "zeros": 5000 bytes`},
		{name: "duplicate entry", archive: makeTar(t, append(oci, oci[1])), wantErr: `entry "index.json" twice`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := tt.limits
			if lim == (Limits{}) {
				lim = DefaultLimits()
			}
			p := writeFile(t, tt.archive)
			a, err := Read(p, lim)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), p) {
					t.Fatalf("Read = %v, want an error naming %s with %q", err, p, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if a.Format != tt.format || len(a.Images) != 1 || strings.Join(a.Images[0].Names, ",") != strings.Join(tt.names, ",") {
				t.Fatalf("Read = %s %+v, want %s %v", a.Format, a.Images, tt.format, tt.names)
			}
			checkBlobs(t, a, tt.layerMT)
		})
	}
}

// checkBlobs checks that every blob the archive's image reaches is there,
// after the blobs it refers to, and that StreamLayers gives each layer's
// bytes.
func checkBlobs(t *testing.T, a *Archive, layerMT string) {
	t.Helper()
	written := map[string]bool{}
	for _, b := range a.Blobs {
		for _, r := range b.Refs {
			if !written[r] {
				t.Errorf("blob %s before %s, which it refers to", b.Digest, r)
			}
		}
		if b.Data != nil && digestOf(b.Data) != b.Digest {
			t.Errorf("blob %s holds data of digest %s", b.Digest, digestOf(b.Data))
		}
		if b.Uncompressed != "" && layerMT != "" && b.MediaType != layerMT {
			t.Errorf("layer %s has media type %s, want %s", b.Digest, b.MediaType, layerMT)
		}
		written[b.Digest] = true
	}
	if !written[a.Images[0].Target.Digest] {
		t.Errorf("the image's target %s is not among the blobs", a.Images[0].Target.Digest)
	}
	layers := 0
	err := a.StreamLayers(func(Blob) bool { return false }, func(b Blob, r io.Reader) error {
		data, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		if digestOf(data) != b.Digest {
			t.Errorf("layer %s streamed with digest %s", b.Digest, digestOf(data))
		}
		layers++
		return nil
	})
	if err != nil || layers != 1 {
		t.Fatalf("StreamLayers = %v after %d layers, want 1 layer", err, layers)
	}
}

// TestStreamLayersChanged: an archive replaced between Read and the
// import is refused, not imported.
func TestStreamLayersChanged(t *testing.T) {
	layer := makeTar(t, []tarEntry{{name: "hello", data: []byte("hi")}})
	img := newTestImage(t, layer, "")
	p := writeFile(t, makeTar(t, dockerEntries(t, img, "app:1")))
	a, err := Read(p, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	changed := dockerEntries(t, img, "app:1")
	changed[3].data = append([]byte("X"), layer[1:]...)
	if err := os.WriteFile(p, makeTar(t, changed), 0o600); err != nil {
		t.Fatal(err)
	}
	err = a.StreamLayers(func(Blob) bool { return false }, func(_ Blob, r io.Reader) error {
		_, err := io.Copy(io.Discard, r)
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "changed while it was imported") {
		t.Fatalf("StreamLayers = %v, want the change refused", err)
	}
}

// TestReadRefusesLinksAndFIFOs: the archive's own path is never followed
// nor blocks.
func TestReadRefusesLinksAndFIFOs(t *testing.T) {
	dir := t.TempDir()
	link, fifo := filepath.Join(dir, "link.tar"), filepath.Join(dir, "fifo.tar")
	if err := os.Symlink("/etc/passwd", link); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{link, fifo} {
		if _, err := Read(p, DefaultLimits()); err == nil || !strings.Contains(err.Error(), p) {
			t.Errorf("Read(%s) = %v, want an error naming it", p, err)
		}
	}
}
