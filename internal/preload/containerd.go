package preload

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"time"

	contentapi "github.com/containerd/containerd/api/services/content/v1"
	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	leasesapi "github.com/containerd/containerd/api/services/leases/v1"
	"github.com/containerd/containerd/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/berth-agent/berth/internal/imagearchive"
)

// Labels containerd and its CRI plugin read.
const (
	// criNamespace is the containerd namespace of the CRI plugin's
	// images.
	criNamespace = "k8s.io"
	// labelCRIImage marks an image the CRI plugin manages, as its own
	// pulls do.
	labelCRIImage = "io.cri-containerd.image"
	// labelPinned is what containerd's CRI (1.7 and later) reports as
	// Image.pinned, so the kubelet's and berth's image GC and crictl
	// see the pin; 1.6 ignores it.
	labelPinned = "io.cri-containerd.pinned"
	// labelBerthPinned marks a pin berth set, so berth only ever removes
	// its own pins, never one an operator set.
	labelBerthPinned = "io.berth.pinned"
	// labelUncompressed is a layer's diff ID, which containerd's unpack
	// reads instead of decompressing the layer again.
	labelUncompressed = "containerd.io/uncompressed"
	// labelGCRef prefixes the labels that tell containerd's garbage
	// collector what a blob refers to (config, l.N, m.N).
	labelGCRef = "containerd.io/gc.ref.content."
	// labelGCExpire ends the import's lease if berth dies mid-import.
	labelGCExpire = "containerd.io/gc.expire"
)

// writeChunk is the size of each content write message, well under
// gRPC's default message limit.
const writeChunk = 1 << 20

// Containerd imports archives through containerd's own gRPC API (the
// content, images and leases services of the small
// github.com/containerd/containerd/api module) on the CRI socket, in the
// CRI plugin's namespace: the blobs under a lease, with the labels
// containerd's garbage collector follows, then the images, labelled as
// the CRI plugin's own and pinned. The CRI plugin learns of them from
// containerd's image events and unpacks the layers into its snapshotter
// when a container is first created from them (its WithNewSnapshot), as
// for `ctr images import --no-unpack`.
type Containerd struct {
	content contentapi.ContentClient
	images  imagesapi.ImagesClient
	leases  leasesapi.LeasesClient
}

// NewContainerd is the importer over a connection to containerd's socket.
func NewContainerd(conn grpc.ClientConnInterface) *Containerd {
	return &Containerd{
		content: contentapi.NewContentClient(conn),
		images:  imagesapi.NewImagesClient(conn),
		leases:  leasesapi.NewLeasesClient(conn),
	}
}

var _ Importer = (*Containerd)(nil)

func nsContext(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "containerd-namespace", criNamespace)
}

// Import implements Importer.
func (c *Containerd) Import(ctx context.Context, a *imagearchive.Archive, names [][]string) error {
	ctx = nsContext(ctx)
	lease, err := c.lease(ctx)
	if err != nil {
		return err
	}
	defer func() {
		// The lease ends by its expiry label if this fails.
		_, _ = c.leases.Delete(context.WithoutCancel(ctx), &leasesapi.DeleteRequest{ID: lease})
	}()
	ctx = metadata.AppendToOutgoingContext(ctx, "containerd-lease", lease)
	present := map[string]bool{}
	for _, b := range a.Blobs {
		ok, err := c.updateIfPresent(ctx, b)
		if err != nil {
			return err
		}
		present[b.Digest] = ok
	}
	// Layers first (streamed from the archive), then the documents,
	// each after what it refers to.
	err = a.StreamLayers(func(b imagearchive.Blob) bool { return present[b.Digest] }, func(b imagearchive.Blob, r io.Reader) error {
		present[b.Digest] = true
		return c.write(ctx, b, r)
	})
	if err != nil {
		return err
	}
	for _, b := range a.Blobs {
		if present[b.Digest] || b.Data == nil {
			continue
		}
		if err := c.write(ctx, b, bytes.NewReader(b.Data)); err != nil {
			return err
		}
	}
	for i, img := range a.Images {
		for _, name := range names[i] {
			if err := c.createImage(ctx, name, img.Target); err != nil {
				return err
			}
		}
	}
	return nil
}

// lease holds what an import writes until its images refer to it.
func (c *Containerd) lease(ctx context.Context) (string, error) {
	var id [8]byte
	_, _ = rand.Read(id[:])
	resp, err := c.leases.Create(ctx, &leasesapi.CreateRequest{
		ID:     "berth-preload-" + hex.EncodeToString(id[:]),
		Labels: map[string]string{labelGCExpire: time.Now().Add(6 * time.Hour).UTC().Format(time.RFC3339)},
	})
	if err != nil {
		return "", fmt.Errorf("containerd: create lease: %w", err)
	}
	return resp.GetLease().GetID(), nil
}

// blobLabels are the labels of a blob: its references for the garbage
// collector, a layer's diff ID.
func blobLabels(b imagearchive.Blob) map[string]string {
	labels := map[string]string{}
	for i, ref := range b.Refs {
		labels[labelGCRef+b.RefKinds[i]] = ref
	}
	if b.Uncompressed != "" && b.Uncompressed != b.Digest {
		labels[labelUncompressed] = b.Uncompressed
	}
	return labels
}

