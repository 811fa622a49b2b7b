//go:build e2e

package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/e2e/testbed"
)

// preloadArchive builds the archive of a runnable image named ref and
// removes the image from the bed when the test ends.
func preloadArchive(t *testing.T, ref, format string) []byte {
	t.Helper()
	data, err := testbed.PreloadImageArchive(ref, format)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = bed.Ctr("images", "rm", ref) })
	return data
}

// dropFile puts data into dir as name: written as a dotfile and renamed
// into place when rename is set (what docs/air-gapped.md recommends),
// else written in place, which berth reads once the file is closed.
func dropFile(t *testing.T, dir, name string, data []byte, rename bool) {
	t.Helper()
	if !rename {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
		return
	}
	tmp := filepath.Join(dir, "."+name+".part")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// gzipped compresses data.
func gzipped(t *testing.T, data []byte) []byte {
	t.Helper()
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

// withTarEntry appends one entry to a tar archive.
func withTarEntry(t *testing.T, archive []byte, name string, data []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tr := tar.NewReader(bytes.NewReader(archive))
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(data))}); err != nil {
		t.Fatal(err)
	}
	if _, err := tw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// corruptBlob flips a byte in the middle of the largest entry (the
// layer) of a tar. tar.Reader's Next reads an entry's header only, so
// the reader's position after it is where the entry's data starts.
func corruptBlob(t *testing.T, archive []byte) []byte {
	t.Helper()
	out := append([]byte(nil), archive...)
	rd := bytes.NewReader(out)
	tr := tar.NewReader(rd)
	var at, size int64
	for {
		hdr, err := tr.Next()
		if err != nil {
			break
		}
		if hdr.Size > size {
			size, at = hdr.Size, int64(len(out)-rd.Len())
		}
	}
	if size == 0 {
		t.Fatal("no entry with data")
	}
	out[at+size/2] ^= 0xff
	return out
}

// preloadEvents are berth's events on the preloader's object.
func (b *berth) preloadEvents() ([]v1.Event, error) {
	code, body, err := b.getUnix("/events")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("events: %d %s", code, body)
	}
	var list v1.EventList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, err
	}
	var out []v1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Name == "image-preload" {
			out = append(out, e)
		}
	}
	return out, nil
}

// waitPreloadEvent waits for an event of the preloader with reason whose
// message holds every one of msgs.
func (b *berth) waitPreloadEvent(reason string, msgs ...string) {
	b.t.Helper()
	b.waitFor(fmt.Sprintf("preload event %s %q", reason, msgs), waitTimeout, func() (bool, string) {
		events, err := b.preloadEvents()
		if err != nil {
			return false, err.Error()
		}
		var seen []string
	next:
		for _, e := range events {
			seen = append(seen, e.Reason+": "+e.Message)
			if e.Reason != reason {
				continue
			}
			for _, m := range msgs {
				if !strings.Contains(e.Message, m) {
					continue next
				}
			}
			return true, ""
		}
		return false, strings.Join(seen, "\n")
	})
}

// imageStatus is CRI's ImageStatus of ref.
func imageStatus(t *testing.T, ref string) *runtimeapi.Image {
	t.Helper()
	ctx, cancel := criCtx()
	defer cancel()
	resp, err := bed.Images().ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatalf("image status of %s: %v", ref, err)
	}
	return resp.GetImage()
}

