package kuberuntime

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/images"
)

// EnsureImage makes the container's image present according to its
// imagePullPolicy and returns the image reference to create the container
// from (ImageResult.Ref). Failures are *SyncError with the kubelet's reasons: InvalidImageName,
// ImageInspectError, ErrImageNeverPull (policy Never and the image absent),
// ErrImagePull (the pull failed; the image's back-off starts or grows) and
// ImagePullBackOff (a pull failed recently: no pull is attempted until the
// back-off has passed). Back-off is per image, so pods sharing a broken image
// do not hammer the registry in turn. It records Pulling, Pulled, Failed
// and BackOff events for the pod.
func (m *Manager) EnsureImage(ctx context.Context, pod *v1.Pod, c *v1.Container, sandboxConfig *runtimeapi.PodSandboxConfig) (ImageResult, error) {
	event := func(typ EventType, reason, message string) {
		m.opts.Recorder.Event(pod.UID, pod.Name, pod.Namespace, typ, reason, message)
	}
	image, tag, digest, err := criconfig.ApplyDefaultTag(c.Image)
	if err != nil {
		msg := fmt.Sprintf("Failed to apply default image tag %q: %v", c.Image, err)
		event(EventWarning, "InspectFailed", msg)
		return ImageResult{}, &SyncError{Reason: ReasonInvalidImageName, Message: msg, Err: err}
	}
	spec := &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: c.Image}
	ref, err := m.images.Ref(ctx, spec)
	if err != nil {
		msg := fmt.Sprintf("Failed to inspect image %q: %v", image, err)
		event(EventWarning, "InspectFailed", msg)
		return ImageResult{}, &SyncError{Reason: ReasonImageInspectError, Message: msg, Err: err}
	}
	if ref == "" {
		if ref, err = m.waitForImport(ctx, spec, event); err != nil {
			return ImageResult{}, err
		}
	}
	if !images.ShouldPull(images.PullPolicy(c.ImagePullPolicy, tag, digest), ref != "") {
		if ref != "" {
			event(EventNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine", image))
			return ImageResult{Ref: ref}, nil
		}
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", image)
		event(EventWarning, ReasonErrImageNeverPull, msg)
		return ImageResult{}, &SyncError{Reason: ReasonErrImageNeverPull, Message: msg}
	}
	creds, err := m.images.Credentials(pod, image)
	if err != nil {
		msg := fmt.Sprintf("Failed to pull image %q: %v", image, err)
		event(EventWarning, "Failed", msg)
		return ImageResult{}, &SyncError{Reason: ReasonErrImagePull, Message: msg, Err: err}
	}
	backoffKey := images.BackoffKey(image, creds)
	if remaining := m.pullBackoff.RemainingSinceLast(backoffKey); remaining > 0 {
		msg := fmt.Sprintf("Back-off pulling image %q", image)
		event(EventNormal, "BackOff", msg)
		return ImageResult{RetryAfter: remaining}, &SyncError{Reason: ReasonImagePullBackOff, Message: msg}
	}
	event(EventNormal, "Pulling", fmt.Sprintf("Pulling image %q", image))
	start := m.clock.Now()
	ref, err = m.images.Pull(ctx, spec, creds, sandboxConfig)
	pulling := m.clock.Since(start)
	if err != nil {
		msg := fmt.Sprintf("Failed to pull image %q: %v", image, err)
		// A pull cut short because the pod went away or berth is stopping
		// says nothing about the image: it does not start a back-off.
		if ctx.Err() == nil {
			m.pullBackoff.Next(backoffKey)
			event(EventWarning, "Failed", msg)
		}
		return ImageResult{RetryAfter: m.pullBackoff.RemainingSinceLast(backoffKey), Pulling: pulling}, &SyncError{Reason: ReasonErrImagePull, Message: msg, Err: err}
	}
	m.pullBackoff.Reset(backoffKey)
	event(EventNormal, "Pulled", fmt.Sprintf("Successfully pulled image %q in %v", image, pulling.Round(time.Millisecond)))
	return ImageResult{Ref: ref, Pulling: pulling}, nil
}

// ImageResult is what EnsureImage found and did.
type ImageResult struct {
	// Ref is the runtime's ID of the image, "" on failure.
	Ref string
	// RetryAfter is how long the image's pull back-off still runs after
	// an ErrImagePull or ImagePullBackOff; 0 after any other outcome.
	RetryAfter time.Duration
	// Pulling is how long the pull took, failed or not, without
	// inspecting the image or waiting out a back-off: the image pull time
	// the pod start SLI leaves out.
	Pulling time.Duration
}

// waitForImport waits, while the image is missing and image archives are
// being preloaded (Options.PendingImport), for the preloads to finish, so
// a pod whose image is on its way from an archive starts from it rather
// than failing a pull; it returns the image's ID once present, "" when
// nothing is pending any more and the image is still missing.
func (m *Manager) waitForImport(ctx context.Context, spec *runtimeapi.ImageSpec, event func(EventType, string, string)) (string, error) {
	if m.opts.PendingImport == nil {
		return "", nil
	}
	for waited := false; ; waited = true {
		pending := m.opts.PendingImport()
		if pending == nil {
			return "", nil
		}
		if !waited {
			event(EventNormal, ReasonWaitingForImport, fmt.Sprintf("Container image %q is not present; waiting for the image archives being preloaded", spec.Image))
		}
		select {
		case <-pending:
		case <-ctx.Done():
			return "", fmt.Errorf("wait for the preload of image %q: %w", spec.Image, ctx.Err())
		}
		ref, err := m.images.Ref(ctx, spec)
		if err != nil {
			msg := fmt.Sprintf("Failed to inspect image %q: %v", spec.Image, err)
			event(EventWarning, "InspectFailed", msg)
			return "", &SyncError{Reason: ReasonImageInspectError, Message: msg, Err: err}
		}
		if ref != "" {
			return ref, nil
		}
	}
}
