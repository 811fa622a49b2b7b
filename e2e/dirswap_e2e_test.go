//go:build e2e

package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestManifestDirectorySwap replaces a running berth's manifest directory
// the way a deploy script does, with two renames (the old one away, the
// new one in) and a gap between them longer than the file source's
// debounce: the pod, whose manifest is the same in both, must keep its
// sandbox and container. Read between the renames, the missing directory
// used to stop every pod and start it again a moment later.
func TestManifestDirectorySwap(t *testing.T) {
	b := newBerth(t, berthOptions{})
	b.waitReady()
	name := podName("swap")
	content := podManifest(sleeper("swap"))
	b.writeManifest("swap.yaml", content)
	before := b.waitRuntime(name, "main", "")

	next := b.manifests + ".new"
	if err := os.Mkdir(next, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(next, "swap.yaml"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(b.manifests, b.manifests+".old"); err != nil {
		t.Fatal(err)
	}
	// The gap is the input: a deploy script's two mv commands on a busy
	// machine, well past the 20 ms debounce and within the 1 s grace.
	time.Sleep(300 * time.Millisecond)
	if err := os.Rename(next, b.manifests); err != nil {
		t.Fatal(err)
	}
	// Past the grace, and a relist or two later, the same pod runs on.
	time.Sleep(2500 * time.Millisecond)
	after := b.waitRuntime(name, "main", "")
	if after.sandbox.Id != before.sandbox.Id || after.container.Id != before.container.Id {
		t.Errorf("pod restarted by the directory swap: sandbox %s -> %s, container %s -> %s",
			shortID(before.sandbox.Id), shortID(after.sandbox.Id), shortID(before.container.Id), shortID(after.container.Id))
	}
	if b.logContains("pod removed") {
		t.Error("berth removed a pod during the directory swap")
	}

	// Deleted for good, the directory's pods go, once the grace is over.
	if err := os.RemoveAll(b.manifests); err != nil {
		t.Fatal(err)
	}
	b.waitGone(name)
}
