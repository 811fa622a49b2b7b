package kuberuntime

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/criconfig"
)

func imagePod(image string, policy v1.PullPolicy) (*v1.Pod, *v1.Container) {
	pod := &v1.Pod{}
	pod.UID, pod.Name, pod.Namespace = types.UID("uid-1"), "web-node", "default"
	pod.Spec.Containers = []v1.Container{{Name: "app", Image: image, ImagePullPolicy: policy}}
	return pod, &pod.Spec.Containers[0]
}

func syncReason(err error) string {
	var se *SyncError
	if errors.As(err, &se) {
		return se.Reason
	}
	return ""
}

func TestEnsureImagePolicies(t *testing.T) {
	tests := []struct {
		name      string
		image     string
		policy    v1.PullPolicy
		present   []string
		wantRef   string
		wantPull  bool
		wantEvent string
		wantErr   string // SyncError reason
	}{
		{"IfNotPresent present", "busybox:1.36", v1.PullIfNotPresent, []string{"busybox:1.36"}, "busybox:1.36", false,
			`Normal Pulled: Container image "busybox:1.36" already present on machine`, ""},
		{"IfNotPresent absent pulls", "busybox:1.36", v1.PullIfNotPresent, nil, "busybox:1.36", true, "Normal Pulled: Successfully pulled", ""},
		{"Always pulls even when present", "busybox:1.36", v1.PullAlways, []string{"busybox:1.36"}, "busybox:1.36", true, "Normal Pulled: Successfully pulled", ""},
		{"Never present", "busybox:1.36", v1.PullNever, []string{"busybox:1.36"}, "busybox:1.36", false, "Normal Pulled", ""},
		{"Never absent", "busybox:1.36", v1.PullNever, nil, "", false,
			`Warning ErrImageNeverPull: Container image "busybox:1.36" is not present with pull policy of Never`, ReasonErrImageNeverPull},
		{"untagged gets latest and defaults to Always", "busybox", "", []string{"busybox:latest"}, "busybox:latest", true, "Normal Pulled: Successfully", ""},
		{"tagged defaults to IfNotPresent", "busybox:1.36", "", []string{"busybox:1.36"}, "busybox:1.36", false, "Normal Pulled: Container image", ""},
		{"digest defaults to IfNotPresent", "busybox@sha256:" + strings.Repeat("a", 64), "", []string{"busybox@sha256:" + strings.Repeat("a", 64)},
			"busybox@sha256:" + strings.Repeat("a", 64), false, "Normal Pulled: Container image", ""},
		{"invalid name", "BusyBox:1", v1.PullAlways, nil, "", false, "Warning InspectFailed", ReasonInvalidImageName},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newCRITestEnv(t)
			env.is.SetFakeImages(tt.present)
			pod, c := imagePod(tt.image, tt.policy)
			img, err := env.m.EnsureImage(context.Background(), pod, c, nil)
			ref := img.Ref
			if got := syncReason(err); got != tt.wantErr || (err != nil && tt.wantErr == "") {
				t.Fatalf("err = %v, want reason %q", err, tt.wantErr)
			}
			if ref != tt.wantRef {
				t.Errorf("ref = %q, want %q", ref, tt.wantRef)
			}
			if pulled := slices.Contains(env.is.Called, "PullImage"); pulled != tt.wantPull {
				t.Errorf("pulled = %v, want %v (calls %v)", pulled, tt.wantPull, env.is.Called)
			}
			events := env.events.take()
			if len(events) == 0 || !strings.HasPrefix(events[len(events)-1], tt.wantEvent) {
				t.Errorf("events %q, want the last to start with %q", events, tt.wantEvent)
			}
			if tt.wantErr == ReasonErrImageNeverPull && !strings.Contains(err.Error(), `"busybox:1.36"`) {
				t.Errorf("error %q does not name the image", err)
			}
		})
	}
}

