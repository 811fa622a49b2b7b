package criclient

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestListFieldNumbers checks the field numbers listDecoder reads on the
// wire against the CRI's generated descriptors.
func TestListFieldNumbers(t *testing.T) {
	field := func(m proto.Message, name string) protowire.Number {
		f := m.ProtoReflect().Descriptor().Fields().ByName(protoreflect.Name(name))
		if f == nil {
			t.Fatalf("%T has no field %s", m, name)
		}
		return f.Number()
	}
	for _, tt := range []struct {
		msg  proto.Message
		name string
		want protowire.Number
	}{
		{&runtimeapi.ListContainersResponse{}, "containers", listItemsField},
		{&runtimeapi.ListPodSandboxResponse{}, "items", listItemsField},
		{&runtimeapi.Container{}, "id", containerIDField},
		{&runtimeapi.Container{}, "state", containerStateField},
		{&runtimeapi.PodSandbox{}, "id", sandboxIDField},
		{&runtimeapi.PodSandbox{}, "state", sandboxStateField},
	} {
		if got := field(tt.msg, tt.name); got != tt.want {
			t.Errorf("%T.%s is field %d, listdecode.go reads %d", tt.msg, tt.name, got, tt.want)
		}
	}
}

func testContainer(i int, state runtimeapi.ContainerState) *runtimeapi.Container {
	return &runtimeapi.Container{
		Id:           fmt.Sprintf("c%02d", i),
		PodSandboxId: fmt.Sprintf("s%02d", i),
		Metadata:     &runtimeapi.ContainerMetadata{Name: "main", Attempt: uint32(i % 3)},
		Image:        &runtimeapi.ImageSpec{Image: "busybox:1.36"},
		ImageRef:     "sha256:abc",
		State:        state,
		CreatedAt:    int64(1000 + i),
		Labels:       map[string]string{"io.kubernetes.pod.uid": fmt.Sprint("uid-", i), "io.kubernetes.container.name": "main", "berth.io/managed": "true"},
		Annotations:  map[string]string{"io.kubernetes.container.hash": fmt.Sprint(i * 7), "io.kubernetes.container.restartCount": "0", "io.kubernetes.pod.terminationGracePeriod": "30"},
	}
}

func marshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decodeContainers decodes b with d and checks the result against
// proto.Unmarshal of the same bytes.
func decodeContainers(t *testing.T, d *listDecoder[*runtimeapi.Container], b []byte) []*runtimeapi.Container {
	t.Helper()
	got, err := d.decode(b)
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	var want runtimeapi.ListContainersResponse
	if err := proto.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want.Containers) {
		t.Fatalf("decoded %d containers, proto.Unmarshal %d", len(got), len(want.Containers))
	}
	for i := range got {
		if !proto.Equal(got[i], want.Containers[i]) {
			t.Errorf("container %d: decoded %v, proto.Unmarshal %v", i, got[i], want.Containers[i])
		}
	}
	return got
}

// TestListDecoderReuses decodes a listing, then the next one with one
// container changed state, one gone and one new, its maps encoded in
// another order: each result equals proto.Unmarshal's, the unchanged
// containers are the earlier objects, the others decoded anew, and the
// decoder keeps only the latest listing's.
func TestListDecoderReuses(t *testing.T) {
	d := newListCodec().containers
	first := &runtimeapi.ListContainersResponse{}
	for i := range 5 {
		first.Containers = append(first.Containers, testContainer(i, runtimeapi.ContainerState_CONTAINER_RUNNING))
	}
	before := decodeContainers(t, d, marshal(t, first))

	second := &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{
		testContainer(4, runtimeapi.ContainerState_CONTAINER_RUNNING),
		testContainer(0, runtimeapi.ContainerState_CONTAINER_RUNNING),
		testContainer(1, runtimeapi.ContainerState_CONTAINER_EXITED), // changed state
		testContainer(3, runtimeapi.ContainerState_CONTAINER_RUNNING),
		testContainer(9, runtimeapi.ContainerState_CONTAINER_CREATED), // new; state 0 is left out on the wire
		// c02 is gone
	}}
	after := decodeContainers(t, d, marshal(t, second))
	byID := map[string]*runtimeapi.Container{}
	for _, c := range before {
		byID[c.Id] = c
	}
	for _, c := range after {
		reused := byID[c.Id] == c
		wantReused := c.Id == "c00" || c.Id == "c03" || c.Id == "c04"
		if reused != wantReused {
			t.Errorf("container %s (%v): reused %t, want %t", c.Id, c.State, reused, wantReused)
		}
	}
	if len(d.last) != len(second.Containers) {
		t.Errorf("the decoder keeps %d containers, want the latest listing's %d", len(d.last), len(second.Containers))
	}
	if _, ok := d.last["c02"]; ok {
		t.Errorf("the decoder keeps c02, gone from the latest listing")
	}
	// The same bytes again: every object reused.
	again := decodeContainers(t, d, marshal(t, second))
	for i := range again {
		if again[i] != after[i] {
			t.Errorf("container %s decoded anew from an unchanged listing", again[i].Id)
		}
	}
}

