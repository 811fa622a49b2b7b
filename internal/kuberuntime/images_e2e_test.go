//go:build e2e

package kuberuntime

import (
	"context"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

func TestE2EEnsureImage(t *testing.T) {
	m := newE2EManager(t)
	events := &eventLog{}
	m.opts.Recorder = events
	ctx := context.Background()

	t.Run("Always pulls from the registry", func(t *testing.T) {
		pod, c := imagePod(testBed.RegistryBusyboxImage, v1.PullAlways)
		img, err := m.EnsureImage(ctx, pod, c, nil)
		ref := img.Ref
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(ref, "sha256:") {
			t.Errorf("image ref = %q, want an image ID", ref)
		}
		got := events.take()
		if len(got) != 2 || !strings.HasPrefix(got[0], "Normal Pulling") || !strings.HasPrefix(got[1], "Normal Pulled: Successfully pulled") {
			t.Errorf("events = %q, want Pulling then Pulled", got)
		}
		t.Logf("events: %q", got)
	})

	t.Run("Never refuses an absent image", func(t *testing.T) {
		absent := testBed.Registry + "/library/busybox:0.0-absent"
		pod, c := imagePod(absent, v1.PullNever)
		_, err := m.EnsureImage(ctx, pod, c, nil)
		if syncReason(err) != ReasonErrImageNeverPull || !strings.Contains(err.Error(), absent) {
			t.Errorf("err = %v, want ErrImageNeverPull naming %s", err, absent)
		}
		if got := events.take(); len(got) != 1 || !strings.HasPrefix(got[0], "Warning ErrImageNeverPull") {
			t.Errorf("events = %q, want one ErrImageNeverPull warning", got)
		}
	})

	t.Run("short name finds the imported image without pulling", func(t *testing.T) {
		pod, c := imagePod("busybox:1.36", v1.PullNever)
		img, err := m.EnsureImage(ctx, pod, c, nil)
		ref := img.Ref
		if err != nil {
			t.Fatalf("busybox:1.36 not resolved to %s: %v", testBed.BusyboxImage, err)
		}
		if !strings.HasPrefix(ref, "sha256:") {
			t.Errorf("image ref = %q", ref)
		}
		if got := events.take(); !slices.Equal(got, []string{`Normal Pulled: Container image "busybox:1.36" already present on machine`}) {
			t.Errorf("events = %q", got)
		}
	})

	t.Run("failed pull backs off", func(t *testing.T) {
		missing := testBed.Registry + "/library/nothing:1"
		pod, c := imagePod(missing, v1.PullIfNotPresent)
		if _, err := m.EnsureImage(ctx, pod, c, nil); syncReason(err) != ReasonErrImagePull {
			t.Fatalf("first attempt: %v, want ErrImagePull", err)
		}
		if _, err := m.EnsureImage(ctx, pod, c, nil); syncReason(err) != ReasonImagePullBackOff {
			t.Fatalf("second attempt: %v, want ImagePullBackOff", err)
		}
		t.Logf("events: %q", events.take())
	})
}