func TestEnsureImagePullBackoff(t *testing.T) {
	env := newCRITestEnv(t)
	pod, c := imagePod("registry.local:5000/app:1", v1.PullAlways)
	ctx := context.Background()
	pullErr := status.Error(codes.NotFound, "manifest unknown")

	steps := []struct {
		advance   time.Duration
		fail      bool
		wantErr   string
		wantPull  bool
		wantRetry time.Duration
	}{
		{0, true, ReasonErrImagePull, true, 10 * time.Second},       // first failure: back-off 10s
		{0, false, ReasonImagePullBackOff, false, 10 * time.Second}, // at once: backing off, no pull
		{9 * time.Second, false, ReasonImagePullBackOff, false, time.Second},
		{time.Second, true, ReasonErrImagePull, true, 20 * time.Second}, // 10s passed: pull, fail again: 20s
		{10 * time.Second, false, ReasonImagePullBackOff, false, 10 * time.Second},
		{10 * time.Second, false, "", true, 0},                // 20s passed: pull succeeds
		{0, true, ReasonErrImagePull, true, 10 * time.Second}, // success reset the back-off...
		{10 * time.Second, false, "", true, 0},                // ...so 10s suffice again
	}
	for i, s := range steps {
		env.clock.Step(s.advance)
		if s.fail {
			env.is.InjectError("PullImage", pullErr)
		}
		env.is.Called = nil
		img, err := env.m.EnsureImage(ctx, pod, c, nil)
		retry := img.RetryAfter
		if got := syncReason(err); got != s.wantErr {
			t.Fatalf("step %d: err = %v, want reason %q", i, err, s.wantErr)
		}
		if retry != s.wantRetry {
			t.Errorf("step %d: retry after %v, want %v", i, retry, s.wantRetry)
		}
		if pulled := slices.Contains(env.is.Called, "PullImage"); pulled != s.wantPull {
			t.Fatalf("step %d: pulled = %v, want %v", i, pulled, s.wantPull)
		}
		if s.wantErr == ReasonErrImagePull && !errors.Is(err, pullErr) {
			t.Errorf("step %d: %v does not wrap the runtime's error", i, err)
		}
	}
	want := []string{
		`Normal Pulling: Pulling image "registry.local:5000/app:1"`,
		`Warning Failed: Failed to pull image "registry.local:5000/app:1": rpc error: code = NotFound desc = manifest unknown`,
		`Normal BackOff: Back-off pulling image "registry.local:5000/app:1"`,
	}
	if got := env.events.take()[:3]; !slices.Equal(got, want) {
		t.Errorf("events =\n%q\nwant\n%q", got, want)
	}
}

func TestEnsureImageBackoffIsPerImage(t *testing.T) {
	env := newCRITestEnv(t)
	env.is.InjectError("PullImage", errors.New("unreachable"))
	pod, bad := imagePod("bad:1", v1.PullAlways)
	ctx := context.Background()
	if _, err := env.m.EnsureImage(ctx, pod, bad, nil); syncReason(err) != ReasonErrImagePull {
		t.Fatalf("err = %v", err)
	}
	_, good := imagePod("good:1", v1.PullAlways)
	if _, err := env.m.EnsureImage(ctx, pod, good, nil); err != nil {
		t.Errorf("another image is held back by bad:1's back-off: %v", err)
	}
}

func TestEnsureImageCancelledPullStartsNoBackoff(t *testing.T) {
	env := newCRITestEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	env.is.InjectError("PullImage", context.Canceled)
	pod, c := imagePod("busybox:1.36", v1.PullAlways)
	if _, err := env.m.EnsureImage(ctx, pod, c, nil); syncReason(err) != ReasonErrImagePull {
		t.Fatalf("err = %v, want ErrImagePull", err)
	}
	if _, err := env.m.EnsureImage(context.Background(), pod, c, nil); err != nil {
		t.Errorf("a cancelled pull put the image into back-off: %v", err)
	}
}

func TestEnsureImageInspectError(t *testing.T) {
	env := newCRITestEnv(t)
	env.is.InjectError("ImageStatus", status.Error(codes.Unavailable, "down"))
	pod, c := imagePod("busybox:1.36", v1.PullIfNotPresent)
	if _, err := env.m.EnsureImage(context.Background(), pod, c, nil); syncReason(err) != ReasonImageInspectError {
		t.Errorf("err = %v, want ImageInspectError", err)
	}
}

func TestApplyDefaultTag(t *testing.T) {
	digest := "sha256:" + strings.Repeat("0123456789abcdef", 4)
	tests := []struct {
		in, want, tag, digest string
		bad                   bool
	}{
		{in: "busybox", want: "busybox:latest"},
		{in: "busybox:1.36", want: "busybox:1.36", tag: "1.36"},
		{in: "docker.io/library/busybox:1.36", want: "docker.io/library/busybox:1.36", tag: "1.36"},
		{in: "localhost:5000/app", want: "localhost:5000/app:latest"},
		{in: "127.0.0.1:5000/team/app:v2", want: "127.0.0.1:5000/team/app:v2", tag: "v2"},
		{in: "app@" + digest, want: "app@" + digest, digest: digest},
		{in: "app:v1@" + digest, want: "app:v1@" + digest, tag: "v1", digest: digest},
		{in: "", bad: true},
		{in: "Busybox", bad: true},
		{in: "busybox:", bad: true},
		{in: "busybox:-x", bad: true},
		{in: "a b", bad: true},
		{in: "app@sha256:short", bad: true},
	}
	for _, tt := range tests {
		ref, tag, digest, err := criconfig.ApplyDefaultTag(tt.in)
		if (err != nil) != tt.bad {
			t.Errorf("%q: err = %v, want bad=%v", tt.in, err, tt.bad)
			continue
		}
		if ref != tt.want || tag != tt.tag || digest != tt.digest {
			t.Errorf("%q = %q %q %q, want %q %q %q", tt.in, ref, tag, digest, tt.want, tt.tag, tt.digest)
		}
	}
}
