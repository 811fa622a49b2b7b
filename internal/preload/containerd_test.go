package preload

import (
	"context"
	"errors"
	"maps"
	"net"
	"slices"
	"sync"
	"testing"

	imagesapi "github.com/containerd/containerd/api/services/images/v1"
	"github.com/containerd/containerd/api/types"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"
)

// fakeImages is containerd's images service as far as Pin uses it; like
// containerd 2.x, it refuses an update without a target.
type fakeImages struct {
	imagesapi.UnimplementedImagesServer
	mu      sync.Mutex // guards the fields below
	images  []*imagesapi.Image
	updates []*imagesapi.UpdateImageRequest
	ns      []string
}

func (f *fakeImages) List(ctx context.Context, _ *imagesapi.ListImagesRequest) (*imagesapi.ListImagesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	md, _ := metadata.FromIncomingContext(ctx)
	f.ns = append(f.ns, md.Get("containerd-namespace")...)
	return &imagesapi.ListImagesResponse{Images: f.images}, nil
}

func (f *fakeImages) Update(_ context.Context, req *imagesapi.UpdateImageRequest) (*imagesapi.UpdateImageResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if req.GetImage().GetTarget() == nil {
		return nil, errors.New("no target")
	}
	f.updates = append(f.updates, req)
	return &imagesapi.UpdateImageResponse{Image: req.GetImage()}, nil
}

// TestContainerdPin: Pin pins the images kept that are not pinned yet,
// removes its own pins from the others, and leaves an operator's pin
// alone; every update carries the image's target.
func TestContainerdPin(t *testing.T) {
	target := &types.Descriptor{MediaType: "application/vnd.oci.image.manifest.v1+json", Digest: "sha256:0000", Size: 1}
	img := func(name string, labels map[string]string) *imagesapi.Image {
		return &imagesapi.Image{Name: name, Labels: labels, Target: target}
	}
	fake := &fakeImages{images: []*imagesapi.Image{
		img("example.com/ours-gone:1", map[string]string{labelPinned: "pinned", labelBerthPinned: "true"}),
		img("example.com/kept:1", map[string]string{labelCRIImage: "managed"}),
		img("example.com/operator:1", map[string]string{labelPinned: "pinned"}),
		img("example.com/kept-pinned:1", map[string]string{labelPinned: "pinned", labelBerthPinned: "true"}),
		img("example.com/other:1", nil),
	}}
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	imagesapi.RegisterImagesServer(srv, fake)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	conn, err := grpc.NewClient("passthrough:///bufconn", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	if err := NewContainerd(conn).Pin(context.Background(), []string{"example.com/kept:1", "example.com/kept-pinned:1"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]map[string]string{
		"example.com/ours-gone:1": {},
		"example.com/kept:1":      {labelPinned: "pinned", labelBerthPinned: "true"},
	}
	got := map[string]map[string]string{}
	for _, u := range fake.updates {
		got[u.GetImage().GetName()] = u.GetImage().GetLabels()
		if !slices.Equal(u.GetUpdateMask().GetPaths(), []string{"labels." + labelPinned, "labels." + labelBerthPinned}) {
			t.Errorf("update of %s with mask %v", u.GetImage().GetName(), u.GetUpdateMask().GetPaths())
		}
	}
	if len(got) != len(want) {
		t.Fatalf("updates %v, want %v", got, want)
	}
	for name, labels := range want {
		if !maps.Equal(got[name], labels) {
			t.Errorf("update of %s: labels %v, want %v", name, got[name], labels)
		}
	}
	if !slices.Equal(fake.ns, []string{criNamespace}) {
		t.Errorf("namespaces %v, want the CRI's", fake.ns)
	}
}
