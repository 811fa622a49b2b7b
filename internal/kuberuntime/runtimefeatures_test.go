package kuberuntime

import (
	"context"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/criconfig"
)

// versionedRuntime is a runtime that reports a given version and handler
// features, over the fake.
type versionedRuntime struct {
	internalapi.RuntimeService
	name, version string
	handlers      []*runtimeapi.RuntimeHandler
}

func (r versionedRuntime) Version(context.Context, string) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: r.name, RuntimeVersion: r.version}, nil
}

func (r versionedRuntime) Status(context.Context, bool) (*runtimeapi.StatusResponse, error) {
	return &runtimeapi.StatusResponse{RuntimeHandlers: r.handlers}, nil
}

func TestParseRuntimeVersion(t *testing.T) {
	for in, want := range map[string][2]int{"v2.1.9": {2, 1}, "1.6.20~ds1": {1, 6}, "1.31.0-rc.1": {1, 31}, "2.0": {2, 0}} {
		v := parseRuntimeVersion("containerd", in)
		if !v.parsed || v.major != want[0] || v.minor != want[1] {
			t.Errorf("parse %q = %+v, want %v", in, v, want)
		}
	}
	for _, in := range []string{"", "devel", "x.y", "2"} {
		if v := parseRuntimeVersion("containerd", in); v.parsed || !v.atLeast("containerd", 9, 9) {
			t.Errorf("parse %q = %+v: want unparsed and taken as new enough", in, v)
		}
	}
}

func TestCheckRuntimeFeatures(t *testing.T) {
	no := false
	imagePod := func() *v1.Pod {
		p := sbPod()
		p.Spec.Volumes = []v1.Volume{{Name: "a", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
			{Name: "data", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "data:1"}}}}
		return p
	}
	usernsPod := func() *v1.Pod {
		p := sbPod()
		p.Spec.HostUsers = &no
		return p
	}
	supported := []*runtimeapi.RuntimeHandler{{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{UserNamespaces: true}}}
	unsupported := []*runtimeapi.RuntimeHandler{{Name: "", Features: &runtimeapi.RuntimeHandlerFeatures{RecursiveReadOnlyMounts: true}}}
	tests := []struct {
		name, runtime, version string
		handlers               []*runtimeapi.RuntimeHandler
		pod                    *v1.Pod
		wantErr                string
	}{
		{name: "plain pod asks nothing", runtime: "containerd", version: "1.6.20~ds1", pod: sbPod()},
		{name: "image volume on 2.1", runtime: "containerd", version: "v2.1.9", pod: imagePod()},
		{name: "image volume on 1.6", runtime: "containerd", version: "1.6.20~ds1", pod: imagePod(),
			wantErr: "spec.volumes[1].image: image volumes need containerd >= 2.1 (the runtime is containerd 1.6.20~ds1)"},
		{name: "image volume on 2.0", runtime: "containerd", version: "v2.0.5", pod: imagePod(),
			wantErr: "image volumes need containerd >= 2.1"},
		{name: "image volume on CRI-O 1.30", runtime: "cri-o", version: "1.30.2", pod: imagePod(),
			wantErr: "image volumes need cri-o >= 1.31"},
		{name: "image volume on another runtime", runtime: "other", version: "0.1", pod: imagePod()},
		{name: "userns on 1.7", runtime: "containerd", version: "v1.7.35", pod: usernsPod(),
			wantErr: "spec.hostUsers: false: user namespaces need containerd >= 2.0 with runc >= 1.2 (the runtime is containerd v1.7.35)"},
		{name: "userns on 2.1 with old runc", runtime: "containerd", version: "v2.1.9", handlers: unsupported, pod: usernsPod(),
			wantErr: "the runtime (containerd v2.1.9) reports no user-namespace support for its default handler: it needs runc >= 1.2"},
		{name: "userns on 2.1 without handlers", runtime: "containerd", version: "v2.1.9", pod: usernsPod(),
			wantErr: "reports no user-namespace support"},
		{name: "userns on 2.1 with runc 1.2", runtime: "containerd", version: "v2.1.9", handlers: supported, pod: usernsPod()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, rt, _ := newCfgManager(t, Options{})
			m.runtime = versionedRuntime{RuntimeService: rt, name: tt.runtime, version: tt.version, handlers: tt.handlers}
			err := m.checkRuntimeFeatures(context.Background(), tt.pod)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

// TestSyncPodRefusesImageVolumeOnOldRuntime: the refusal comes before any
// sandbox, as a CreatePodSandboxError with an event naming the field.
func TestSyncPodRefusesImageVolumeOnOldRuntime(t *testing.T) {
	m, rt, _ := newCfgManager(t, Options{})
	m.runtime = versionedRuntime{RuntimeService: rt, name: "containerd", version: "1.6.20~ds1"}
	pod := sbPod()
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "data:1", PullPolicy: v1.PullIfNotPresent}}}}
	res := syncPlanned(context.Background(), m, pod, nil)
	err := res.Error()
	if err == nil || !strings.Contains(err.Error(), "CreatePodSandboxError: spec.volumes[0].image: image volumes need containerd >= 2.1") {
		t.Fatalf("SyncPod error = %v", err)
	}
	if len(rt.Sandboxes) != 0 {
		t.Errorf("a sandbox was made: %v", rt.Sandboxes)
	}
}

func TestImageVolumeMounts(t *testing.T) {
	m, _, _ := newCfgManager(t, Options{})
	pod := sbPod()
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "data:1.0", PullPolicy: v1.PullIfNotPresent}}}}
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data", SubPath: "etc"}}

	// Not pulled yet: the config refuses rather than mount something else.
	if _, err := m.containerConfig(context.Background(), pod, c, 0, nil, "busybox"); err == nil || !strings.Contains(err.Error(), `image volume at /data: image "data:1.0" is not present`) {
		t.Fatalf("err = %v, want image not present", err)
	}
	if _, _, err := m.ensureImageVolumes(context.Background(), pod, c, nil); err != nil {
		t.Fatal(err)
	}
	cfg, err := m.containerConfig(context.Background(), pod, c, 0, nil, "busybox")
	if err != nil {
		t.Fatal(err)
	}
	mnt := mountAt(cfg, "/data")
	if mnt == nil || mnt.Image.GetImage() != "data:1.0" || mnt.Image.GetUserSpecifiedImage() != "data:1.0" || mnt.ImageSubPath != "etc" || !mnt.Readonly || mnt.HostPath != "" {
		t.Errorf("mount = %v", mnt)
	}
	if got := cfg.Annotations[criconfig.AnnotationImageVolumes]; got != "data:1.0" {
		t.Errorf("image-volumes annotation = %q, want the image's ID (the fake's is its name)", got)
	}
}

func TestEnsureImageVolumesPullFailure(t *testing.T) {
	m, _, img := newCfgManager(t, Options{})
	img.InjectError("PullImage", context.DeadlineExceeded)
	pod := sbPod()
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{Image: &v1.ImageVolumeSource{Reference: "data:1.0", PullPolicy: v1.PullAlways}}}}
	c := &pod.Spec.Containers[0]
	c.VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	retry, _, err := m.ensureImageVolumes(context.Background(), pod, c, nil)
	se, ok := err.(*SyncError)
	if !ok || se.Reason != ReasonErrImagePull || !strings.HasPrefix(se.Message, `image volume "data": Failed to pull image "data:1.0"`) {
		t.Fatalf("err = %v, want ErrImagePull naming the volume", err)
	}
	if retry <= 0 {
		t.Errorf("retryAfter = %v, want the image's back-off", retry)
	}
}
