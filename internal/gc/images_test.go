package gc

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/podplan"
)

func TestBytesToFree(t *testing.T) {
	policy := ImagePolicy{HighThresholdPercent: 85, LowThresholdPercent: 80}
	tests := []struct {
		name      string
		fss       []imageFs
		wantUsage int
		wantFree  int64
	}{
		{name: "no filesystem", wantUsage: -1},
		{name: "below high", fss: []imageFs{{capacity: 1000, available: 200}}, wantUsage: 80},
		{name: "at high", fss: []imageFs{{capacity: 1000, available: 150}}, wantUsage: 85, wantFree: 50},
		{name: "full", fss: []imageFs{{capacity: 1000, available: 0}}, wantUsage: 100, wantFree: 200},
		{name: "the fuller of two", fss: []imageFs{{capacity: 1000, available: 500}, {capacity: 100, available: 5}}, wantUsage: 95, wantFree: 15},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			usage, free := bytesToFree(tc.fss, policy)
			if usage != tc.wantUsage || free != tc.wantFree {
				t.Errorf("usage %d, free %d; want %d, %d", usage, free, tc.wantUsage, tc.wantFree)
			}
		})
	}
}

// TestImageCandidates checks what image GC may remove and in which order:
// least recently used first, never used by when first seen; never an
// image in use, pinned, the sandbox image, or younger than MinAge.
func TestImageCandidates(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	img := func(id string, digests ...string) *runtimeapi.Image {
		return &runtimeapi.Image{Id: id, RepoDigests: digests, RepoTags: []string{id + ":tag"}, Size: 10}
	}
	pinned := img("sha256:pinned")
	pinned.Pinned = true
	images := []*runtimeapi.Image{
		img("sha256:used-long-ago", "reg/a@sha256:1"), img("sha256:used-lately"), img("sha256:in-use", "reg/b@sha256:2"),
		img("sha256:never-used"), img("sha256:pause"), pinned, img("sha256:brand-new"),
	}
	var tr imageTracker
	use := func(at time.Time, refs ...string) {
		p := &podplan.PodStatus{UID: "u"}
		for _, r := range refs {
			p.Containers = append(p.Containers, &podplan.ContainerStatus{ImageRef: r})
		}
		tr.observe(map[types.UID]*podplan.PodStatus{"u": p}, at)
	}
	// Everything but brand-new is first seen an hour ago.
	if _, err := tr.candidates(images[:6], map[string]bool{"sha256:pause": true}, 0, now.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	use(now.Add(-50*time.Minute), "reg/a@sha256:1")
	use(now.Add(-10*time.Minute), "sha256:used-lately")
	use(now, "reg/b@sha256:2")
	got, err := tr.candidates(images, map[string]bool{"sha256:pause": true}, 2*time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, i := range got {
		ids = append(ids, strings.TrimPrefix(i.Id, "sha256:"))
	}
	if want := []string{"never-used", "used-long-ago", "used-lately"}; !slices.Equal(ids, want) {
		t.Errorf("candidates %v, want %v", ids, want)
	}

	// A container whose image the runtime does not list: refuse to guess.
	use(now, "sha256:unknown")
	if _, err := tr.candidates(images, map[string]bool{"sha256:pause": true}, 0, now); err == nil {
		t.Error("no error for a container using an unlisted image")
	}
}

// TestImageGarbageCollect runs passes on the fake image service over this
// machine's real filesystem: disabled at 100%, a single ImageFsInfo call
// when below the threshold, and removal of unused images only when above.
func TestImageGarbageCollect(t *testing.T) {
	env := newGCTestEnv(t)
	ctx := context.Background()
	env.is.SetFakeImages([]string{"busybox:old", "app:in-use"})
	env.is.SetFakeFilesystemUsage([]*runtimeapi.FilesystemUsage{{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: t.TempDir()}}})
	images, err := env.is.ListImages(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var inUse string
	for _, i := range images {
		if slices.Contains(i.RepoTags, "app:in-use") {
			inUse = i.Id
		}
	}
	snap := map[types.UID]*podplan.PodStatus{"u": {UID: "u", Containers: []*podplan.ContainerStatus{{ImageRef: inUse, State: podplan.ContainerStateExited}}}}
	imageCalls := func() []string {
		env.is.Lock()
		defer env.is.Unlock()
		c := env.is.Called
		env.is.Called = nil
		return c
	}
	imageCalls()

	if res := env.gc.ImageGarbageCollect(ctx, ImagePolicy{HighThresholdPercent: 100}, snap, nil); len(res.Removed) != 0 {
		t.Errorf("disabled: removed %v", res.Removed)
	}
	if calls := imageCalls(); len(calls) != 0 {
		t.Errorf("disabled GC called %v", calls)
	}

	// A threshold this machine's disk is below.
	res := env.gc.ImageGarbageCollect(ctx, ImagePolicy{HighThresholdPercent: 99, LowThresholdPercent: 98}, snap, nil)
	if res.UsagePercent >= 99 {
		t.Skipf("the test machine's disk is %d%% full", res.UsagePercent)
	}
	if len(res.Removed) != 0 || len(res.Errors) != 0 || res.UsagePercent < 0 {
		t.Errorf("below threshold: %+v", res)
	}
	if calls := imageCalls(); !slices.Equal(calls, []string{"ImageFsInfo"}) {
		t.Errorf("below threshold calls = %v", calls)
	}

	// Any usage is over a 0% threshold: every unused image goes.
	res = env.gc.ImageGarbageCollect(ctx, ImagePolicy{HighThresholdPercent: 0, LowThresholdPercent: 0}, snap, nil)
	if len(res.Errors) != 0 {
		t.Fatal(res.Errors)
	}
	if len(res.Removed) != 1 || !slices.Contains(res.Removed[0].Tags, "busybox:old") {
		t.Errorf("removed %+v, want busybox:old only", res.Removed)
	}
	left, _ := env.is.ListImages(ctx, nil)
	if len(left) != 1 || left[0].Id != inUse {
		t.Errorf("images left: %v", left)
	}
}

// TestImageTrackerForgets: uses older than imageUseMemory are forgotten, so
// years of image updates leave no record behind.
func TestImageTrackerForgets(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	var tr imageTracker
	old := map[types.UID]*podplan.PodStatus{"u": {UID: "u", Containers: []*podplan.ContainerStatus{{ImageRef: "sha256:old"}}}}
	current := map[types.UID]*podplan.PodStatus{"u": {UID: "u", Containers: []*podplan.ContainerStatus{{ImageRef: "sha256:new"}}}}
	tr.observe(old, now)
	tr.observe(current, now.Add(imageUseMemory))
	if _, ok := tr.lastUsed["sha256:old"]; !ok {
		t.Error("forgot a use just imageUseMemory old")
	}
	tr.observe(current, now.Add(imageUseMemory+time.Second))
	if len(tr.lastUsed) != 1 {
		t.Errorf("remembered %v", tr.lastUsed)
	}
}

// fakePreloaded is a preloader whose archives hold images, some of them
// (late) known only once its pending import is done.
type fakePreloaded struct {
	images, late []string
	pendingOnce  bool
	pinned       []string
}

func (f *fakePreloaded) Images() []string { return f.images }

func (f *fakePreloaded) Pin(_ context.Context, keep []string) error {
	f.pinned = keep
	return nil
}

func (f *fakePreloaded) Pending() <-chan struct{} {
	if !f.pendingOnce {
		return nil
	}
	f.pendingOnce = false
	f.images = append(f.images, f.late...)
	done := make(chan struct{})
	close(done)
	return done
}

// TestImageGarbageCollectKeeps: under pressure, image GC removes the
// images nothing needs and keeps those of the pods' versions (keep, named
// as manifests name them) and the preloaded ones, including those of an
// import still in progress when the pass began; it pins exactly those.
func TestImageGarbageCollectKeeps(t *testing.T) {
	const (
		current   = "docker.io/library/app:current"
		lastReady = "docker.io/library/app:last-ready"
		preloaded = "example.com/preloaded:1"
		late      = "example.com/late:1"
		victim    = "docker.io/library/victim:1"
	)
	tests := []struct {
		name        string
		keep        []string
		preloaded   *fakePreloaded
		wantRemoved []string
		wantPinned  []string
	}{
		{name: "nothing kept", wantRemoved: []string{current, lastReady, late, preloaded, victim}},
		{name: "pods' versions", keep: []string{"app:current", "app:last-ready", "app:current"},
			wantRemoved: []string{late, preloaded, victim}},
		{name: "pods' versions and preloads", keep: []string{"app:current", "app:last-ready"},
			preloaded:   &fakePreloaded{images: []string{preloaded}, late: []string{late}, pendingOnce: true},
			wantRemoved: []string{victim}, wantPinned: []string{current, lastReady, late, preloaded}},
		{name: "an invalid name keeps nothing more", keep: []string{"Not/Valid"}, preloaded: &fakePreloaded{},
			wantRemoved: []string{current, lastReady, late, preloaded, victim}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newGCTestEnv(t)
			if tt.preloaded != nil {
				env.gc.opts.Preloaded = tt.preloaded
			}
			ctx := context.Background()
			env.is.SetFakeImages([]string{current, lastReady, preloaded, late, victim})
			env.is.SetFakeFilesystemUsage([]*runtimeapi.FilesystemUsage{{FsId: &runtimeapi.FilesystemIdentifier{Mountpoint: t.TempDir()}}})
			res := env.gc.ImageGarbageCollect(ctx, ImagePolicy{}, nil, tt.keep)
			if len(res.Errors) != 0 {
				t.Fatal(res.Errors)
			}
			var removed []string
			for _, r := range res.Removed {
				removed = append(removed, r.Tags...)
			}
			slices.Sort(removed)
			if want := slices.Sorted(slices.Values(tt.wantRemoved)); !slices.Equal(removed, want) {
				t.Errorf("removed %v, want %v", removed, tt.wantRemoved)
			}
			if tt.preloaded != nil && !slices.Equal(tt.preloaded.pinned, tt.wantPinned) {
				t.Errorf("pinned %v, want %v", tt.preloaded.pinned, tt.wantPinned)
			}
		})
	}
}
