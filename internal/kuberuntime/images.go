package kuberuntime

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/criconfig"
)

// EnsureImage makes the container's image present according to its
// imagePullPolicy and returns the image reference to create the container
// from. Failures are *SyncError with the kubelet's reasons: InvalidImageName,
// ImageInspectError, ErrImageNeverPull (policy Never and the image absent),
// ErrImagePull (the pull failed; the image's back-off starts or grows) and
// ImagePullBackOff (a pull failed recently: no pull is attempted until the
// back-off has passed). Back-off is per image, so pods sharing a broken image
// do not hammer the registry in turn. It records Pulling, Pulled, Failed and
// BackOff events for the pod.
func (m *Manager) EnsureImage(ctx context.Context, pod *v1.Pod, c *v1.Container, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	ref, _, err := m.ensureImage(ctx, pod, c, sandboxConfig)
	return ref, err
}

// ensureImage is EnsureImage, also saying how long it spent pulling: the
// pull's time, failed or not, without inspecting the image or waiting out
// a back-off (the image pull time the pod start SLI leaves out).
func (m *Manager) ensureImage(ctx context.Context, pod *v1.Pod, c *v1.Container, sandboxConfig *runtimeapi.PodSandboxConfig) (ref string, pulling time.Duration, err error) {
	event := func(typ EventType, reason, message string) {
		m.opts.Recorder.Event(pod.UID, pod.Name, pod.Namespace, typ, reason, message)
	}
	image, tag, digest, err := criconfig.ApplyDefaultTag(c.Image)
	if err != nil {
		msg := fmt.Sprintf("Failed to apply default image tag %q: %v", c.Image, err)
		event(EventWarning, "InspectFailed", msg)
		return "", 0, &SyncError{Reason: ReasonInvalidImageName, Message: msg, Err: err}
	}
	spec := &runtimeapi.ImageSpec{Image: image, UserSpecifiedImage: c.Image}
	ref, err = m.imageRef(ctx, spec)
	if err != nil {
		msg := fmt.Sprintf("Failed to inspect image %q: %v", image, err)
		event(EventWarning, "InspectFailed", msg)
		return "", 0, &SyncError{Reason: ReasonImageInspectError, Message: msg, Err: err}
	}
	if !shouldPull(pullPolicy(c.ImagePullPolicy, tag, digest), ref != "") {
		if ref != "" {
			event(EventNormal, "Pulled", fmt.Sprintf("Container image %q already present on machine", image))
			return ref, 0, nil
		}
		msg := fmt.Sprintf("Container image %q is not present with pull policy of Never", image)
		event(EventWarning, ReasonErrImageNeverPull, msg)
		return "", 0, &SyncError{Reason: ReasonErrImageNeverPull, Message: msg}
	}
	creds, err := m.pullCredentials(pod, image)
	if err != nil {
		msg := fmt.Sprintf("Failed to pull image %q: %v", image, err)
		event(EventWarning, "Failed", msg)
		return "", 0, &SyncError{Reason: ReasonErrImagePull, Message: msg, Err: err}
	}
	backoffKey := pullBackoffKey(image, creds)
	if m.pullBackoff.RemainingSinceLast(backoffKey) > 0 {
		msg := fmt.Sprintf("Back-off pulling image %q", image)
		event(EventNormal, "BackOff", msg)
		return "", 0, &SyncError{Reason: ReasonImagePullBackOff, Message: msg}
	}
	event(EventNormal, "Pulling", fmt.Sprintf("Pulling image %q", image))
	start := m.clock.Now()
	ref, err = m.pull(ctx, spec, creds, sandboxConfig)
	pulling = m.clock.Since(start)
	if err != nil {
		msg := fmt.Sprintf("Failed to pull image %q: %v%s", image, err, noCredentialsHint(image, creds, err))
		// A pull cut short because the pod went away or berth is stopping
		// says nothing about the image: it does not start a back-off.
		if ctx.Err() == nil {
			m.pullBackoff.Next(backoffKey)
			event(EventWarning, "Failed", msg)
		}
		return "", pulling, &SyncError{Reason: ReasonErrImagePull, Message: msg, Err: err}
	}
	m.pullBackoff.Reset(backoffKey)
	event(EventNormal, "Pulled", fmt.Sprintf("Successfully pulled image %q in %v", image, pulling.Round(time.Millisecond)))
	return ref, pulling, nil
}

