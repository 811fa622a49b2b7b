package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeapi "k8s.io/cri-api/pkg/apis/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

// prePullPod has containers of the given images and policies ("image" or
// "image|Policy"), and an init container of the first.
func prePullPod(images ...string) *v1.Pod {
	pod := &v1.Pod{}
	pod.UID, pod.Name, pod.Namespace = types.UID("uid-2"), "web-node", "default"
	for i, spec := range images {
		image, policy, _ := strings.Cut(spec, "|")
		c := v1.Container{Name: fmt.Sprintf("c%d", i), Image: image, ImagePullPolicy: v1.PullPolicy(policy)}
		pod.Spec.Containers = append(pod.Spec.Containers, c)
	}
	init := pod.Spec.Containers[0]
	init.Name = "init"
	pod.Spec.InitContainers = []v1.Container{init}
	return pod
}

func TestPrePull(t *testing.T) {
	tests := []struct {
		name       string
		images     []string
		present    []string
		pullErr    error
		wantPulls  []string // images pulled, sorted
		wantNeeded int
		wantFailed string // reason of the first failure, "" for none
		wantEvents []string
	}{
		{name: "all present: nothing pulled, no event", images: []string{"a:1", "b:1|IfNotPresent"}, present: []string{"a:1", "b:1"}},
		{name: "present with policy Never: nothing pulled", images: []string{"a:1|Never"}, present: []string{"a:1"}},
		{name: "absent: pulled once though two containers use it", images: []string{"a:1", "a:1", "b:1"}, present: []string{"b:1"},
			wantPulls: []string{"a:1"}, wantNeeded: 1, wantEvents: []string{`Normal Pulling: Pulling image "a:1"`, `Normal Pulled: Successfully pulled image "a:1"`}},
		{name: "Always pulls a present image", images: []string{"a:1|Always"}, present: []string{"a:1"},
			wantPulls: []string{"a:1"}, wantNeeded: 1, wantEvents: []string{`Normal Pulling`, `Normal Pulled`}},
		{name: "latest defaults to Always", images: []string{"a"}, present: []string{"a:latest"},
			wantPulls: []string{"a:latest"}, wantNeeded: 1, wantEvents: []string{`Normal Pulling`, `Normal Pulled`}},
		{name: "Never and absent fails without a pull", images: []string{"a:1|Never"},
			wantNeeded: 1, wantFailed: ReasonErrImageNeverPull, wantEvents: []string{`Warning ErrImageNeverPull: Container image "a:1" is not present with pull policy of Never`}},
		{name: "a failed pull is reported", images: []string{"a:1"}, pullErr: errors.New("manifest unknown"),
			wantPulls: []string{"a:1"}, wantNeeded: 1, wantFailed: ReasonErrImagePull, wantEvents: []string{`Normal Pulling`, `Warning Failed: Failed to pull image "a:1": manifest unknown`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newCRITestEnv(t)
			env.is.SetFakeImages(tt.present)
			if tt.pullErr != nil {
				env.is.InjectError("PullImage", tt.pullErr)
			}
			var announced []string
			res := env.m.PrePull(context.Background(), prePullPod(tt.images...), func(images []string) { announced = images })
			if res.Needed != tt.wantNeeded {
				t.Errorf("needed %d images, want %d", res.Needed, tt.wantNeeded)
			}
			if tt.wantNeeded > 0 != (announced != nil) {
				t.Errorf("announced %v for %d images needed", announced, tt.wantNeeded)
			}
			if n := countOf(env.is.Called, "PullImage"); n != len(tt.wantPulls) {
				t.Errorf("%d pulls (calls %v), want %v", n, env.is.Called, tt.wantPulls)
			}
			for _, img := range tt.wantPulls {
				if _, ok := env.is.Images[img]; tt.pullErr == nil && !ok {
					t.Errorf("image %s not present after the pre-pull", img)
				}
			}
			if err := res.Err(); syncReason(err) != tt.wantFailed || (tt.wantFailed == "") != (err == nil) {
				t.Errorf("err %v, want reason %q", err, tt.wantFailed)
			}
			if tt.wantFailed == ReasonErrImagePull && (res.RetryAfter != 10*time.Second || res.Failed[0].Image != "a:1" || !slices.Equal(res.Failed[0].Containers, []string{"init", "c0"})) {
				t.Errorf("failure %+v, retry after %s; want a:1 of init and c0, retry after the 10s back-off", res.Failed, res.RetryAfter)
			}
			events := env.events.take()
			if len(events) != len(tt.wantEvents) {
				t.Fatalf("events %q, want %d like %q", events, len(tt.wantEvents), tt.wantEvents)
			}
			for i, e := range events {
				if !strings.HasPrefix(e, tt.wantEvents[i]) {
					t.Errorf("event %q, want it to start with %q", e, tt.wantEvents[i])
				}
			}
		})
	}
}

