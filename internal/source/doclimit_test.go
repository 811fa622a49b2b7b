package source

import (
	"path/filepath"
	"testing"

	"github.com/berth-agent/berth/internal/podspec/podspectest"
)

// TestFileSourceTooManyDocuments checks the file source refuses such a
// file and keeps running the others.
func TestFileSourceTooManyDocuments(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), podspectest.Manifest("a", "img:1"))
	write(t, filepath.Join(dir, "many.yaml"), string(podspectest.Pods(100_000)))
	st := watchedSource(t, Config{ManifestPath: dir, MaxPods: 10})
	if got := next(t, st); got != "ADD a-node1 img:1" {
		t.Fatalf("initial: %q", got)
	}
	if got := problemsOf(st); got != "TooManyDocuments many.yaml " {
		t.Errorf("problems %q", got)
	}
}
