package gc

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/podplan"
)

// ImagePolicy is --image-gc-high-threshold, --image-gc-low-threshold and
// --minimum-image-gc-age, with the kubelet's meaning.
type ImagePolicy struct {
	// HighThresholdPercent of the image filesystem in use starts a
	// collection; 100 disables image GC.
	HighThresholdPercent int
	// LowThresholdPercent is what a collection frees down to.
	LowThresholdPercent int
	// MinAge is how long an image is known before it may be removed, so an
	// image pulled for a pod about to start is not taken from under it.
	MinAge time.Duration
}

// imageTracker remembers, per image reference, when berth first saw it and
// when a container last used it: the least recently used image goes first.
// Its mutex guards both maps.
type imageTracker struct {
	mu        sync.Mutex
	firstSeen map[string]time.Time // by image ID
	lastUsed  map[string]time.Time // by container ImageRef (ID or repo digest)
}

// imageUseMemory is how long image GC remembers when an image was last
// used: an image unused for longer is ordered by when berth first saw it,
// and a device that updates its images for years keeps no record of every
// image it ever ran.
const imageUseMemory = 7 * 24 * time.Hour

// observe records the images the containers of a relist snapshot use, at
// now. Dead containers count: their image cannot go while they exist.
func (t *imageTracker) observe(pods map[types.UID]*podplan.PodStatus, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lastUsed == nil {
		t.lastUsed = map[string]time.Time{}
	}
	for _, p := range pods {
		for _, c := range p.Containers {
			if c.ImageRef != "" {
				t.lastUsed[c.ImageRef] = now
			}
			// The images its image volumes mount (KEP-4639) are in use
			// as long as the container exists, like its own.
			if ids := c.Annotations[criconfig.AnnotationImageVolumes]; ids != "" {
				for _, id := range strings.Split(ids, ",") {
					t.lastUsed[id] = now
				}
			}
		}
	}
	for ref, at := range t.lastUsed {
		if now.Sub(at) > imageUseMemory {
			delete(t.lastUsed, ref)
		}
	}
}

// RemovedImage is one image image GC removed.
type RemovedImage struct {
	ID   string
	Tags []string
	Size uint64
}

// ImageResult is what one ImageGarbageCollect pass found and did.
type ImageResult struct {
	// UsagePercent is the image filesystem's use before the pass; -1 when
	// the runtime reported no filesystem berth could measure.
	UsagePercent int
	Removed      []RemovedImage
	Freed        uint64
	Errors       []error
}

