package images

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	kubeletconfigv1 "k8s.io/kubelet/config/v1"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/podenv"
)

// Options are a Puller's settings, from berth's flags.
type Options struct {
	// RootDir is berth's root directory, searched first for the node's
	// credentials file.
	RootDir string
	// CredentialDirs are where the node-wide registry credentials file
	// (config.json, else .dockercfg) is searched; nil means the kubelet's
	// search path with RootDir first (see credentialDirs).
	CredentialDirs []string
	// Objects returns the ConfigMaps and Secrets of the pod with a UID,
	// where its image pull Secrets are found; nil means none anywhere.
	Objects func(uid types.UID) podenv.PodObjects
	// CredentialProviders are the kubelet's image credential provider
	// plugins (a CredentialProviderConfig's providers, checked by
	// internal/config), in the file's order; nil means none.
	CredentialProviders []kubeletconfigv1.CredentialProvider
	// CredentialProviderBinDir is the directory of the plugins'
	// executables, each by its provider's name.
	CredentialProviderBinDir string
	// CredentialProviderTimeout bounds one run of a plugin; 0 means
	// DefaultCredentialProviderTimeout.
	CredentialProviderTimeout time.Duration
	// Clock is the time source of the plugins' credential cache; nil
	// means the real clock.
	Clock clock.PassiveClock
	// Logger is berth's logger; nil means slog.Default().
	Logger *slog.Logger

	// runPlugin runs a plugin; nil means runPlugin. Tests replace it.
	runPlugin runFunc
}

// Puller pulls images and reads them on one CRI image service. It is safe
// for concurrent use.
type Puller struct {
	images internalapi.ImageManagerService
	opts   Options
	log    *slog.Logger
	// providers run the credential provider plugins; nil without any.
	// Each plugin guards its own cache.
	providers *credentialProviders
}

// New is a Puller over the image service.
func New(images internalapi.ImageManagerService, opts Options) *Puller {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Puller{images: images, opts: opts, log: opts.Logger, providers: newCredentialProviders(opts)}
}

// Pull pulls the image with each credential in turn until one works, in
// the kubelet's order: creds (the pod's image pull Secrets', then the
// node's credentials file's, from Credentials), then those the credential
// provider plugins give for the image. The plugins run only when creds
// are none or all failed, so a working Secret costs no plugin run. With
// no credentials at all the pull is anonymous, as in the kubelet, even
// when a plugin failed. The error of a failed pull names each failure and
// each plugin that failed or gave nothing, never a credential.
func (p *Puller) Pull(ctx context.Context, spec *runtimeapi.ImageSpec, creds []*runtimeapi.AuthConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	var failures []error
	for _, auth := range creds {
		ref, err := p.images.PullImage(ctx, spec, auth, sandboxConfig)
		if err == nil {
			return ref, nil
		}
		if ctx.Err() != nil {
			return "", err
		}
		failures = append(failures, err)
	}
	repo := criconfig.Repository(spec.Image)
	provided, matched, problems := p.providers.lookup(ctx, repo)
	for _, e := range provided {
		ref, err := p.images.PullImage(ctx, spec, &runtimeapi.AuthConfig{Username: e.Username, Password: e.Password}, sandboxConfig)
		if err == nil {
			return ref, nil
		}
		if ctx.Err() != nil {
			return "", err
		}
		failures = append(failures, fmt.Errorf("with the credentials of %s: %w", e.Source, err))
	}
	anonymous := len(creds) == 0 && len(provided) == 0
	if anonymous {
		ref, err := p.images.PullImage(ctx, spec, nil, sandboxConfig)
		if err == nil {
			return ref, nil
		}
		if ctx.Err() != nil {
			return "", err
		}
		failures = append(failures, err)
	}
	err := joinPullFailures(failures)
	for i := len(problems) - 1; i >= 0; i-- {
		err = fmt.Errorf("%v; %w", problems[i], err)
	}
	if anonymous && !matched {
		err = fmt.Errorf("%w%s", err, noCredentialsHint(spec.Image, err))
	}
	return "", err
}

// joinPullFailures is the error of the pulls tried, naming each.
func joinPullFailures(failures []error) error {
	last := failures[len(failures)-1]
	if len(failures) == 1 {
		return last
	}
	msgs := make([]string, 0, len(failures)-1)
	for _, f := range failures[:len(failures)-1] {
		msgs = append(msgs, f.Error())
	}
	return fmt.Errorf("with each of %d credentials: %s; %w", len(failures), strings.Join(msgs, "; "), last)
}

