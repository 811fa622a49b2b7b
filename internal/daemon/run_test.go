package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/berth-agent/berth/internal/config"
)

// TestRunEndsItsSourcesWhenItCannotStart: the manifest sources start
// before the runtime is dialled (a boot's pods wait for their reading, not
// for the dial), so a berth that then cannot start must end them before it
// returns its error: when run returns, no goroutine of theirs runs. 200
// manifests keep the sources reading well past the failed dial.
func TestRunEndsItsSourcesWhenItCannotStart(t *testing.T) {
	dir := t.TempDir()
	manifests := filepath.Join(dir, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		pod := fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata: {name: web-%d}\nspec:\n  containers:\n  - {name: c, image: busybox}\n", i)
		if err := os.WriteFile(filepath.Join(manifests, fmt.Sprintf("web-%d.yaml", i)), []byte(pod), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := config.Defaults()
	s.HostnameOverride = "node-a"
	s.NodeIP = "192.0.2.1"
	s.PodManifestPath = manifests
	s.RootDir = filepath.Join(dir, "root")
	s.PodLogsDir = filepath.Join(dir, "logs")
	s.Socket = filepath.Join(dir, "berth.sock")
	s.ContainerRuntimeEndpoint = "tcp://127.0.0.1:1"

	err := run(context.Background(), s, "test", slog.New(slog.NewTextHandler(io.Discard, nil)), func() {})
	stacks := make([]byte, 1<<20)
	stacks = stacks[:runtime.Stack(stacks, true)]
	if err == nil || !strings.Contains(err.Error(), `unsupported scheme "tcp"`) {
		t.Fatalf("run = %v, want the endpoint's error", err)
	}
	for _, g := range strings.Split(string(stacks), "\n\n") {
		if strings.Contains(g, "berth/manifest.") || strings.Contains(g, "berth/internal/daemon.run.") {
			t.Fatalf("a goroutine of berth's start outlives run:\n%s", g)
		}
	}
}
