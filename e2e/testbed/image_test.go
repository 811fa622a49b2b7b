package testbed

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// readLayout reads an OCI layout tarball into a map of entry name to
// content.
func readLayout(t *testing.T, data []byte) map[string][]byte {
	t.Helper()
	entries := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return entries
		}
		if err != nil {
			t.Fatalf("read layout tar: %v", err)
		}
		if !hdr.ModTime.Equal(buildEpoch) {
			t.Errorf("entry %s has mtime %v, want the fixed %v", hdr.Name, hdr.ModTime, buildEpoch)
		}
		content, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("read %s: %v", hdr.Name, err)
		}
		entries[hdr.Name] = content
	}
}

// blobOf returns the blob the layout holds for digest, checking that its
// content hashes to the digest and has the size the descriptor says.
func blobOf(t *testing.T, layout map[string][]byte, d descriptor) []byte {
	t.Helper()
	data, ok := layout["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
	if !ok {
		t.Fatalf("blob %s missing from the layout", d.Digest)
	}
	if got := digestOf(data); got != d.Digest {
		t.Errorf("blob %s hashes to %s", d.Digest, got)
	}
	if int64(len(data)) != d.Size {
		t.Errorf("blob %s has %d bytes, descriptor says %d", d.Digest, len(data), d.Size)
	}
	return data
}

// layerFiles lists a layer tar's entries by name.
func layerFiles(t *testing.T, layer []byte) map[string]*tar.Header {
	t.Helper()
	files := map[string]*tar.Header{}
	tr := tar.NewReader(bytes.NewReader(layer))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatalf("read layer: %v", err)
		}
		files[strings.TrimSuffix(hdr.Name, "/")] = hdr
	}
}