// listsImage reports whether CRI's ListImages has an image tagged ref.
func listsImage(t *testing.T, ref string) bool {
	t.Helper()
	ctx, cancel := criCtx()
	defer cancel()
	resp, err := bed.Images().ListImages(ctx, &runtimeapi.ListImagesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range resp.GetImages() {
		for _, tag := range img.RepoTags {
			if tag == ref {
				return true
			}
		}
	}
	return false
}

// pinsImages reports whether the bed's containerd reports the pin label
// as ImageStatus's pinned: 1.7 and later, not 1.6.
func pinsImages() bool {
	return !strings.HasPrefix(strings.TrimPrefix(bed.ContainerdVersion, "v"), "1.6")
}

// TestPreloadImportsArchives: with no registry, a docker archive (renamed
// into place) and a gzipped OCI layout (written in place) dropped into
// the preload directory while berth runs are imported: CRI lists them,
// and pods with imagePullPolicy Never and IfNotPresent run from them. An
// archive with a path traversal and one with a corrupt layer are refused
// with events naming them, counted, and import nothing, while the good
// ones import. After a restart, a pod whose image is in an archive
// already in the directory waits for its import instead of failing a
// pull.
func TestPreloadImportsArchives(t *testing.T) {
	const (
		dockerRef = "docker.io/library/berth-preload-docker:1"
		ociRef    = "example.invalid/berth/preload-oci:1"
		bootRef   = "example.invalid/berth/preload-boot:1"
		evilRef   = "example.invalid/berth/preload-evil:1"
	)
	dockerArchive := preloadArchive(t, dockerRef, testbed.FormatDocker)
	ociArchive := preloadArchive(t, ociRef, testbed.FormatOCI)
	evil := withTarEntry(t, preloadArchive(t, evilRef, testbed.FormatOCI), "blobs/../../../etc/berth-evil", []byte("x"))
	corrupt := corruptBlob(t, preloadArchive(t, evilRef, testbed.FormatOCI))

	b := newBerth(t, berthOptions{})
	b.waitReady()
	dir := filepath.Join(b.root, "images")
	never := newPod("never", shContainer("app", sleepForever))
	never.Spec.Containers[0].Image, never.Spec.Containers[0].ImagePullPolicy = "berth-preload-docker:1", v1.PullNever
	b.writeManifest("never.yaml", podManifest(never))
	b.waitEvent(podName("never"), "ErrImageNeverPull", "berth-preload-docker:1")

	dropFile(t, dir, "evil.tar", evil, true)
	dropFile(t, dir, "corrupt.tar", corrupt, false)
	dropFile(t, dir, "docker.tar", dockerArchive, true)
	dropFile(t, dir, "oci.tar.gz", gzipped(t, ociArchive), false)

	b.waitPreloadEvent("PreloadFailed", filepath.Join(dir, "evil.tar"), "path with a .. element")
	b.waitPreloadEvent("PreloadFailed", filepath.Join(dir, "corrupt.tar"), "its content has digest")
	b.waitPreloadEvent("Preloaded", dockerRef, filepath.Join(dir, "docker.tar"), "docker-archive")
	b.waitPreloadEvent("Preloaded", ociRef, filepath.Join(dir, "oci.tar.gz"), "oci-layout")
	if _, err := os.Stat("/etc/berth-evil"); err == nil {
		t.Error("/etc/berth-evil exists")
	}
	for ref, want := range map[string]bool{dockerRef: true, ociRef: true, evilRef: false} {
		if img := imageStatus(t, ref); (img != nil) != want || listsImage(t, ref) != want {
			t.Errorf("CRI has %s: %v, want %v", ref, img != nil, want)
		} else if want && img.Pinned != pinsImages() {
			t.Errorf("CRI reports %s pinned %v on containerd %s, want %v", ref, img.Pinned, bed.ContainerdVersion, pinsImages())
		}
	}
	for series, want := range map[string]float64{
		`berth_image_preload_total{result="imported"}`: 2,
		`berth_image_preload_total{result="refused"}`:  2,
	} {
		if v, detail := b.metric(series); v != want {
			t.Errorf("%s = %v, want %v (%s)", series, v, want, detail)
		}
	}

	b.waitRunning(podName("never"))
	ifNotPresent := newPod("ifnotpresent", shContainer("app", "cat /ref; "+sleepForever))
	ifNotPresent.Spec.Containers[0].Image, ifNotPresent.Spec.Containers[0].ImagePullPolicy = ociRef, v1.PullIfNotPresent
	b.writeManifest("ifnotpresent.yaml", podManifest(ifNotPresent))
	b.waitRunning(podName("ifnotpresent"))

	// An archive already there at start is pending from the start: the
	// pod that needs it waits for it rather than failing a pull.
	b.stop()
	dropFile(t, dir, "boot.tar", preloadArchive(t, bootRef, testbed.FormatDocker), true)
	boot := newPod("boot", shContainer("app", sleepForever))
	boot.Spec.Containers[0].Image, boot.Spec.Containers[0].ImagePullPolicy = bootRef, v1.PullIfNotPresent
	b.writeManifest("boot.yaml", podManifest(boot))
	b.start()
	b.waitRunning(podName("boot"))
	if e := b.findEvent(podName("boot"), "Failed", ""); e != nil {
		t.Errorf("the boot pod failed a pull: %s", e.Message)
	}
	if e := b.findEvent(podName("boot"), "Pulling", ""); e != nil {
		t.Errorf("the boot pod pulled its image: %s", e.Message)
	}
}

// TestPreloadGCKeepsPreloadedAndRollbackImages: image GC under disk
// pressure (every image a candidate, any use too much) removes an image
// nothing needs, but keeps the preloaded image no pod uses and the image
// of a pod's last Ready version, which its current version no longer
// uses and a rollback would run.
func TestPreloadGCKeepsPreloadedAndRollbackImages(t *testing.T) {
	const (
		victim    = "docker.io/library/berth-preload-victim:1"
		preloaded = "example.invalid/berth/preload-kept:1"
		lastReady = "example.invalid/berth/preload-last-ready:1"
	)
	b := newBerth(t, berthOptions{args: []string{"--file-rollback-after", "1m", "--rollback-min-ready", "1s"}})
	b.waitReady()
	dir := filepath.Join(b.root, "images")
	dropFile(t, dir, "kept.tar", preloadArchive(t, preloaded, testbed.FormatOCI), true)
	dropFile(t, dir, "last-ready.tar", preloadArchive(t, lastReady, testbed.FormatOCI), true)
	b.waitPreloadEvent("Preloaded", preloaded)
	b.waitPreloadEvent("Preloaded", lastReady)
	// The last-ready archive goes: its image stays for the rollback
	// alone.
	if err := os.Remove(filepath.Join(dir, "last-ready.tar")); err != nil {
		t.Fatal(err)
	}

	pod := newPod("versions", shContainer("app", sleepForever))
	pod.Spec.Containers[0].Image, pod.Spec.Containers[0].ImagePullPolicy = lastReady, v1.PullNever
	b.writeManifest("versions.yaml", podManifest(pod))
	first := b.waitRunning(podName("versions"))
	b.waitFor("the first version proven Ready", waitTimeout, func() (bool, string) {
		held, err := b.rollbackStateHolds(first.UID)
		return held, fmt.Sprint(err)
	})
	pod.Spec.Containers[0].Image = "busybox:1.36"
	b.writeManifest("versions.yaml", podManifest(pod))
	b.waitFor("the second version running and the first gone", waitTimeout, func() (bool, string) {
		p, err := b.apiPod(podName("versions"))
		if err != nil || p == nil || p.UID == first.UID || p.Status.Phase != v1.PodRunning {
			return false, fmt.Sprint(p, err)
		}
		cs, err := containersOf(podName("versions"))
		for _, c := range cs {
			if c.Labels["io.kubernetes.pod.uid"] == string(first.UID) {
				return false, "the first version's container is still there"
			}
		}
		return err == nil, fmt.Sprint(err)
	})
	b.collectImagesNow(t, victim)
	for _, ref := range []string{preloaded, lastReady} {
		img := imageStatus(t, ref)
		if img == nil {
			t.Errorf("image GC removed %s", ref)
		} else if img.Pinned != pinsImages() {
			t.Errorf("CRI reports %s pinned %v on containerd %s, want %v", ref, img.Pinned, bed.ContainerdVersion, pinsImages())
		}
	}
}