// TestListDecoderSandboxes: sandboxes are decoded and reused the same way,
// by their own state field.
func TestListDecoderSandboxes(t *testing.T) {
	d := newListCodec().sandboxes
	sb := func(state runtimeapi.PodSandboxState) *runtimeapi.ListPodSandboxResponse {
		return &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{{
			Id: "s1", State: state, CreatedAt: 5, Metadata: &runtimeapi.PodSandboxMetadata{Name: "p", Namespace: "default", Uid: "u"},
			Labels: map[string]string{"a": "b"},
		}}}
	}
	ready, err := d.decode(marshal(t, sb(runtimeapi.PodSandboxState_SANDBOX_READY)))
	if err != nil || len(ready) != 1 || ready[0].State != runtimeapi.PodSandboxState_SANDBOX_READY {
		t.Fatalf("decode = %v, %v", ready, err)
	}
	notReady, err := d.decode(marshal(t, sb(runtimeapi.PodSandboxState_SANDBOX_NOTREADY)))
	if err != nil || len(notReady) != 1 || notReady[0] == ready[0] || notReady[0].State != runtimeapi.PodSandboxState_SANDBOX_NOTREADY {
		t.Fatalf("a sandbox that changed state: decode = %v (reused %t), %v", notReady, len(notReady) == 1 && notReady[0] == ready[0], err)
	}
}

// TestListDecoderMalformed: a malformed listing fails as proto.Unmarshal
// fails, and leaves the decoder's memory of the last good one.
func TestListDecoderMalformed(t *testing.T) {
	good := marshal(t, &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{testContainer(1, runtimeapi.ContainerState_CONTAINER_RUNNING)}})
	for _, tt := range []struct {
		name string
		b    []byte
	}{
		{"truncated", good[:len(good)-3]},
		{"bad tag", append([]byte{0x07}, good...)},
		{"item overruns", protowire.AppendTag(nil, listItemsField, protowire.BytesType)},
		{"item field truncated", protowire.AppendBytes(protowire.AppendTag(nil, listItemsField, protowire.BytesType), []byte{0x0a, 0x05, 'c'})},
		{"invalid UTF-8 in a new item", protowire.AppendBytes(protowire.AppendTag(nil, listItemsField, protowire.BytesType),
			protowire.AppendString(protowire.AppendTag(nil, 2, protowire.BytesType), "\xff\xfe"))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			d := newListCodec().containers
			decodeContainers(t, d, good)
			last := d.last
			if _, err := d.decode(tt.b); err == nil {
				t.Fatal("decoded a malformed listing")
			}
			if err := proto.Unmarshal(tt.b, &runtimeapi.ListContainersResponse{}); err == nil {
				t.Errorf("proto.Unmarshal accepts what the decoder refuses")
			}
			if len(d.last) != 1 || d.last["c01"].item != last["c01"].item {
				t.Errorf("a failed decode changed the decoder's last listing")
			}
		})
	}
}

// TestListCodecBroadOnly: the node-wide listings go through the codec,
// those narrowed to one pod (two labels, an ID, a sandbox or a state) do
// not, so they never replace what the next relist reuses.
func TestListCodecBroadOnly(t *testing.T) {
	c := newListCodec()
	managed := map[string]string{"berth.io/managed": "true"}
	onePod := map[string]string{"berth.io/managed": "true", "io.kubernetes.pod.uid": "u"}
	running := &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}
	for _, tt := range []struct {
		name  string
		f     *runtimeapi.ContainerFilter
		broad bool
	}{
		{"no filter", nil, true},
		{"managed", &runtimeapi.ContainerFilter{LabelSelector: managed}, true},
		{"one pod", &runtimeapi.ContainerFilter{LabelSelector: onePod}, false},
		{"one container", &runtimeapi.ContainerFilter{Id: "c"}, false},
		{"one sandbox", &runtimeapi.ContainerFilter{PodSandboxId: "s", LabelSelector: managed}, false},
		{"running", &runtimeapi.ContainerFilter{State: running}, false},
	} {
		if got := len(c.containerCall(tt.f)) > 0; got != tt.broad {
			t.Errorf("containers, %s: through the codec %t, want %t", tt.name, got, tt.broad)
		}
	}
	if len(c.sandboxCall(&runtimeapi.PodSandboxFilter{LabelSelector: managed})) == 0 || len(c.sandboxCall(&runtimeapi.PodSandboxFilter{LabelSelector: onePod})) != 0 {
		t.Errorf("sandboxes: the node-wide listing must go through the codec, one pod's not")
	}
}

// listingServer is a CRI runtime whose listing the test changes.
type listingServer struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	mu         sync.Mutex
	containers []*runtimeapi.Container
}

func (s *listingServer) ListContainers(context.Context, *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return &runtimeapi.ListContainersResponse{Containers: s.containers}, nil
}

