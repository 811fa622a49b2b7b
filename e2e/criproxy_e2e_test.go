//go:build e2e

package e2e

// A transparent CRI proxy between berth and the bed's containerd, so the
// crash test can act at exact points of berth's conversation with the
// runtime: right after containerd created a container and before berth
// learns it, right after berth asked to start or stop a container, while a
// sandbox is being set up. Timing a SIGKILL from outside could only hit
// those windows by chance.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// proxyMaxMsgSize matches berth's own limit (internal/criclient/dial.go), so the proxy
// never refuses what berth and containerd would exchange directly.
const proxyMaxMsgSize = 16 << 20

// redialBackoff makes a connection to containerd come back within half a
// second of containerd's restart (grpc's default waits up to 2 minutes).
var redialBackoff = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, MaxDelay: 500 * time.Millisecond},
	MinConnectTimeout: 5 * time.Second,
}

// rawFrame is one gRPC message, kept as the bytes on the wire: the proxy
// forwards what it does not understand without re-encoding it.
type rawFrame struct{ data []byte }

// rawCodec passes frames through untouched. It is named "proto" so the
// content type on both legs stays the one berth and the runtime expect, and
// registered as the "proto" codec rather than forced on the upstream
// connection: a forced codec makes gRPC send "application/grpc+proto",
// which CRI-O's listener (it tells gRPC from HTTP by an exact
// "application/grpc") resets. Every other message of this test binary it
// marshals as protobuf, as the codec it replaces did.
type rawCodec struct{}

func init() { encoding.RegisterCodec(rawCodec{}) }

func (rawCodec) Marshal(v any) ([]byte, error) {
	switch m := v.(type) {
	case *rawFrame:
		return m.data, nil
	case proto.Message:
		return proto.Marshal(m)
	}
	return nil, fmt.Errorf("raw codec: cannot marshal %T", v)
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	switch m := v.(type) {
	case *rawFrame:
		// gRPC may reuse data's buffer once Unmarshal returns.
		m.data = append(m.data[:0], data...)
		return nil
	case proto.Message:
		return proto.Unmarshal(data, m)
	}
	return fmt.Errorf("raw codec: cannot unmarshal into %T", v)
}

func (rawCodec) Name() string { return "proto" }

// proxyPhase is where in a call a hook fires.
type proxyPhase int

const (
	// requestSent: the request went to containerd, which is now working
	// on it; berth waits for the answer.
	requestSent proxyPhase = iota
	// responseReceived: containerd answered (successfully) and berth has
	// not got the answer yet.
	responseReceived
)

func (p proxyPhase) String() string {
	if p == requestSent {
		return "request sent"
	}
	return "response received"
}

// proxyHook fires once, at phase of the first call of one of methods that
// concerns pod (a full pod name). Its functions run in the call's
// goroutine, so the call goes on only once they return.
type proxyHook struct {
	methods []string // e.g. "CreateContainer"
	phase   proxyPhase
	pod     string
	// before, if set, runs when the call arrives, before it is forwarded.
	before func(proxyCall)
	// detach lets the call run to its end in containerd even once berth
	// is gone, as containerd does with work it is in the middle of when
	// its client goes away at the wrong moment.
	detach bool
	fire   func()
	fired  chan struct{} // closed once fire returned
}

func (h *proxyHook) String() string {
	return fmt.Sprintf("%s of %s, %s", strings.Join(h.methods, "/"), h.pod, h.phase)
}

// proxyCall is what a hook learns of the call that fires it.
type proxyCall struct {
	method  string
	pod     string // full name
	sandbox string // the sandbox the call concerns, when known
	logPath string // the log file of the container the call concerns, when known
}

// criProxy is a running proxy. Every CRI call is unary or server-streaming
// (one request, any number of responses), which is all it forwards.
type criProxy struct {
	socket string
	srv    *grpc.Server
	up     *grpc.ClientConn

	// mu guards the fields below.
	mu        sync.Mutex
	hook      *proxyHook
	owners    map[string]proxyCall // container ID -> its pod and sandbox, from CreateContainer
	sandboxes map[string]string    // sandbox ID -> full pod name, from RunPodSandbox
	calls     map[string]int       // calls forwarded, by method
	// podReads counts the list calls filtered to one pod UID (a read of
	// that pod's state, not a relist of every pod), by that UID.
	podReads map[string]int
}

