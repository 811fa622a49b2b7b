package testbed

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseContainerd(t *testing.T) {
	tests := []struct {
		name, release, module string
		config                int
		nri                   bool
		wantErr               bool
	}{
		{name: "", config: 2},
		{name: "1.6", config: 2},
		{name: "1.7", release: "1.7.35", module: "github.com/containerd/containerd", config: 2, nri: true},
		{name: "2.1", release: "2.1.9", module: "github.com/containerd/containerd/v2", config: 3, nri: true},
		{name: "v2.2.0", release: "2.2.0", module: "github.com/containerd/containerd/v2", config: 3, nri: true},
		{name: "2.3", release: "2.3.7", module: "github.com/containerd/containerd/v2", config: 4, nri: true},
		{name: "2.4", release: "2.4.2", module: "github.com/containerd/containerd/v2", config: 4, nri: true},
		{name: "2.3.0", release: "2.3.0", module: "github.com/containerd/containerd/v2", config: 4, nri: true},
		{name: "2.10.1", release: "2.10.1", module: "github.com/containerd/containerd/v2", config: 4, nri: true},
		{name: "1.7.20", release: "1.7.20", module: "github.com/containerd/containerd", config: 2, nri: true},
		{name: "1.6.20", wantErr: true},
		{name: "3.0", wantErr: true},
		{name: "2.1.9; rm -rf /", wantErr: true},
		{name: "../2.1.9", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, err := parseContainerd(tt.name)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("parseContainerd(%q) = %+v, want an error", tt.name, v)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseContainerd(%q): %v", tt.name, err)
			}
			if v.Release != tt.release || v.configVersion() != tt.config || v.hasNRI() != tt.nri {
				t.Errorf("parseContainerd(%q) = release %q config %d nri %v, want %q %d %v",
					tt.name, v.Release, v.configVersion(), v.hasNRI(), tt.release, tt.config, tt.nri)
			}
			if tt.release != "" && containerdModule(v.Release) != tt.module {
				t.Errorf("module of %s = %s, want %s", v.Release, containerdModule(v.Release), tt.module)
			}
		})
	}
}

// TestResolveContainerdCached checks that a complete cached build is used
// as is (no go command run) and that its directory leads containerd's PATH,
// so containerd starts the shim of its own version.
func TestResolveContainerdCached(t *testing.T) {
	cache := t.TempDir()
	dir := filepath.Join(cache, "containerd-2.1.9")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range containerdBinaries {
		if err := os.WriteFile(filepath.Join(dir, b), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", "/nonexistent") // a build would fail: no go command
	v, err := resolveContainerd("2.1", cache)
	if err != nil {
		t.Fatalf("resolve: %v", err)
	}
	if v.BinDir != dir || v.bin("ctr") != filepath.Join(dir, "ctr") {
		t.Errorf("resolved %+v, want binaries in %s", v, dir)
	}
	var path string
	for _, kv := range v.env() {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = p
		}
	}
	if path != dir+":/nonexistent" {
		t.Errorf("containerd's PATH = %q, want %q first", path, dir)
	}
}

// TestResolveContainerdIncomplete checks that a cache entry missing a
// binary (a build cut short before the rename cannot leave one, but an
// older layout could) is not taken for a build.
func TestResolveContainerdIncomplete(t *testing.T) {
	cache := t.TempDir()
	dir := filepath.Join(cache, "containerd-1.7.35")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "containerd"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", "/nonexistent")
	if _, err := resolveContainerd("1.7", cache); err == nil {
		t.Fatal("resolve with an incomplete cache entry and no go command succeeded")
	}
}