// Ref is the runtime's ID of image, "" when the runtime does not have it.
// The runtime resolves short names itself (containerd finds
// docker.io/library/busybox:1.36 for busybox:1.36).
func (p *Puller) Ref(ctx context.Context, spec *runtimeapi.ImageSpec) (string, error) {
	resp, err := p.images.ImageStatus(ctx, spec, false)
	if err != nil {
		return "", err
	}
	return resp.GetImage().GetId(), nil
}

// ResolveMounts replaces each image mount's reference with the runtime's
// ID of the image, as the kubelet passes the pull's image_ref: the
// container then mounts exactly the image that was pulled, even if the
// tag moves meanwhile. The images were pulled already; one gone since
// (image garbage collection) is an error and the next sync pulls it
// again.
func (p *Puller) ResolveMounts(ctx context.Context, mounts []*runtimeapi.Mount) error {
	for _, mnt := range mounts {
		if mnt.Image == nil {
			continue
		}
		id, err := p.Ref(ctx, mnt.Image)
		if err != nil {
			return fmt.Errorf("image volume at %s: inspect image %q: %w", mnt.ContainerPath, mnt.Image.Image, err)
		}
		if id == "" {
			return fmt.Errorf("image volume at %s: image %q is not present", mnt.ContainerPath, mnt.Image.Image)
		}
		mnt.Image = &runtimeapi.ImageSpec{Image: id, UserSpecifiedImage: mnt.Image.UserSpecifiedImage}
	}
	return nil
}

// ShouldPull is the kubelet's decision table: whether an image with that
// policy, present or not, is pulled.
func ShouldPull(policy v1.PullPolicy, present bool) bool {
	switch policy {
	case v1.PullAlways:
		return true
	case v1.PullNever:
		return false
	default:
		return !present
	}
}

// PullPolicy is the policy as given, or the API server's default when the
// manifest left it out: Always for a :latest or untagged image, IfNotPresent
// otherwise (a pinned tag or digest is not expected to change).
func PullPolicy(p v1.PullPolicy, tag, digest string) v1.PullPolicy {
	switch {
	case p != "":
		return p
	case tag == "latest" || (tag == "" && digest == ""):
		return v1.PullAlways
	default:
		return v1.PullIfNotPresent
	}
}

// BackoffKey keys a pull back-off by image and by the credentials tried:
// pods sharing a broken image share its back-off, but a pod without
// credentials, or with wrong ones, never holds back a pod whose
// credentials work. The credentials are hashed, never kept in the clear.
func BackoffKey(image string, creds []*runtimeapi.AuthConfig) string {
	if len(creds) == 0 {
		return image
	}
	h := sha256.New()
	for _, c := range creds {
		fmt.Fprintf(h, "%d:%s%d:%s", len(c.Username), c.Username, len(c.Password), c.Password)
	}
	return image + "\x00" + hex.EncodeToString(h.Sum(nil))[:16]
}

// noCredentialsHint explains an anonymous pull the registry refused, for
// an image no credential provider matches, to be appended to the pull's
// error: some runtimes (containerd 2.x) say only "authorization failed"
// without the registry's 401. It is "" for any other failure.
func noCredentialsHint(image string, err error) string {
	msg := strings.ToLower(err.Error())
	if !strings.Contains(msg, "401") && !strings.Contains(msg, "authoriz") && !strings.Contains(msg, "unauthorized") {
		return ""
	}
	host, _, _ := strings.Cut(criconfig.Repository(image), "/")
	return fmt.Sprintf(" (berth had no credentials for %s: name an image pull Secret in imagePullSecrets, put them in the node's config.json, or configure an image credential provider)", host)
}

// PodImages are the images a pod runs: its init, regular and ephemeral
// containers' and its image volumes', each once, in that order.
func PodImages(pod *v1.Pod) []string {
	var out []string
	seen := map[string]bool{}
	add := func(img string) {
		if img != "" && !seen[img] {
			seen[img] = true
			out = append(out, img)
		}
	}
	for _, c := range pod.Spec.InitContainers {
		add(c.Image)
	}
	for _, c := range pod.Spec.Containers {
		add(c.Image)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		add(c.Image)
	}
	for _, v := range pod.Spec.Volumes {
		if v.Image != nil {
			add(v.Image.Reference)
		}
	}
	return out
}
