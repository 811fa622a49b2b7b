package kuberuntime

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/images"
)

// slowPulls is an image service whose every pull takes took on the fake
// clock.
type slowPulls struct {
	internalapi.ImageManagerService
	clock *clocktesting.FakeClock
	took  time.Duration
}

func (s slowPulls) PullImage(ctx context.Context, img *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sc *runtimeapi.PodSandboxConfig) (string, error) {
	s.clock.Step(s.took)
	return s.ImageManagerService.PullImage(ctx, img, auth, sc)
}

// TestSyncPodPulling: a sync reports, per container start, the time it
// spent pulling images, failed pulls included, and nothing for an image
// already present or backing off: the image pull time the pod start SLI
// leaves out.
func TestSyncPodPulling(t *testing.T) {
	for _, tt := range []struct {
		name   string
		policy v1.PullPolicy
		fail   bool
		want   map[string]time.Duration // by container
	}{
		{"pulled", v1.PullAlways, false, map[string]time.Duration{"a": 3 * time.Second, "b": 3 * time.Second}},
		// b's pull is held back by the image's back-off: no pull.
		{"pull failed", v1.PullAlways, true, map[string]time.Duration{"a": 3 * time.Second, "b": 0}},
		{"present", v1.PullIfNotPresent, false, map[string]time.Duration{"a": 0, "b": 0}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newSyncFixture(t)
			f.m.images = images.New(slowPulls{ImageManagerService: f.img, clock: f.clock, took: 3 * time.Second}, images.Options{RootDir: t.TempDir()})
			if _, err := f.img.PullImage(context.Background(), &runtimeapi.ImageSpec{Image: "busybox:1.36"}, nil, nil); err != nil {
				t.Fatal(err)
			}
			if tt.fail {
				f.img.InjectError("PullImage", errors.New("registry down"))
			}
			pod := syncPod("a", "b")
			for i := range pod.Spec.Containers {
				pod.Spec.Containers[i].ImagePullPolicy = tt.policy
			}
			res := syncPlanned(context.Background(), f.m, pod, nil)
			starts, total := 0, time.Duration(0)
			for _, r := range res.Results {
				if r.Action != ActionStartContainer {
					continue
				}
				starts++
				total += tt.want[r.Target]
				if r.Pulling != tt.want[r.Target] {
					t.Errorf("%s pulled for %v, want %v", r.Target, r.Pulling, tt.want[r.Target])
				}
			}
			if starts != 2 {
				t.Fatalf("%d container starts, want 2: %+v", starts, res.Results)
			}
			if got := res.Pulling(); got != total {
				t.Errorf("the sync pulled for %v, want %v", got, total)
			}
		})
	}
}