// startCRIProxy listens on a unix socket in dir and forwards to the bed's
// containerd; it is stopped when t ends.
func startCRIProxy(t *testing.T, dir string) *criProxy {
	t.Helper()
	up, err := grpc.NewClient("unix://"+bed.Socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(redialBackoff),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(proxyMaxMsgSize), grpc.MaxCallSendMsgSize(proxyMaxMsgSize)))
	if err != nil {
		t.Fatalf("CRI proxy: dial containerd: %v", err)
	}
	p := &criProxy{
		socket:    path.Join(dir, "cri-proxy.sock"),
		up:        up,
		owners:    map[string]proxyCall{},
		sandboxes: map[string]string{},
		calls:     map[string]int{},
		podReads:  map[string]int{},
	}
	l, err := net.Listen("unix", p.socket)
	if err != nil {
		up.Close()
		t.Fatalf("CRI proxy: %v", err)
	}
	p.srv = grpc.NewServer(
		grpc.UnknownServiceHandler(p.forward),
		grpc.ForceServerCodec(rawCodec{}),
		grpc.MaxRecvMsgSize(proxyMaxMsgSize), grpc.MaxSendMsgSize(proxyMaxMsgSize))
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = p.srv.Serve(l)
	}()
	t.Cleanup(func() {
		// Closing the upstream side first ends calls still waiting on
		// containerd, which Stop would otherwise wait for.
		up.Close()
		p.srv.Stop()
		<-served
	})
	return p
}

// endpoint is the proxy's address for --container-runtime-endpoint.
func (p *criProxy) endpoint() string { return "unix://" + p.socket }

// arm sets the hook for the next matching call, replacing any other.
func (p *criProxy) arm(h *proxyHook) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hook = h
}

// disarm removes h unless a call already took it; it reports whether h
// was still waiting (so it will never fire).
func (p *criProxy) disarm(h *proxyHook) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hook != h {
		return false
	}
	p.hook = nil
	return true
}

// callCounts is a one-line summary of the calls forwarded so far.
func (p *criProxy) callCounts() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var parts []string
	for m, n := range p.calls {
		parts = append(parts, fmt.Sprintf("%s=%d", m, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, " ")
}

// forward relays one call: its request to containerd, then every response
// (and the final status) back to berth, running the hook at its phase. The
// upstream call lives in berth's call context (unless the hook detaches
// it), so when berth dies the call is cancelled in containerd exactly as
// without the proxy.
func (p *criProxy) forward(_ any, ss grpc.ServerStream) error {
	full, ok := grpc.MethodFromServerStream(ss)
	if !ok {
		return status.Error(codes.Internal, "CRI proxy: no method in the stream")
	}
	method := path.Base(full)
	var req rawFrame
	if err := ss.RecvMsg(&req); err != nil {
		return err
	}
	uid := readOfPod(method, req.data)
	p.mu.Lock()
	p.calls[method]++
	if uid != "" {
		p.podReads[uid]++
	}
	p.mu.Unlock()
	call := p.target(method, req.data, nil)
	h := p.take(call)
	// A hook taken by a call that ends before its phase waits for the next.
	defer func() {
		if h != nil {
			p.putBack(h)
		}
	}()
	ctx := ss.Context()
	if h != nil && h.before != nil {
		h.before(call)
	}
	if h != nil && h.detach {
		ctx = context.WithoutCancel(ctx)
	}
	cs, err := p.up.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, full)
	if err != nil {
		return err
	}
	// io.EOF from SendMsg means containerd ended the call: RecvMsg below
	// returns its status.
	if err := cs.SendMsg(&req); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	if err := cs.CloseSend(); err != nil {
		return err
	}
	if h != nil && h.phase == requestSent {
		h.fire()
		close(h.fired)
		h = nil
	}
	for first := true; ; first = false {
		var resp rawFrame
		err := cs.RecvMsg(&resp)
		if first {
			if md, herr := cs.Header(); herr == nil && len(md) > 0 {
				_ = ss.SendHeader(md)
			}
		}
		if err != nil {
			ss.SetTrailer(cs.Trailer())
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if first {
			p.target(method, req.data, resp.data)
		}
		if h != nil && h.phase == responseReceived {
			h.fire()
			close(h.fired)
			h = nil
		}
		if err := ss.SendMsg(&resp); err != nil {
			return err
		}
	}
}

// readsOf is how many list calls filtered to the pod of uid were forwarded
// so far.
func (p *criProxy) readsOf(uid string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.podReads[uid]
}

// readOfPod is the pod UID a ListPodSandbox or ListContainers request is
// filtered to, or "" for any other call.
func readOfPod(method string, req []byte) string {
	var selector map[string]string
	switch method {
	case "ListPodSandbox":
		var r runtimeapi.ListPodSandboxRequest
		if proto.Unmarshal(req, &r) == nil {
			selector = r.GetFilter().GetLabelSelector()
		}
	case "ListContainers":
		var r runtimeapi.ListContainersRequest
		if proto.Unmarshal(req, &r) == nil {
			selector = r.GetFilter().GetLabelSelector()
		}
	}
	return selector["io.kubernetes.pod.uid"]
}

// take returns the armed hook and disarms it if call is one it waits for.
func (p *criProxy) take(call proxyCall) *proxyHook {
	p.mu.Lock()
	defer p.mu.Unlock()
	h := p.hook
	if h == nil || call.pod == "" || h.pod != call.pod || !slices.Contains(h.methods, call.method) {
		return nil
	}
	p.hook = nil
	return h
}

// putBack re-arms h, unless another hook was armed meanwhile.
func (p *criProxy) putBack(h *proxyHook) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.hook == nil {
		p.hook = h
	}
}

