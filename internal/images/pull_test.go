package images

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeri "k8s.io/cri-api/pkg/apis/testing"
)

// authImages is a fake image service whose pulls succeed only with the
// password "right", and which records the users it was asked with.
type authImages struct {
	*fakeri.FakeImageService
	users []string
}

func (a *authImages) PullImage(_ context.Context, spec *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, _ *runtimeapi.PodSandboxConfig) (string, error) {
	if auth == nil {
		a.users = append(a.users, "<anonymous>")
		return "", errors.New("401 Unauthorized")
	}
	a.users = append(a.users, auth.Username)
	if auth.Password != "right" {
		return "", errors.New("401 Unauthorized for " + auth.Username)
	}
	return spec.Image, nil
}

// TestPullTriesEachCredential: the first credential that works pulls; the
// error of a pull that fails with all of them names each failure.
func TestPullTriesEachCredential(t *testing.T) {
	tests := []struct {
		name      string
		creds     []*runtimeapi.AuthConfig
		wantUsers string
		wantErr   string
	}{
		{"anonymous", nil, "<anonymous>", "401 Unauthorized (berth had no credentials for docker.io: name an image pull Secret in imagePullSecrets, put them in the node's config.json, or configure an image credential provider)"},
		{"the second works", []*runtimeapi.AuthConfig{{Username: "a", Password: "wrong"}, {Username: "b", Password: "right"}, {Username: "c", Password: "right"}}, "a b", ""},
		{"none works", []*runtimeapi.AuthConfig{{Username: "a", Password: "x"}, {Username: "b", Password: "y"}}, "a b",
			"with each of 2 credentials: 401 Unauthorized for a; 401 Unauthorized for b"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			is := &authImages{FakeImageService: fakeri.NewFakeImageService()}
			_, err := New(is, Options{}).Pull(context.Background(), &runtimeapi.ImageSpec{Image: "r/app:1"}, tt.creds, nil)
			if got := strings.Join(is.users, " "); got != tt.wantUsers {
				t.Errorf("tried %q, want %q", got, tt.wantUsers)
			}
			if (err == nil) != (tt.wantErr == "") || (err != nil && err.Error() != tt.wantErr) {
				t.Errorf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

func TestPullBackoffKey(t *testing.T) {
	a := []*runtimeapi.AuthConfig{{Username: "u", Password: "secret-a"}}
	b := []*runtimeapi.AuthConfig{{Username: "u", Password: "secret-b"}}
	keys := map[string]bool{}
	for _, k := range []string{BackoffKey("img:1", nil), BackoffKey("img:1", a), BackoffKey("img:1", b), BackoffKey("img:2", a)} {
		if keys[k] {
			t.Errorf("key %q shared by different images or credentials", k)
		}
		keys[k] = true
		if strings.Contains(k, "secret") {
			t.Errorf("key %q holds a password", k)
		}
	}
	if BackoffKey("img:1", a) != BackoffKey("img:1", []*runtimeapi.AuthConfig{{Username: "u", Password: "secret-a"}}) {
		t.Errorf("the same credentials give different keys")
	}
	if BackoffKey("img:1", nil) != "img:1" {
		t.Errorf("an anonymous pull is keyed by more than its image")
	}
}

func TestPodImages(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{
		InitContainers:      []v1.Container{{Image: "init:1"}, {Image: "app:1"}},
		Containers:          []v1.Container{{Image: "app:1"}, {Image: "sidecar:1"}},
		EphemeralContainers: []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Image: "debug:1"}}},
		Volumes: []v1.Volume{
			{Name: "data", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "data:1"}}},
			{Name: "empty", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		},
	}}
	want := []string{"init:1", "app:1", "sidecar:1", "debug:1", "data:1"}
	if got := PodImages(pod); !slices.Equal(got, want) {
		t.Errorf("PodImages = %v, want %v", got, want)
	}
}
