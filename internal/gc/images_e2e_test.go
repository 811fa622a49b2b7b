//go:build e2e

package gc

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/podplan"
)

// TestE2EImageGCProtections checks image GC's view of the real containerd
// without removing anything the other tests share: the image filesystem is
// measured, the sandbox image is found from the runtime's configuration
// (containerd 1.x reports sandbox_image there) or pinned by the runtime
// itself (2.x: pinned_images.sandbox, reported as Image.Pinned, with no
// sandboxImage in its verbose status), and neither it nor an image a
// container uses is ever a candidate.
func TestE2EImageGCProtections(t *testing.T) {
	env := newE2EEnv(t)
	ctx := context.Background()

	fss, err := env.gc.imageFsInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(fss) == 0 || fss[0].capacity == 0 || fss[0].available > fss[0].capacity {
		t.Fatalf("image filesystems %+v", fss)
	}
	usage, _ := bytesToFree(fss, ImagePolicy{HighThresholdPercent: 85, LowThresholdPercent: 80})
	t.Logf("image filesystem %s: %d%% used", fss[0].mountpoint, usage)

	pause, err := env.gc.sandboxImageID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	busybox, err := env.is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: testBed.BusyboxImage}, false)
	if err != nil {
		t.Fatal(err)
	}
	want, err := env.is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: testBed.PauseImage}, false)
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case testBed.ContainerdAtLeast(2, 0):
		if pause != "" || !want.GetImage().GetPinned() {
			t.Fatalf("containerd %s: sandbox image ID %q pinned %v, want none reported and %s pinned", testBed.ContainerdVersion, pause, want.GetImage().GetPinned(), testBed.PauseImage)
		}
	case pause == "" || pause != want.GetImage().GetId():
		t.Fatalf("containerd %s: sandbox image ID %q, want %q (%s)", testBed.ContainerdVersion, pause, want.GetImage().GetId(), testBed.PauseImage)
	}

	// A container of the busybox image, as a relist reports it: the
	// runtime's ImageRef is a repo digest or the ID.
	uid := startE2EPod(ctx, t, env, "imagegc", "exec sleep 3600")
	snap, err := env.m.Relist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st := snap[uid]
	if st == nil || len(st.Containers) != 1 {
		t.Fatalf("relist: %+v", st)
	}
	now := time.Now()
	env.gc.imageUse.observe(map[types.UID]*podplan.PodStatus{uid: st}, now)
	images, err := env.is.ListImages(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	cands, err := env.gc.imageUse.candidates(images, map[string]bool{pause: true}, 0, now)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cands {
		if c.Id == want.GetImage().GetId() || c.Id == busybox.GetImage().GetId() {
			t.Errorf("candidate %s %v is protected", c.Id, c.RepoTags)
		}
	}
	t.Logf("container image ref %s; %d of %d images would be candidates", st.Containers[0].ImageRef, len(cands), len(images))
}
