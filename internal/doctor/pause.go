package doctor

import (
	"context"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// checkPauseImage: the runtime's sandbox (pause) image is present. berth
// does not choose it: the runtime starts every sandbox from the image of
// its own configuration (containerd 1.x reports it as sandboxImage; 2.x
// does not report it, so Options.PauseImage names it there). A missing one
// is a WARN, not a FAIL: the runtime pulls it with the first pod, which
// only fails offline.
func (e *env) checkPauseImage(ctx context.Context, ri *runtimeInfo) Result {
	r := Result{Check: "pause-image"}
	if ri.err != nil {
		return notChecked(r.Check)
	}
	image := firstNonEmpty(e.opts.PauseImage, ri.config.SandboxImage)
	if image == "" {
		r.Status = Warn
		r.Message = ri.name() + " does not report its sandbox (pause) image, so its presence was not checked"
		r.Fix = "find it in the runtime's configuration (containerd config dump | grep -A1 -e sandbox_image -e pinned_images) and check crictl images lists it"
		return r
	}
	resp, err := e.is.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: image}, false)
	if err != nil {
		r.Status, r.Message = Fail, fmt.Sprintf("status of the sandbox image %s: %v", image, err)
		r.Fix = "see the runtime's log (journalctl -u containerd)"
		return r
	}
	if resp.GetImage() == nil {
		r.Status = Warn
		r.Message = fmt.Sprintf("sandbox image %s is not present: the runtime pulls it with the first pod, and every pod fails while it cannot", image)
		r.Fix = fmt.Sprintf("crictl pull %s, or offline: ctr -n k8s.io images import pause.tar", image)
		return r
	}
	r.Status, r.Message = OK, fmt.Sprintf("sandbox image %s is present (%s)", image, shortID(resp.GetImage().GetId()))
	return r
}

// shortID is an image ID as crictl shows it: 13 characters of the digest.
func shortID(id string) string {
	const prefix = "sha256:"
	if len(id) > len(prefix) && id[:len(prefix)] == prefix {
		id = id[len(prefix):]
	}
	if len(id) > 13 {
		id = id[:13]
	}
	return id
}
