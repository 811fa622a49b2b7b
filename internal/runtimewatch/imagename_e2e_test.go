//go:build e2e

package runtimewatch

import (
	"context"
	"slices"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestE2EImageNameEcho records what each containerd gives back of the image
// a container was created with, the way berth creates it: from the
// resolved image ID, with the manifest's name as UserSpecifiedImage.
// containerd 1.6, 1.7 and 2.1 all report one of the image's repo tags
// (docker.io/library/busybox:1.36) and none echoes UserSpecifiedImage in
// podplan.ContainerStatus (2.x only uses it for the OCI spec's image-name
// annotation), so berth's own annotation (criconfig.AnnotationContainerImage) stays
// the only way to show the image as written, on every version.
func TestE2EImageNameEcho(t *testing.T) {
	env := newE2EEnv(t)
	ctx := context.Background()
	img, err := env.is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: testBed.BusyboxImage}, false)
	if err != nil || img.GetImage() == nil {
		t.Fatalf("busybox image status: %v", err)
	}
	p := env.startPod(ctx, t, "echo", true)
	sb, err := env.rs.PodSandboxStatus(ctx, p.SandboxID, false)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &runtimeapi.PodSandboxConfig{Metadata: sb.GetStatus().GetMetadata(), Labels: sb.GetStatus().GetLabels()}
	id, err := env.rs.CreateContainer(ctx, p.SandboxID, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "echo"},
		Image:    &runtimeapi.ImageSpec{Image: img.GetImage().GetId(), UserSpecifiedImage: "busybox:1.36"},
		Command:  []string{"true"},
		Labels:   sb.GetStatus().GetLabels(),
	}, cfg)
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	st, err := env.rs.ContainerStatus(ctx, id, false)
	if err != nil {
		t.Fatal(err)
	}
	got := st.GetStatus().GetImage()
	t.Logf("containerd %s: status image %q, user-specified %q", testBed.ContainerdVersion, got.GetImage(), got.GetUserSpecifiedImage())
	// The runtime names the image by one of its repo tags; which one
	// depends on what else tagged it (the registry tests pull the same
	// image under 127.0.0.1:PORT/...), so read them after the create.
	img, err = env.is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: img.GetImage().GetId()}, false)
	if err != nil {
		t.Fatal(err)
	}
	tags := img.GetImage().GetRepoTags()
	if !slices.Contains(tags, got.GetImage()) || got.GetUserSpecifiedImage() != "" {
		t.Errorf("containerd %s reports image %q / user-specified %q, want one of the repo tags %q / none: berth's image annotation may no longer be needed",
			testBed.ContainerdVersion, got.GetImage(), got.GetUserSpecifiedImage(), tags)
	}
	if s := specImage(st.GetStatus()); s != got.GetImage() {
		t.Errorf("specImage without berth's annotation = %q, want the runtime's %q", s, got.GetImage())
	}
}