// target tells which pod (full name) and sandbox a call concerns, for
// the calls hooks look at; an empty pod for the others. With resp, it
// records what the answer creates (a sandbox, a container), so that later
// calls carrying only an ID can be told apart.
func (p *criProxy) target(method string, req, resp []byte) proxyCall {
	call := proxyCall{method: method}
	switch method {
	case "RunPodSandbox":
		var r runtimeapi.RunPodSandboxRequest
		if proto.Unmarshal(req, &r) != nil {
			return call
		}
		call.pod = fullName(r.GetConfig().GetMetadata().GetName(), r.GetConfig().GetMetadata().GetNamespace())
		var out runtimeapi.RunPodSandboxResponse
		if resp != nil && proto.Unmarshal(resp, &out) == nil && out.PodSandboxId != "" {
			p.mu.Lock()
			p.sandboxes[out.PodSandboxId] = call.pod
			p.mu.Unlock()
			call.sandbox = out.PodSandboxId
		}
	case "CreateContainer":
		var r runtimeapi.CreateContainerRequest
		if proto.Unmarshal(req, &r) != nil {
			return call
		}
		call.pod = fullName(r.GetSandboxConfig().GetMetadata().GetName(), r.GetSandboxConfig().GetMetadata().GetNamespace())
		call.sandbox = r.PodSandboxId
		if dir, file := r.GetSandboxConfig().GetLogDirectory(), r.GetConfig().GetLogPath(); dir != "" && file != "" {
			call.logPath = filepath.Join(dir, file)
		}
		var out runtimeapi.CreateContainerResponse
		if resp != nil && proto.Unmarshal(resp, &out) == nil && out.ContainerId != "" {
			p.mu.Lock()
			p.owners[out.ContainerId] = call
			p.mu.Unlock()
		}
	case "StartContainer", "StopContainer", "RemoveContainer":
		var r runtimeapi.StartContainerRequest // the ID is field 1 in all three
		if proto.Unmarshal(req, &r) == nil {
			p.mu.Lock()
			owner := p.owners[r.ContainerId]
			p.mu.Unlock()
			call.pod, call.sandbox, call.logPath = owner.pod, owner.sandbox, owner.logPath
		}
	case "StopPodSandbox", "RemovePodSandbox":
		var r runtimeapi.StopPodSandboxRequest // the ID is field 1 in both
		if proto.Unmarshal(req, &r) == nil {
			p.mu.Lock()
			call.pod, call.sandbox = p.sandboxes[r.PodSandboxId], r.PodSandboxId
			p.mu.Unlock()
		}
	}
	return call
}

// fullName is the kubelet's full name of a pod, which exclusivity is about.
func fullName(name, namespace string) string { return name + "_" + namespace }
