package criclient

import (
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	protov2 "google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Field numbers of the CRI messages listDecoder reads on the wire; a test
// checks them against the generated descriptors.
const (
	// listItemsField is ListContainersResponse.containers and
	// ListPodSandboxResponse.items.
	listItemsField protowire.Number = 1
	// containerIDField and containerStateField are Container.id and
	// Container.state.
	containerIDField    protowire.Number = 1
	containerStateField protowire.Number = 6
	// sandboxIDField and sandboxStateField are PodSandbox.id and
	// PodSandbox.state.
	sandboxIDField    protowire.Number = 1
	sandboxStateField protowire.Number = 3
)

// listCodec is the gRPC codec of the ListContainers and ListPodSandbox
// calls: it decodes only the objects that are new or changed state since
// the previous reply, and hands out the previous reply's objects for the
// others. Every other message goes through gRPC's proto codec.
//
// Why: berth relists the runtime every second where it streams no events
// (containerd 1.6), and the replies hardly ever change. Decoding every
// object's labels and annotations anew was most of an idle berth's
// allocations, and so of its collector's work.
//
// Only an object's state changes over its life on CRI: its ID, labels,
// annotations, image and creation time are set when it is created. The
// objects handed out are shared between replies and must not be modified.
//
// The codec serves the node-wide listings a relist makes (broad); a listing
// narrowed to one pod's objects decodes as usual, so that it does not
// replace the items the next relist reuses.
type listCodec struct {
	encoding.CodecV2 // gRPC's proto codec, for everything else

	containers *listDecoder[*runtimeapi.Container]
	sandboxes  *listDecoder[*runtimeapi.PodSandbox]
}

func newListCodec() *listCodec {
	return &listCodec{
		CodecV2:    encoding.GetCodecV2(proto.Name),
		containers: &listDecoder[*runtimeapi.Container]{idField: containerIDField, stateField: containerStateField, alloc: func() *runtimeapi.Container { return new(runtimeapi.Container) }},
		sandboxes:  &listDecoder[*runtimeapi.PodSandbox]{idField: sandboxIDField, stateField: sandboxStateField, alloc: func() *runtimeapi.PodSandbox { return new(runtimeapi.PodSandbox) }},
	}
}

// containerCall is the call option of a ListContainers with filter: this
// codec for a node-wide listing, none for a narrower one.
func (c *listCodec) containerCall(f *runtimeapi.ContainerFilter) []grpc.CallOption {
	if f.GetId() != "" || f.GetPodSandboxId() != "" || f.GetState() != nil || len(f.GetLabelSelector()) > 1 {
		return nil
	}
	return []grpc.CallOption{grpc.ForceCodecV2(c)}
}

// sandboxCall is containerCall for ListPodSandbox.
func (c *listCodec) sandboxCall(f *runtimeapi.PodSandboxFilter) []grpc.CallOption {
	if f.GetId() != "" || f.GetState() != nil || len(f.GetLabelSelector()) > 1 {
		return nil
	}
	return []grpc.CallOption{grpc.ForceCodecV2(c)}
}

// Unmarshal decodes the two list replies with their decoders, anything else
// with the proto codec.
func (c *listCodec) Unmarshal(data mem.BufferSlice, v any) error {
	switch r := v.(type) {
	case *runtimeapi.ListContainersResponse:
		return decodeList(c.containers, data, &r.Containers)
	case *runtimeapi.ListPodSandboxResponse:
		return decodeList(c.sandboxes, data, &r.Items)
	default:
		return c.CodecV2.Unmarshal(data, v)
	}
}

func decodeList[T protov2.Message](d *listDecoder[T], data mem.BufferSlice, items *[]T) error {
	buf := data.MaterializeToBuffer(mem.DefaultBufferPool())
	defer buf.Free()
	out, err := d.decode(buf.ReadOnlyData())
	if err != nil {
		return err
	}
	*items = out
	return nil
}

// listDecoder decodes the items of one kind of list reply, keeping those of
// the last reply by ID for the next.
type listDecoder[T protov2.Message] struct {
	idField, stateField protowire.Number
	alloc               func() T

	mu sync.Mutex // guards last and spare
	// last holds the last reply's items by ID; spare is the map before
	// it, cleared and reused for the next reply.
	last, spare map[string]listed[T]
}

// listed is an item of the last reply: its ID, and its state and encoded
// size, which must both be the same for the item to be taken as unchanged.
type listed[T any] struct {
	id    string
	state uint64
	size  int
	item  T
}

// decode returns the items of a list reply (field listItemsField, each an
// encoded item), reusing the last reply's item for every item of the same
// ID, state and size. Fields other than the items are skipped, as the
// callers read only the items. It fails as proto.Unmarshal would on
// malformed input.
func (d *listDecoder[T]) decode(b []byte) ([]T, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	items := make([]T, 0, len(d.last))
	next := d.spare
	if next == nil {
		next = map[string]listed[T]{}
	}
	clear(next)
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, fmt.Errorf("decode list reply: %w", protowire.ParseError(n))
		}
		b = b[n:]
		if num != listItemsField || typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return nil, fmt.Errorf("decode list reply: field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		enc, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil, fmt.Errorf("decode list reply: item: %w", protowire.ParseError(n))
		}
		b = b[n:]
		id, state, err := d.key(enc)
		if err != nil {
			return nil, err
		}
		if prev, ok := d.last[string(id)]; ok && prev.state == state && prev.size == len(enc) {
			items = append(items, prev.item)
			next[prev.id] = prev
			continue
		}
		item := d.alloc()
		if err := protov2.Unmarshal(enc, item); err != nil {
			return nil, fmt.Errorf("decode list reply: item: %w", err)
		}
		items = append(items, item)
		key := string(id)
		next[key] = listed[T]{id: key, state: state, size: len(enc), item: item}
	}
	d.last, d.spare = next, d.last
	return items, nil
}

// key reads an encoded item's ID and state (the last of each, as
// protobuf's decoding keeps; a state left out is the enum's zero).
func (d *listDecoder[T]) key(b []byte) (id []byte, state uint64, err error) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, 0, fmt.Errorf("decode list reply: item: %w", protowire.ParseError(n))
		}
		b = b[n:]
		switch {
		case num == d.idField && typ == protowire.BytesType:
			id, n = protowire.ConsumeBytes(b)
		case num == d.stateField && typ == protowire.VarintType:
			state, n = protowire.ConsumeVarint(b)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return nil, 0, fmt.Errorf("decode list reply: item field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
	}
	return id, state, nil
}