func TestBuildArchiveConsistent(t *testing.T) {
	binary := []byte("\x7fELF not really busybox")
	applets := []string{"bin/sh", "bin/cat", "bin/sleep", "usr/bin/wget", "usr/sbin/httpd", "usr/bin/nc", "bin/busybox"}
	data, err := buildArchive(binary, applets)
	if err != nil {
		t.Fatalf("buildArchive: %v", err)
	}
	again, err := buildArchive(binary, applets)
	if err != nil {
		t.Fatalf("buildArchive again: %v", err)
	}
	if !bytes.Equal(data, again) {
		t.Errorf("two builds of the same inputs differ: the archive is not deterministic")
	}

	layout := readLayout(t, data)
	if got := string(layout["oci-layout"]); got != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout = %q", got)
	}
	var index imageIndex
	if err := json.Unmarshal(layout["index.json"], &index); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	if index.SchemaVersion != 2 || index.MediaType != mediaTypeIndex {
		t.Errorf("index schema %d media type %q", index.SchemaVersion, index.MediaType)
	}

	tests := []struct {
		ref, tag       string
		entrypoint     []string
		cmd            []string
		wantFiles      []string
		wantLinks      map[string]string
		wantNotPresent []string
	}{
		{
			ref: BusyboxRef, tag: "1.36", cmd: []string{"sh"},
			wantFiles: []string{"bin/busybox", "etc/passwd", "etc/group", "tmp", "var/www", "usr/sbin", "root"},
			wantLinks: map[string]string{"bin/sh": "/bin/busybox", "usr/bin/wget": "/bin/busybox", "usr/sbin/httpd": "/bin/busybox"},
		},
		{
			ref: PauseRef, tag: "3.9", entrypoint: []string{"/bin/sleep", "infinity"},
			wantFiles:      []string{"bin/busybox"},
			wantLinks:      map[string]string{"bin/sleep": "/bin/busybox"},
			wantNotPresent: []string{"bin/sh", "etc/passwd"},
		},
	}
	if len(index.Manifests) != len(tests) {
		t.Fatalf("index has %d manifests, want %d", len(index.Manifests), len(tests))
	}
	for i, tc := range tests {
		t.Run(tc.ref, func(t *testing.T) {
			md := index.Manifests[i]
			if md.Annotations[annotationImageName] != tc.ref || md.Annotations[annotationRefName] != tc.tag {
				t.Errorf("annotations %v, want name %s tag %s", md.Annotations, tc.ref, tc.tag)
			}
			if md.Platform == nil || md.Platform.Architecture != runtime.GOARCH || md.Platform.OS != "linux" {
				t.Errorf("platform %+v, want linux/%s", md.Platform, runtime.GOARCH)
			}
			var man imageManifest
			if err := json.Unmarshal(blobOf(t, layout, md), &man); err != nil {
				t.Fatalf("manifest: %v", err)
			}
			if man.MediaType != mediaTypeManifest || md.MediaType != mediaTypeManifest || man.Config.MediaType != mediaTypeConfig {
				t.Errorf("media types: manifest %q/%q config %q", man.MediaType, md.MediaType, man.Config.MediaType)
			}
			var cfg imageConfig
			if err := json.Unmarshal(blobOf(t, layout, man.Config), &cfg); err != nil {
				t.Fatalf("config: %v", err)
			}
			if len(man.Layers) != 1 || len(cfg.RootFS.DiffIDs) != 1 {
				t.Fatalf("%d layers, %d diff IDs, want 1 and 1", len(man.Layers), len(cfg.RootFS.DiffIDs))
			}
			layer := blobOf(t, layout, man.Layers[0])
			if cfg.RootFS.DiffIDs[0] != digestOf(layer) {
				t.Errorf("diff ID %s is not the uncompressed layer's digest %s", cfg.RootFS.DiffIDs[0], digestOf(layer))
			}
			if strings.Join(cfg.Config.Entrypoint, " ") != strings.Join(tc.entrypoint, " ") || strings.Join(cfg.Config.Cmd, " ") != strings.Join(tc.cmd, " ") {
				t.Errorf("entrypoint %q cmd %q, want %q %q", cfg.Config.Entrypoint, cfg.Config.Cmd, tc.entrypoint, tc.cmd)
			}
			if cfg.Architecture != runtime.GOARCH || cfg.OS != "linux" {
				t.Errorf("config platform %s/%s", cfg.OS, cfg.Architecture)
			}
			files := layerFiles(t, layer)
			for _, f := range tc.wantFiles {
				if files[f] == nil {
					t.Errorf("layer lacks %s", f)
				}
			}
			for f, target := range tc.wantLinks {
				if h := files[f]; h == nil || h.Typeflag != tar.TypeSymlink || h.Linkname != target {
					t.Errorf("%s: %+v, want a symlink to %s", f, h, target)
				}
			}
			for _, f := range tc.wantNotPresent {
				if files[f] != nil {
					t.Errorf("layer has %s, want a minimal rootfs", f)
				}
			}
			for name, h := range files {
				if d := strings.TrimSuffix(name[:max(strings.LastIndex(name, "/"), 0)], "/"); d != "" && files[d] == nil {
					t.Errorf("%s's parent %s is not in the layer", name, d)
				}
				if h.Uid != 0 || h.Gid != 0 {
					t.Errorf("%s owned by %d:%d, want root", name, h.Uid, h.Gid)
				}
			}
			if files["bin/busybox"] != nil && files["bin/busybox"].Typeflag != tar.TypeReg {
				t.Errorf("bin/busybox is not the binary itself")
			}
			if h := files["tmp"]; h != nil && h.Mode != 0o1777 {
				t.Errorf("tmp mode %o, want 1777", h.Mode)
			}
		})
	}
}

func TestLayerTarRejectsDuplicates(t *testing.T) {
	_, err := layerTar([]fileEntry{{Path: "bin", Dir: true}, {Path: "bin", Dir: true}})
	if err == nil {
		t.Fatal("layerTar accepted a path listed twice")
	}
}

func TestImageArchiveCache(t *testing.T) {
	if _, err := os.Stat("/usr/bin/busybox"); err != nil {
		t.Skipf("no busybox here (run `make testbed`): %v", err)
	}
	cache := t.TempDir()
	stale := filepath.Join(cache, "images-0000000000000000.tar")
	if err := os.WriteFile(stale, []byte("an older build"), 0o644); err != nil {
		t.Fatal(err)
	}
	first, err := imageArchive(cache, "/usr/bin/busybox")
	if err != nil {
		t.Fatalf("imageArchive: %v", err)
	}
	info, err := os.Stat(first)
	if err != nil {
		t.Fatalf("cached archive: %v", err)
	}
	second, err := imageArchive(cache, "/usr/bin/busybox")
	if err != nil {
		t.Fatalf("imageArchive from cache: %v", err)
	}
	again, err := os.Stat(second)
	if err != nil {
		t.Fatalf("cached archive: %v", err)
	}
	if first != second || !os.SameFile(info, again) || !info.ModTime().Equal(again.ModTime()) {
		t.Errorf("second call rebuilt the archive (%s, %s) instead of reusing it", first, second)
	}
	entries, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("cache holds %d entries, want just the archive (no temporary, no stale build left)", len(entries))
	}
}
