package testbed

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestBinaryImageArchive(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "kube-tool")
	if err := os.WriteFile(bin, []byte("\x7fELF not really"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		ref     string
		bins    []string
		wantErr bool
	}{
		{name: "one binary", ref: "registry.berth.test/kube-tool:v1.0.0", bins: []string{bin}},
		{name: "no tag", ref: "registry.berth.test/kube-tool", bins: []string{bin}, wantErr: true},
		{name: "missing binary", ref: "registry.berth.test/kube-tool:v1", bins: []string{filepath.Join(dir, "missing")}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			archive := filepath.Join(t.TempDir(), "image.tar")
			err := BinaryImageArchive(archive, tt.ref, tt.bins)
			if tt.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				if _, serr := os.Stat(archive); serr == nil {
					t.Error("a failed build left an archive")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(archive)
			if err != nil {
				t.Fatal(err)
			}
			layout := readLayout(t, data)
			var index imageIndex
			if err := json.Unmarshal(layout["index.json"], &index); err != nil {
				t.Fatal(err)
			}
			if len(index.Manifests) != 1 || index.Manifests[0].Annotations[annotationImageName] != tt.ref {
				t.Fatalf("index names %+v, want the one image %s", index.Manifests, tt.ref)
			}
			var man imageManifest
			if err := json.Unmarshal(blobOf(t, layout, index.Manifests[0]), &man); err != nil {
				t.Fatal(err)
			}
			var cfg imageConfig
			if err := json.Unmarshal(blobOf(t, layout, man.Config), &cfg); err != nil {
				t.Fatal(err)
			}
			if !slices.Contains(cfg.Config.Env, "PATH=/usr/local/bin:/usr/bin:/bin") {
				t.Errorf("Env = %v, want /usr/local/bin on the PATH", cfg.Config.Env)
			}
			files := layerFiles(t, blobOf(t, layout, man.Layers[0]))
			hdr, ok := files["usr/local/bin/kube-tool"]
			if !ok || hdr.Mode != 0o755 {
				t.Errorf("layer has usr/local/bin/kube-tool %+v, want it executable", hdr)
			}
			if hdr, ok := files["tmp"]; !ok || hdr.Mode != 0o1777 {
				t.Errorf("layer has tmp %+v, want a sticky world-writable directory", hdr)
			}
		})
	}
}
