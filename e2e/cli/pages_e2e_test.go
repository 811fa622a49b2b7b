//go:build e2e

package cli

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-agent/berth/internal/docscheck"
)

// TestGettingStartedPage runs the commands docs/getting-started.md marks
// with <!-- test: getting-started -->, read from the page, against a berth
// on the test bed: a first manifest validated and moved in, the pod looked
// at (pods, describe, logs, events), a broken edit shown as ManifestInvalid
// while the last good version runs, and the manifest removed. The page's
// paths are the packaged berth's; the test points them at its own daemon's
// socket (and BERTH_SOCKET, as under `make demo`) and manifest directory,
// and its `hostname` at the daemon's node.
// Each block runs until it succeeds, as a reader would run it again while
// the pod comes up.
func TestGettingStartedPage(t *testing.T) {
	blocks, err := docscheck.PageBlocks("../../docs/getting-started.md", "getting-started")
	if err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, nil)
	work := t.TempDir()
	bin := filepath.Join(work, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(berthBin, filepath.Join(bin, "berth")); err != nil {
		t.Fatal(err)
	}
	paths := strings.NewReplacer(
		"/run/berth/berth.sock", d.socket,
		"/etc/kubernetes/manifests", d.manifests,
		"/tmp/", work+"/",
	)
	prelude := "set -e\nhostname() { echo " + nodeName + "; }\n"
	for _, b := range blocks {
		script := prelude + paths.Replace(b.Text)
		var out string
		waitFor(t, "the block at docs/getting-started.md:"+strconv.Itoa(b.Line)+" to succeed", func() (bool, string) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "sh", "-c", script)
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "BERTH_SOCKET="+d.socket)
			var buf bytes.Buffer
			cmd.Stdout, cmd.Stderr = &buf, &buf
			err := cmd.Run()
			out = buf.String()
			if err != nil {
				return false, script + "\n--- output\n" + out + "\n--- " + err.Error()
			}
			// The page's logs show what the container printed, once it has.
			if strings.Contains(b.Text, "berth logs hello") && !strings.Contains(out, "hello from hello-") {
				return false, script + "\n--- output\n" + out
			}
			return true, out
		})
		t.Logf("docs/getting-started.md:%d:\n%s", b.Line, out)
	}
	waitFor(t, "the pod to go once the page removed its manifest", func() (bool, string) {
		out, _, _ := berth(t, d, "pods")
		return strings.TrimSpace(out) == "", out
	})
}