func (s *listingServer) ListPodSandbox(context.Context, *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	return &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{{Id: "s", State: runtimeapi.PodSandboxState_SANDBOX_READY}}}, nil
}

// TestListThroughGRPC lists over a real gRPC channel: the codec's replies
// are the runtime's, a second node-wide listing reuses the first's
// objects, a state change shows, and a listing of one pod is decoded as
// usual.
func TestListThroughGRPC(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cri.sock")
	srv := &listingServer{containers: []*runtimeapi.Container{
		testContainer(1, runtimeapi.ContainerState_CONTAINER_RUNNING),
		testContainer(2, runtimeapi.ContainerState_CONTAINER_RUNNING),
	}}
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(gs, srv)
	go func() { _ = gs.Serve(l) }()
	t.Cleanup(gs.Stop)
	rs, is, err := Dial(path, path, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer closeServices(t, rs, is)
	ctx := context.Background()
	managed := &runtimeapi.ContainerFilter{LabelSelector: map[string]string{"berth.io/managed": "true"}}
	first, err := rs.ListContainers(ctx, managed)
	if err != nil || len(first) != 2 {
		t.Fatalf("ListContainers = %v, %v", first, err)
	}
	srv.mu.Lock()
	srv.containers = []*runtimeapi.Container{testContainer(1, runtimeapi.ContainerState_CONTAINER_RUNNING), testContainer(2, runtimeapi.ContainerState_CONTAINER_EXITED)}
	srv.mu.Unlock()
	second, err := rs.ListContainers(ctx, managed)
	if err != nil || len(second) != 2 {
		t.Fatalf("ListContainers = %v, %v", second, err)
	}
	if second[0] != first[0] {
		t.Errorf("an unchanged container was decoded anew")
	}
	if second[1] == first[1] || second[1].State != runtimeapi.ContainerState_CONTAINER_EXITED || !proto.Equal(second[1], srv.containers[1]) {
		t.Errorf("the container that exited: %v (reused %t)", second[1], second[1] == first[1])
	}
	narrow, err := rs.ListContainers(ctx, &runtimeapi.ContainerFilter{Id: "c01"})
	if err != nil || len(narrow) != 2 || narrow[0] == second[0] || !proto.Equal(narrow[0], second[0]) {
		t.Errorf("a narrowed listing: %v, %v; want the runtime's reply decoded as usual", narrow, err)
	}
	sbs, err := rs.ListPodSandbox(ctx, nil)
	if err != nil || len(sbs) != 1 || sbs[0].Id != "s" {
		t.Errorf("ListPodSandbox = %v, %v", sbs, err)
	}
}

// FuzzListDecode: on any input the decoder agrees with proto.Unmarshal
// (both accept with equal items, or the decoder refuses), and decoding
// the same bytes again gives the same items.
func FuzzListDecode(f *testing.F) {
	resp := &runtimeapi.ListContainersResponse{}
	for i := range 3 {
		resp.Containers = append(resp.Containers, testContainer(i, runtimeapi.ContainerState(i)))
	}
	good, _ := proto.Marshal(resp)
	f.Add(good)
	f.Add(good[:len(good)/2])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		d := newListCodec().containers
		got, err := d.decode(b)
		var want runtimeapi.ListContainersResponse
		werr := proto.Unmarshal(b, &want)
		if err != nil {
			return // stricter than needed is safe: the relist fails and retries
		}
		if werr != nil {
			t.Fatalf("the decoder accepts what proto.Unmarshal refuses: %v", werr)
		}
		if len(got) != len(want.Containers) {
			t.Fatalf("%d containers, proto.Unmarshal %d", len(got), len(want.Containers))
		}
		for i := range got {
			if !proto.Equal(got[i], want.Containers[i]) {
				t.Fatalf("container %d: %v, proto.Unmarshal %v", i, got[i], want.Containers[i])
			}
		}
		again, err := d.decode(b)
		if err != nil || len(again) != len(got) {
			t.Fatalf("the same bytes again: %d containers, %v", len(again), err)
		}
		for i := range again {
			if !proto.Equal(again[i], got[i]) {
				t.Fatalf("the same bytes again: container %d differs", i)
			}
		}
	})
}

// BenchmarkListContainersDecode decodes an idle relist's reply of 50
// containers, unchanged since the last: through the decoder, and with
// proto.Unmarshal as before it.
func BenchmarkListContainersDecode(b *testing.B) {
	resp := &runtimeapi.ListContainersResponse{}
	for i := range 50 {
		resp.Containers = append(resp.Containers, testContainer(i, runtimeapi.ContainerState_CONTAINER_RUNNING))
	}
	data := marshal(b, resp)
	b.Run("reuse", func(b *testing.B) {
		d := newListCodec().containers
		if _, err := d.decode(data); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := d.decode(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("proto", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r runtimeapi.ListContainersResponse
			if err := proto.Unmarshal(data, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
