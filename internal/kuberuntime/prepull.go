package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/images"
)

// PrePullParallel bounds the pre-pulls' image pulls that run at once on
// the node, all pods together: an edit of many pods (a fleet's URL) does
// not open a connection per image to the registry, and one slow image
// does not hold back the others.
const PrePullParallel = 3

// PrePullResult is what PrePull found and did.
type PrePullResult struct {
	// Needed is how many distinct images the pod lacked, or must pull by
	// their policy (Always); Pulled how many of them it pulled.
	Needed, Pulled int
	// Failed is every image that could not be made present, with the
	// failure (*SyncError, with EnsureImage's reasons), in image order.
	Failed []PrePullFailure
	// RetryAfter is the shortest pull back-off left among the failures;
	// 0 when none carries one.
	RetryAfter time.Duration
	// Pulling is how long the pulls took, wall time.
	Pulling time.Duration
}

// PrePullFailure is one image a pre-pull could not make present.
type PrePullFailure struct {
	Image string
	// Containers are the containers (and image volumes, as
	// "container/volume") that use the image.
	Containers []string
	Err        *SyncError
}

// Err is the pre-pull's failure, naming each image that is missing, or
// nil.
func (r PrePullResult) Err() error {
	if len(r.Failed) == 0 {
		return nil
	}
	msgs := make([]string, 0, len(r.Failed))
	for _, f := range r.Failed {
		msgs = append(msgs, f.Err.Message)
	}
	return &SyncError{Reason: r.Failed[0].Err.Reason, Message: strings.Join(msgs, "; ")}
}

// prePullImage is one distinct image of a pod, with the policy the first
// container naming it gives.
type prePullImage struct {
	container  v1.Container // Name, Image and ImagePullPolicy only
	containers []string
}

// PrePull makes the images the pod's containers and image volumes need
// present before the pod starts, with their pull policies, credentials,
// back-offs and events as EnsureImage pulls them: an image present whose
// policy is not Always is left alone and makes no event; one absent with
// policy Never fails with ErrImageNeverPull. pulling, when set, hears the
// images it is about to pull, once, before the first pull; it is not
// called when nothing needs pulling. Its pulls wait for one of the
// PrePullParallel slots the node's pre-pulls share. Pulls pass no sandbox config: the pod has no sandbox
// yet. A pull cut short by ctx starts no back-off and is not reported as a
// failure of the image but in the result's Failed like any other.
func (m *Manager) PrePull(ctx context.Context, pod *v1.Pod, pulling func(images []string)) PrePullResult {
	var need []*prePullImage
	var res PrePullResult
	for _, img := range podImages(pod) {
		image, tag, digest, err := criconfig.ApplyDefaultTag(img.container.Image)
		if err == nil {
			ref, rerr := m.images.Ref(ctx, &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: img.container.Image})
			present := rerr == nil && ref != ""
			if rerr == nil && present && !images.ShouldPull(images.PullPolicy(img.container.ImagePullPolicy, tag, digest), true) {
				continue
			}
		}
		// EnsureImage reports a bad name or a failed inspection with its
		// events, as the pod's start would.
		need = append(need, img)
	}
	res.Needed = len(need)
	if len(need) == 0 {
		return res
	}
	if pulling != nil {
		names := make([]string, len(need))
		for i, img := range need {
			names[i] = img.container.Image
		}
		pulling(names)
	}
	var mu sync.Mutex // guards res below
	var wg sync.WaitGroup
	start := m.clock.Now()
	for _, img := range need {
		wg.Go(func() {
			select {
			case m.prePullSlots <- struct{}{}:
			case <-ctx.Done():
				mu.Lock()
				res.Failed = append(res.Failed, PrePullFailure{Image: img.container.Image, Containers: img.containers,
					Err: &SyncError{Reason: ReasonErrImagePull, Message: fmt.Sprintf("pull of image %q cancelled", img.container.Image), Err: ctx.Err()}})
				mu.Unlock()
				return
			}
			defer func() { <-m.prePullSlots }()
			r, err := m.EnsureImage(ctx, pod, &img.container, nil)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				res.Pulled++
				return
			}
			se, ok := errors.AsType[*SyncError](err)
			if !ok {
				se = &SyncError{Reason: ReasonErrImagePull, Message: err.Error(), Err: err}
			}
			res.Failed = append(res.Failed, PrePullFailure{Image: img.container.Image, Containers: img.containers, Err: se})
			if r.RetryAfter > 0 && (res.RetryAfter == 0 || r.RetryAfter < res.RetryAfter) {
				res.RetryAfter = r.RetryAfter
			}
		})
	}
	wg.Wait()
	res.Pulling = m.clock.Since(start)
	sort.Slice(res.Failed, func(i, j int) bool { return res.Failed[i].Image < res.Failed[j].Image })
	return res
}

// podImages are the distinct images of the pod's init containers,
// containers and image volumes, in that order, each with the containers
// using it. An image named twice with different policies is pulled by the
// first policy that says Always, as the containers' own pulls would.
func podImages(pod *v1.Pod) []*prePullImage {
	var out []*prePullImage
	byImage := map[string]*prePullImage{}
	add := func(user, image string, policy v1.PullPolicy) {
		img, ok := byImage[image]
		if !ok {
			img = &prePullImage{container: v1.Container{Name: user, Image: image, ImagePullPolicy: policy}}
			byImage[image] = img
			out = append(out, img)
		} else if policy == v1.PullAlways {
			img.container.ImagePullPolicy = policy
		}
		img.containers = append(img.containers, user)
	}
	for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			add(c.Name, c.Image, c.ImagePullPolicy)
			for _, vm := range c.VolumeMounts {
				if vol := podVolume(pod, vm.Name); vol != nil && vol.Image != nil {
					add(c.Name+"/"+vm.Name, vol.Image.Reference, vol.Image.PullPolicy)
				}
			}
		}
	}
	return out
}
