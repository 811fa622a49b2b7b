//go:build e2e

package e2e

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestHostileUIDStaysInsideRoots: a victim directory next to berth's
// --root-dir and --pod-logs-dir, reached by "../../victim" from either.
// A manifest with that metadata.uid is refused as Invalid and never runs;
// an orphan sandbox with that io.kubernetes.pod.uid label and berth's
// ownership label, its log directory in the victim (as a hostile runtime
// object, or one of a second berth, could have it), is stopped and removed
// from the runtime. Through all of it, and after the manifest goes,
// nothing in the victim directory changes.
func TestHostileUIDStaysInsideRoots(t *testing.T) {
	const uid = "../../victim"
	evil := newPod("evil", shContainer("main", sleepForever))
	evil.UID = uid
	b := newBerth(t, berthOptions{noStart: true, manifests: map[string]string{
		"evil.yaml": podManifest(evil),
		"mine.yaml": podManifest(sleeper("mine")),
	}})
	victim := filepath.Join(b.dir, "victim")
	if got := filepath.Join(b.root, "pods", uid); got != victim {
		t.Fatalf("the uid reaches %s, not the victim %s", got, victim)
	}
	if err := os.MkdirAll(victim, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(victim, "keep"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	orphan := runHostileOrphan(t, uid, victim)
	want := treeOf(t, victim)
	t.Logf("victim before berth: %v", want)

	b.start()
	b.waitReady()
	mine := b.waitRunning(podName("mine"))
	b.waitRuntime(podName("mine"), "main", mine.UID)

	p := b.waitPod(podName("evil"), "refused", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	if p.Status.Reason != "Invalid" || !strings.Contains(p.Status.Message, "metadata.uid") {
		t.Errorf("evil pod: reason %q, message %q, want Invalid on metadata.uid", p.Status.Reason, p.Status.Message)
	}
	if sbs, err := sandboxesOf(podName("evil")); err != nil || len(sbs) != 0 {
		t.Errorf("evil pod got sandboxes %v (%v)", sbs, err)
	}

	b.waitFor("the hostile orphan removed from the runtime", 2*time.Minute, func() (bool, string) {
		ctx, cancel := criCtx()
		defer cancel()
		resp, err := bed.Runtime().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{Id: orphan}})
		if err != nil {
			return false, err.Error()
		}
		return len(resp.Items) == 0, fmt.Sprintf("%d sandboxes", len(resp.Items))
	})
	b.removeManifest("evil.yaml")
	b.waitFor("the refused pod gone from /pods", time.Minute, func() (bool, string) {
		p, err := b.apiPod(podName("evil"))
		return err == nil && p == nil, fmt.Sprintf("%v %v", p != nil, err)
	})
	if got := treeOf(t, victim); !slices.Equal(got, want) {
		t.Errorf("victim directory changed: %v, want %v", got, want)
	}
	if _, ok, detail := runtimeState(podName("mine"), "main", mine.UID); !ok {
		t.Errorf("berth's own pod: %s", detail)
	}
}

// runHostileOrphan runs a sandbox with one container through CRI that
// carries berth's ownership label and uid as its pod UID label, with its
// log directory at logDir, and returns the sandbox's ID. berth is expected
// to remove it; what is left is the harness's cleanRuntime's job.
func runHostileOrphan(t *testing.T, uid, logDir string) string {
	t.Helper()
	labels := map[string]string{labelPodName: "orphan", labelPodNamespace: "default", labelPodUID: uid, labelManaged: "true"}
	return runCRIPod(t, "orphan", "orphan", logDir, labels).sandbox.Id
}

// treeOf lists every entry below dir with its type and permissions.
func treeOf(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		out = append(out, fmt.Sprintf("%s %v", strings.TrimPrefix(path, dir), fi.Mode()))
		return nil
	})
	if err != nil {
		t.Errorf("%s: %v", dir, err)
	}
	return out
}
