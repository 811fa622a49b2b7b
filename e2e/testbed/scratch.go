package testbed

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// ScratchImageArchive writes into dir an OCI layout tarball of one tiny
// image named ref, whose only file holds ref itself: images of different
// names differ in content and ID, so a test can have an image nothing uses
// (image garbage collection) without a registry. ref is a full reference
// with a tag, e.g. docker.io/library/unused:1.
func ScratchImageArchive(dir, ref string) (string, error) {
	_, tag, ok := strings.Cut(ref[strings.LastIndex(ref, "/")+1:], ":")
	if !ok || tag == "" {
		return "", fmt.Errorf("scratch image %q: the reference needs a tag", ref)
	}
	img, err := imageSpec{
		Ref: ref, Tag: tag, Cmd: []string{"/missing"},
		Files: []fileEntry{{Path: "ref", Mode: 0o644, Data: []byte(ref + "\n")}},
	}.build()
	if err != nil {
		return "", fmt.Errorf("scratch image %q: %w", ref, err)
	}
	var buf bytes.Buffer
	if err := writeLayout(&buf, img); err != nil {
		return "", fmt.Errorf("scratch image %q: %w", ref, err)
	}
	archive := filepath.Join(dir, "scratch-"+strings.TrimPrefix(img.Manifest.Digest, "sha256:")[:12]+".tar")
	if err := os.WriteFile(archive, buf.Bytes(), 0o644); err != nil {
		return "", fmt.Errorf("scratch image %q: %w", ref, err)
	}
	return archive, nil
}

// ImportImage imports the single image ref from archive (as
// ScratchImageArchive writes it) and waits until CRI sees it.
func (b *Bed) ImportImage(archive, ref string) error {
	if err := b.importArchive(archive, ref); err != nil {
		return fmt.Errorf("import %s: %w", ref, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return b.waitImage(ctx, ref)
}

// waitImage waits until CRI sees ref: its image store follows containerd's
// events, asynchronously, so an import returns before CRI knows it.
func (b *Bed) waitImage(ctx context.Context, ref string) error {
	for {
		resp, err := b.Images().ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		if err == nil && resp.GetImage() != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("image %s imported but not seen by CRI: %v", ref, err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