// updateIfPresent reports whether the runtime has the blob already, and
// then gives it the blob's labels.
func (c *Containerd) updateIfPresent(ctx context.Context, b imagearchive.Blob) (bool, error) {
	_, err := c.content.Info(ctx, &contentapi.InfoRequest{Digest: b.Digest})
	if status.Code(err) == codes.NotFound {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("containerd: content %s: %w", b.Digest, err)
	}
	labels := blobLabels(b)
	if len(labels) == 0 {
		return true, nil
	}
	var paths []string
	for k := range labels {
		paths = append(paths, "labels."+k)
	}
	_, err = c.content.Update(ctx, &contentapi.UpdateRequest{
		Info:       &contentapi.Info{Digest: b.Digest, Labels: labels},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: paths},
	})
	if err != nil {
		return false, fmt.Errorf("containerd: label content %s: %w", b.Digest, err)
	}
	return true, nil
}

// write streams one blob into the content store, which checks its digest
// and size at commit.
func (c *Containerd) write(ctx context.Context, b imagearchive.Blob, r io.Reader) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := c.content.Write(ctx)
	if err != nil {
		return fmt.Errorf("containerd: write %s: %w", b.Digest, err)
	}
	ref := "berth-preload-" + b.Digest
	roundTrip := func(req *contentapi.WriteContentRequest) (*contentapi.WriteContentResponse, error) {
		if err := stream.Send(req); err != nil {
			_, err = stream.Recv() // the server's error explains a failed send
			return nil, err
		}
		return stream.Recv()
	}
	// A first status request: a write of the same ref left by a berth
	// that died restarts at 0, and content that exists already ends the
	// write at once.
	resp, err := roundTrip(&contentapi.WriteContentRequest{Action: contentapi.WriteAction_STAT, Ref: ref, Total: b.Size, Expected: b.Digest})
	if err != nil {
		return fmt.Errorf("containerd: write %s: %w", b.Digest, err)
	}
	if resp.GetAction() == contentapi.WriteAction_COMMIT {
		return stream.CloseSend()
	}
	buf := make([]byte, writeChunk)
	var offset int64
	for {
		n, rerr := io.ReadFull(r, buf)
		if n > 0 {
			if _, err := roundTrip(&contentapi.WriteContentRequest{Action: contentapi.WriteAction_WRITE, Ref: ref, Offset: offset, Data: buf[:n]}); err != nil {
				return fmt.Errorf("containerd: write %s: %w", b.Digest, err)
			}
			offset += int64(n)
		}
		if rerr == io.EOF || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	_, err = roundTrip(&contentapi.WriteContentRequest{Action: contentapi.WriteAction_COMMIT, Ref: ref, Offset: offset,
		Total: b.Size, Expected: b.Digest, Labels: blobLabels(b)})
	if err != nil {
		return fmt.Errorf("containerd: commit %s: %w", b.Digest, err)
	}
	return stream.CloseSend()
}

// createImage names target, replacing what the name pointed at, labelled
// as the CRI's and pinned by berth.
func (c *Containerd) createImage(ctx context.Context, name string, target imagearchive.Descriptor) error {
	img := &imagesapi.Image{
		Name:   name,
		Target: &types.Descriptor{MediaType: target.MediaType, Digest: target.Digest, Size: target.Size},
		Labels: map[string]string{labelCRIImage: "managed", labelPinned: "pinned", labelBerthPinned: "true"},
	}
	_, err := c.images.Create(ctx, &imagesapi.CreateImageRequest{Image: img})
	if status.Code(err) == codes.AlreadyExists {
		_, err = c.images.Update(ctx, &imagesapi.UpdateImageRequest{Image: img, UpdateMask: &fieldmaskpb.FieldMask{
			Paths: []string{"target", "labels." + labelCRIImage, "labels." + labelPinned, "labels." + labelBerthPinned},
		}})
	}
	if err != nil {
		return fmt.Errorf("containerd: image %s: %w", name, err)
	}
	return nil
}

// Pin implements Importer: it pins the images named in keep that exist
// and removes the pins berth set on any other.
func (c *Containerd) Pin(ctx context.Context, keep []string) error {
	ctx = nsContext(ctx)
	want := map[string]bool{}
	for _, n := range keep {
		want[n] = true
	}
	resp, err := c.images.List(ctx, &imagesapi.ListImagesRequest{})
	if err != nil {
		return fmt.Errorf("containerd: list images: %w", err)
	}
	var errs []error
	for _, img := range resp.GetImages() {
		pinned := img.GetLabels()[labelPinned] == "pinned"
		ours := img.GetLabels()[labelBerthPinned] != ""
		var labels map[string]string
		switch {
		case want[img.GetName()] && !pinned:
			labels = map[string]string{labelPinned: "pinned", labelBerthPinned: "true"}
		case !want[img.GetName()] && ours:
			labels = map[string]string{} // removes both
		default:
			continue
		}
		// The target goes with it although the mask leaves it alone:
		// containerd 2.x's images service dereferences it.
		_, err := c.images.Update(ctx, &imagesapi.UpdateImageRequest{
			Image:      &imagesapi.Image{Name: img.GetName(), Labels: labels, Target: img.GetTarget()},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"labels." + labelPinned, "labels." + labelBerthPinned}},
		})
		if err != nil && status.Code(err) != codes.NotFound {
			errs = append(errs, fmt.Errorf("containerd: pin image %s: %w", img.GetName(), err))
		}
	}
	return errors.Join(errs...)
}
