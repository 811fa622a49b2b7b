package gc

import (
	"context"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/podplan"
)

// TestImageGCKeepsImageVolumes: an image only mounted as an image volume
// (KEP-4639) is in use while its container exists, as the container's own
// image is.
func TestImageGCKeepsImageVolumes(t *testing.T) {
	env := newGCTestEnv(t)
	ctx := context.Background()
	env.is.SetFakeImages([]string{"app:1", "data:1", "junk:1"})
	env.is.SetFakeFilesystemUsage([]*runtimeapi.FilesystemUsage{{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: t.TempDir()}}})
	images, err := env.is.ListImages(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	id := map[string]string{}
	for _, i := range images {
		id[i.RepoTags[0]] = i.Id
	}
	snap := map[types.UID]*podplan.PodStatus{"u": {UID: "u", Containers: []*podplan.ContainerStatus{{
		ImageRef: id["app:1"], State: podplan.ContainerStateRunning,
		Annotations: map[string]string{criconfig.AnnotationImageVolumes: id["data:1"]},
	}}}}
	res := env.gc.ImageGarbageCollect(ctx, ImagePolicy{HighThresholdPercent: 0, LowThresholdPercent: 0}, snap, nil)
	if len(res.Errors) != 0 {
		t.Fatal(res.Errors)
	}
	if len(res.Removed) != 1 || !slices.Contains(res.Removed[0].Tags, "junk:1") {
		t.Errorf("removed %+v, want junk:1 only", res.Removed)
	}
}