// ImageGarbageCollect frees the image filesystem when it is above the high
// threshold, as the kubelet's image GC manager does: it measures the
// filesystem ImageFsInfo names, and when usage is at or above
// HighThresholdPercent removes unused images, least recently used first,
// until usage would be at LowThresholdPercent. An image is used when a
// container in pods (the agent's latest relist, dead containers included)
// refers to it. The sandbox (pause) image is never removed, nor an image
// the runtime pins, nor one known for less than MinAge, nor one keep
// names (the images of the pods' current, last Ready and rollback
// versions) or the preloader put there. Every pass first waits for the
// imports in progress, then pins those where the runtime pins
// (Options.Preloaded). Below the threshold the pass
// costs one ImageFsInfo call beside the pins.
func (c *Collector) ImageGarbageCollect(ctx context.Context, policy ImagePolicy, pods map[types.UID]*podplan.PodStatus, keep []string) ImageResult {
	res := ImageResult{UsagePercent: -1}
	now := c.clock.Now()
	c.imageUse.observe(pods, now)
	if c.opts.Preloaded != nil {
		// An archive not imported yet (at start, every archive) holds
		// images nothing else names: the pass waits for it.
		for pending := c.opts.Preloaded.Pending(); pending != nil; pending = c.opts.Preloaded.Pending() {
			select {
			case <-pending:
			case <-ctx.Done():
				return res
			}
		}
		keep = append(keep, c.opts.Preloaded.Images()...)
		if err := c.opts.Preloaded.Pin(ctx, normalizedNames(keep)); err != nil {
			res.Errors = append(res.Errors, fmt.Errorf("image GC: pin the images kept: %w", err))
		}
	}
	if policy.HighThresholdPercent >= 100 {
		return res
	}
	fsInfo, err := c.imageFsInfo(ctx)
	if err != nil {
		res.Errors = append(res.Errors, err)
		return res
	}
	usage, toFree := bytesToFree(fsInfo, policy)
	res.UsagePercent = usage
	if toFree <= 0 {
		return res
	}
	images, err := c.images.ListImages(ctx, nil)
	if err != nil {
		res.Errors = append(res.Errors, fmt.Errorf("image GC: list images: %w", err))
		return res
	}
	keepIDs := c.imageIDs(ctx, keep, &res)
	sandboxImage, err := c.sandboxImageID(ctx)
	if err != nil {
		res.Errors = append(res.Errors, err)
	}
	if sandboxImage != "" {
		keepIDs[sandboxImage] = true
	}
	candidates, err := c.imageUse.candidates(images, keepIDs, policy.MinAge, now)
	if err != nil {
		res.Errors = append(res.Errors, err)
		return res
	}
	for _, img := range candidates {
		if int64(res.Freed) >= toFree {
			break
		}
		if err := c.images.RemoveImage(ctx, &runtimeapi.ImageSpec{Image: img.Id}); err != nil && !isNotFound(err) {
			res.Errors = append(res.Errors, fmt.Errorf("image GC: remove image %s: %w", img.Id, err))
			continue
		}
		res.Removed = append(res.Removed, RemovedImage{ID: img.Id, Tags: img.RepoTags, Size: img.GetSize()})
		res.Freed += img.GetSize()
	}
	return res
}

// candidates are the images image GC may remove, least recently used
// first (never used ones by when berth first saw them), never one whose
// ID keep holds. It also forgets
// what it remembers of images no longer listed. When a container uses an
// image that matches no listed image by ID or digest, it cannot tell what
// is unused and returns an error rather than guess.
func (t *imageTracker) candidates(images []*runtimeapi.Image, keep map[string]bool, minAge time.Duration, now time.Time) ([]*runtimeapi.Image, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.firstSeen == nil {
		t.firstSeen = map[string]time.Time{}
	}
	listed := map[string]bool{}
	type cand struct {
		img  *runtimeapi.Image
		used time.Time
		seen time.Time
	}
	var out []cand
	refsInUse := map[string]bool{}
	for _, img := range images {
		listed[img.Id] = true
		if _, ok := t.firstSeen[img.Id]; !ok {
			t.firstSeen[img.Id] = now
		}
		var used time.Time
		for _, ref := range append([]string{img.Id}, img.RepoDigests...) {
			if u, ok := t.lastUsed[ref]; ok {
				refsInUse[ref] = true
				if u.After(used) {
					used = u
				}
			}
		}
		inUse := !used.IsZero() && !used.Before(now)
		if inUse || img.Pinned || keep[img.Id] || now.Sub(t.firstSeen[img.Id]) < minAge {
			continue
		}
		out = append(out, cand{img: img, used: used, seen: t.firstSeen[img.Id]})
	}
	for ref, u := range t.lastUsed {
		if !u.Before(now) && !refsInUse[ref] {
			return nil, fmt.Errorf("image GC: a container uses image %s, which the runtime does not list; nothing removed", ref)
		}
	}
	for id := range t.firstSeen {
		if !listed[id] {
			delete(t.firstSeen, id)
		}
	}
	for ref := range t.lastUsed {
		if !refsInUse[ref] {
			delete(t.lastUsed, ref)
		}
	}
	slices.SortFunc(out, func(a, b cand) int {
		return cmp.Or(a.used.Compare(b.used), a.seen.Compare(b.seen), cmp.Compare(a.img.Id, b.img.Id))
	})
	imgs := make([]*runtimeapi.Image, len(out))
	for i, c := range out {
		imgs[i] = c.img
	}
	return imgs, nil
}