// TestPrePullBackOff: a pre-pull of an image whose pull failed a moment
// ago does not pull, and says when it may.
func TestPrePullBackOff(t *testing.T) {
	env := newCRITestEnv(t)
	env.is.InjectError("PullImage", errors.New("unreachable"))
	pod := prePullPod("a:1")
	env.m.PrePull(context.Background(), pod, nil)
	env.is.Called = nil
	env.clock.Step(4 * time.Second)
	res := env.m.PrePull(context.Background(), pod, nil)
	if slices.Contains(env.is.Called, "PullImage") || syncReason(res.Err()) != ReasonImagePullBackOff || res.RetryAfter != 6*time.Second {
		t.Errorf("calls %v, err %v, retry after %s; want no pull, ImagePullBackOff for 6s", env.is.Called, res.Err(), res.RetryAfter)
	}
}

func countOf(calls []string, name string) int {
	n := 0
	for _, c := range calls {
		if c == name {
			n++
		}
	}
	return n
}

// gatedImages holds every pull until the test releases it, counting the
// pulls in flight.
type gatedImages struct {
	internalapi.ImageManagerService
	release chan struct{}

	mu       sync.Mutex // guards the fields below
	inflight int
	most     int
}

func (g *gatedImages) PullImage(ctx context.Context, img *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, sc *runtimeapi.PodSandboxConfig) (string, error) {
	g.mu.Lock()
	g.inflight++
	g.most = max(g.most, g.inflight)
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.inflight--
		g.mu.Unlock()
	}()
	select {
	case <-g.release:
		return g.ImageManagerService.PullImage(ctx, img, auth, sc)
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

func (g *gatedImages) counts() (inflight, most int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inflight, g.most
}

// TestPrePullParallel: at most PrePullParallel pre-pull image pulls run
// at once, of two pods together, and a cancelled pre-pull ends its pulls
// and starts no back-off.
func TestPrePullParallel(t *testing.T) {
	for _, cancel := range []bool{false, true} {
		t.Run(fmt.Sprintf("cancelled %v", cancel), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				images := []string{"a:1", "b:1", "c:1", "d:1", "e:1"}
				g := &gatedImages{ImageManagerService: fakeapi.NewFakeImageService(), release: make(chan struct{})}
				events := &eventLog{}
				m := NewManager(fakeapi.NewFakeRuntimeService(), g, Options{Clock: clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0)), Recorder: events, PodLogsDir: t.TempDir()})
				ctx, stop := context.WithCancel(context.Background())
				defer stop()
				done, other := make(chan PrePullResult), make(chan PrePullResult)
				go func() { done <- m.PrePull(ctx, prePullPod(images...), nil) }()
				go func() { other <- m.PrePull(ctx, prePullPod("f:1", "g:1"), nil) }()
				synctest.Wait()
				if inflight, _ := g.counts(); inflight != PrePullParallel {
					t.Fatalf("%d pulls in flight, want %d", inflight, PrePullParallel)
				}
				if cancel {
					stop()
					res := <-done
					if len(res.Failed) != len(images) || res.Pulled != 0 {
						t.Errorf("cancelled pre-pull: %d failed, %d pulled; want all %d failed", len(res.Failed), res.Pulled, len(images))
					}
					if slices.ContainsFunc(events.take(), func(e string) bool { return strings.HasPrefix(e, "Warning Failed") }) {
						t.Error("a cancelled pull was reported as a failure of its image")
					}
					if left := m.pullBackoff.RemainingSinceLast("a:1"); left != 0 {
						t.Errorf("a cancelled pull started a back-off of %s", left)
					}
					<-other
					return
				}
				close(g.release)
				res := <-done
				if o := <-other; o.Pulled != 2 {
					t.Errorf("the other pod pulled %d images, want 2", o.Pulled)
				}
				if _, most := g.counts(); most != PrePullParallel || res.Pulled != len(images) || res.Err() != nil {
					t.Errorf("at most %d pulls at once, %d pulled, err %v; want %d, %d, nil", most, res.Pulled, res.Err(), PrePullParallel, len(images))
				}
			})
		})
	}
}
