package preload

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/kuberuntime"
)

// maxListBytes bounds a list of images.
const maxListBytes = 1 << 20

// readList reads a list of image references: one a line, blank lines and
// #-comments skipped; a line that is no reference is an error naming the
// file and the line.
func readList(path string, r io.Reader) ([]string, error) {
	var out []string
	sc := bufio.NewScanner(io.LimitReader(r, maxListBytes+1))
	var read int
	for line := 1; sc.Scan(); line++ {
		read += len(sc.Bytes()) + 1
		if read > maxListBytes {
			return nil, fmt.Errorf("image list %s: more than %d bytes", path, maxListBytes)
		}
		ref := strings.TrimSpace(sc.Text())
		if ref == "" || strings.HasPrefix(ref, "#") {
			continue
		}
		if _, err := criconfig.NormalizedName(ref); err != nil {
			return nil, fmt.Errorf("image list %s:%d: %q: %w", path, line, ref, err)
		}
		out = append(out, ref)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("image list %s: %w", path, err)
	}
	return out, nil
}

// pullList pulls every image of a list the runtime does not have, through
// CRI PullImage with the node's credentials, each in turn.
func (p *Preloader) pullList(ctx context.Context, name, path string) {
	f, err := os.Open(path)
	if err != nil {
		p.failed(name, "refused", err)
		return
	}
	refs, err := readList(path, f)
	f.Close()
	if err != nil {
		p.failed(name, "refused", err)
		return
	}
	var kept []string
	for _, ref := range refs {
		norm, _ := criconfig.NormalizedName(ref) // checked by readList
		if err := p.pull(ctx, ref); err != nil {
			if ctx.Err() != nil {
				return
			}
			p.total.WithLabelValues("failed").Inc()
			p.event(kuberuntime.EventWarning, ReasonPullFailed, fmt.Sprintf("Failed to pull image %q of %s: %v", ref, path, err))
			continue
		}
		kept = append(kept, norm)
	}
	p.mu.Lock()
	p.names[name] = kept
	p.mu.Unlock()
}

// pull pulls one image unless the runtime has it.
func (p *Preloader) pull(ctx context.Context, ref string) error {
	if p.opts.Images == nil {
		return fmt.Errorf("no image service")
	}
	spec := &runtimeapi.ImageSpec{Image: ref, UserSpecifiedImage: ref}
	if resp, err := p.opts.Images.ImageStatus(ctx, spec, false); err == nil && resp.GetImage() != nil {
		p.total.WithLabelValues("present").Inc()
		return nil
	}
	var creds []*runtimeapi.AuthConfig
	if p.opts.Credentials != nil {
		var err error
		if creds, err = p.opts.Credentials(ref); err != nil {
			return err
		}
	}
	if len(creds) == 0 {
		creds = []*runtimeapi.AuthConfig{nil}
	}
	var errs []string
	for _, auth := range creds {
		if _, err := p.opts.Images.PullImage(ctx, spec, auth, nil); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		p.total.WithLabelValues("pulled").Inc()
		p.event(kuberuntime.EventNormal, ReasonPulled, fmt.Sprintf("Pulled image %q of the image list", ref))
		return nil
	}
	return fmt.Errorf("%s", strings.Join(errs, "; "))
}