// bytesToFree is the kubelet's image GC arithmetic over the measured image
// filesystems: the highest usage percent, and, when a filesystem is at or
// above the high threshold, the bytes that bring it to the low one.
func bytesToFree(fss []imageFs, policy ImagePolicy) (usagePercent int, toFree int64) {
	usagePercent = -1
	for _, fs := range fss {
		if fs.capacity == 0 {
			continue
		}
		usage := 100 - int(fs.available*100/fs.capacity)
		usagePercent = max(usagePercent, usage)
		if usage >= policy.HighThresholdPercent {
			toFree = max(toFree, int64(fs.capacity)*int64(100-policy.LowThresholdPercent)/100-int64(fs.available))
		}
	}
	return usagePercent, toFree
}

// imageFs is one image filesystem's size, from statfs.
type imageFs struct {
	mountpoint          string
	capacity, available uint64
}

// imageFsInfo measures the filesystems the runtime keeps images on. CRI
// reports only what the images use, so capacity and free space come from
// statfs of the reported mountpoint, as the kubelet gets them from cadvisor.
func (c *Collector) imageFsInfo(ctx context.Context) ([]imageFs, error) {
	resp, err := c.images.ImageFsInfo(ctx)
	if err != nil {
		return nil, fmt.Errorf("image GC: image filesystem info: %w", err)
	}
	var out []imageFs
	var errs []error
	for _, fs := range resp.GetImageFilesystems() {
		mp := fs.GetFsId().GetMountpoint()
		if mp == "" {
			continue
		}
		var st unix.Statfs_t
		if err := unix.Statfs(mp, &st); err != nil {
			errs = append(errs, fmt.Errorf("image GC: statfs %s: %w", mp, err))
			continue
		}
		out = append(out, imageFs{mountpoint: mp, capacity: st.Blocks * uint64(st.Bsize), available: st.Bavail * uint64(st.Bsize)})
	}
	return out, errors.Join(errs...)
}

// sandboxImageID resolves the runtime's sandbox (pause) image to its ID, from
// the configuration the runtime reports in its verbose status (containerd:
// info.config.sandboxImage). "" when the runtime does not say; pinned images
// are still protected then.
func (c *Collector) sandboxImageID(ctx context.Context) (string, error) {
	st, err := c.runtime.Status(ctx, true)
	if err != nil {
		return "", fmt.Errorf("image GC: runtime status: %w", err)
	}
	var cfg struct {
		SandboxImage string `json:"sandboxImage"`
	}
	if raw := st.GetInfo()["config"]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &cfg); err != nil {
			return "", fmt.Errorf("image GC: runtime config: %w", err)
		}
	}
	if cfg.SandboxImage == "" {
		return "", nil
	}
	resp, err := c.images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: cfg.SandboxImage}, false)
	if err != nil {
		return "", fmt.Errorf("image GC: status of the sandbox image %s: %w", cfg.SandboxImage, err)
	}
	return resp.GetImage().GetId(), nil
}

// imageIDs resolves the images keep names to the runtime's IDs, those
// present; a failure is kept in res and keeps nothing less: the image it
// names is then not listed as a candidate either, as removals are by ID.
func (c *Collector) imageIDs(ctx context.Context, keep []string, res *ImageResult) map[string]bool {
	ids := map[string]bool{}
	for _, ref := range normalizedNames(keep) {
		resp, err := c.images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: ref}, false)
		if err != nil {
			res.Errors = append(res.Errors, fmt.Errorf("image GC: status of image %s, kept: %w", ref, err))
			continue
		}
		if id := resp.GetImage().GetId(); id != "" {
			ids[id] = true
		}
	}
	return ids
}

// normalizedNames are the runtime's names of images, those that are valid
// references, each once.
func normalizedNames(images []string) []string {
	var out []string
	for _, img := range images {
		if n, err := criconfig.NormalizedName(img); err == nil {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