// pullBackoffKey keys the pull back-off by image and by the credentials
// tried: pods sharing a broken image share its back-off, but a pod without
// credentials, or with wrong ones, never holds back a pod whose
// credentials work. The credentials are hashed, never kept in the clear.
func pullBackoffKey(image string, creds []*runtimeapi.AuthConfig) string {
	if len(creds) == 0 {
		return image
	}
	h := sha256.New()
	for _, c := range creds {
		fmt.Fprintf(h, "%d:%s%d:%s", len(c.Username), c.Username, len(c.Password), c.Password)
	}
	return image + "\x00" + hex.EncodeToString(h.Sum(nil))[:16]
}

// noCredentialsHint explains an anonymous pull the registry refused: some
// runtimes (containerd 2.x) say only "authorization failed" without the
// registry's 401.
func noCredentialsHint(image string, creds []*runtimeapi.AuthConfig, err error) string {
	msg := strings.ToLower(err.Error())
	if len(creds) > 0 || !(strings.Contains(msg, "401") || strings.Contains(msg, "authoriz") || strings.Contains(msg, "unauthorized")) {
		return ""
	}
	host, _, _ := strings.Cut(criconfig.Repository(image), "/")
	return fmt.Sprintf(" (berth had no credentials for %s: name an image pull Secret in imagePullSecrets, or put them in the node's config.json)", host)
}

// pull pulls the image anonymously when there are no credentials, else
// with each in turn until one works, as the kubelet does; the error of a
// pull that fails with all of them names every failure.
func (m *Manager) pull(ctx context.Context, spec *runtimeapi.ImageSpec, creds []*runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	if len(creds) == 0 {
		return m.images.PullImage(ctx, spec, nil, sandboxConfig)
	}
	var msgs []string
	var last error
	for _, auth := range creds {
		ref, err := m.images.PullImage(ctx, spec, auth, sandboxConfig)
		if err == nil {
			return ref, nil
		}
		if ctx.Err() != nil {
			return "", err
		}
		msgs, last = append(msgs, err.Error()), err
	}
	if len(msgs) == 1 {
		return "", last
	}
	return "", fmt.Errorf("with each of %d credentials: %s; %w", len(msgs), strings.Join(msgs[:len(msgs)-1], "; "), last)
}

// imageRef is the runtime's ID of image, "" when the runtime does not have
// it. The runtime resolves short names itself (containerd finds
// docker.io/library/busybox:1.36 for busybox:1.36).
func (m *Manager) imageRef(ctx context.Context, spec *runtimeapi.ImageSpec) (string, error) {
	resp, err := m.images.ImageStatus(ctx, spec, false)
	if err != nil {
		return "", err
	}
	return resp.GetImage().GetId(), nil
}

// shouldPull is the kubelet's decision table.
func shouldPull(policy v1.PullPolicy, present bool) bool {
	switch policy {
	case v1.PullAlways:
		return true
	case v1.PullNever:
		return false
	default:
		return !present
	}
}

// pullPolicy is the policy as given, or the API server's default when the
// manifest left it out: Always for a :latest or untagged image, IfNotPresent
// otherwise (a pinned tag or digest is not expected to change).
func pullPolicy(p v1.PullPolicy, tag, digest string) v1.PullPolicy {
	switch {
	case p != "":
		return p
	case tag == "latest" || (tag == "" && digest == ""):
		return v1.PullAlways
	default:
		return v1.PullIfNotPresent
	}
}
