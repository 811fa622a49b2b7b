package criclient

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/experimental"
	"google.golang.org/grpc/mem"
	internalapi "k8s.io/cri-api/pkg/apis"
)

// DefaultRuntimeRequestTimeout is the kubelet's --runtime-request-timeout.
const DefaultRuntimeRequestTimeout = 2 * time.Minute

// maxMsgSize bounds CRI messages both ways. 16 MiB as the kubelet: a
// ListContainers with thousands of exited containers and their annotations
// does not fit gRPC's 4 MiB default.
const maxMsgSize = 16 * 1024 * 1024

// bufferPoolExponents are the sizes, as powers of two, of the buffers gRPC
// reads and writes CRI messages in: every power of two from 256 B to
// 1 MiB. gRPC's default pool jumps from 32 KiB to 1 MiB, so each response
// in between (a relist of a few dozen pods' containers and sandboxes, with
// their labels and annotations) takes, zeroes and keeps a 1 MiB buffer:
// with 50 pods those buffers were half of an idle berth's live heap. A
// buffer here is at most twice its message.
//
// It replaces gRPC's default pool, the one its proto codec reads every
// message into (a dial option does not reach the codec), which gRPC allows
// only from an init function; berth's gRPC probes, its one other gRPC
// client, read their small replies through it too.
var bufferPoolExponents = []uint8{8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20}

func init() {
	pool, err := mem.NewBinaryTieredBufferPool(bufferPoolExponents...)
	if err != nil {
		panic(fmt.Sprintf("criclient: gRPC buffer pool: %v", err)) // the exponents are constant and valid
	}
	experimental.SetDefaultBufferPool(pool)
}

// reconnectBackoff is how gRPC retries a runtime socket that went away. The
// 1 s cap (gRPC's default is 2 min) makes berth see a restarted containerd
// within a second instead of sitting in back-off while pods need syncing;
// connecting to a local socket is cheap, so retrying often costs nothing.
var reconnectBackoff = backoff.Config{
	BaseDelay:  100 * time.Millisecond,
	Multiplier: 1.6,
	Jitter:     0.2,
	MaxDelay:   time.Second,
}

// Dial returns the runtime and image services of the CRI runtime at the given
// endpoints (unix:///path or a bare path; imageEndpoint "" means the runtime
// endpoint). It never waits for the runtime: the gRPC channel connects
// lazily, so berth can start before containerd, and keeps reconnecting across
// runtime restarts. Calls made while the runtime is down fail at once with
// codes.Unavailable instead of waiting for it. Every call is bounded by
// timeout (DefaultRuntimeRequestTimeout if <= 0) unless its context is
// shorter; image pulls are bounded only by their context and StopContainer
// gets its grace period on top, as in the kubelet.
func Dial(runtimeEndpoint, imageEndpoint string, timeout time.Duration) (internalapi.RuntimeService, internalapi.ImageManagerService, error) {
	if timeout <= 0 {
		timeout = DefaultRuntimeRequestTimeout
	}
	if imageEndpoint == "" {
		imageEndpoint = runtimeEndpoint
	}
	rpath, err := socketPath(runtimeEndpoint)
	if err != nil {
		return nil, nil, fmt.Errorf("container runtime endpoint: %w", err)
	}
	ipath, err := socketPath(imageEndpoint)
	if err != nil {
		return nil, nil, fmt.Errorf("image service endpoint: %w", err)
	}
	rconn, err := dialSocket(rpath)
	if err != nil {
		return nil, nil, fmt.Errorf("dial container runtime %q: %w", runtimeEndpoint, err)
	}
	iconn := rconn
	if ipath != rpath {
		if iconn, err = dialSocket(ipath); err != nil {
			_ = rconn.close()
			return nil, nil, fmt.Errorf("dial image service %q: %w", imageEndpoint, err)
		}
	}
	return newRemoteRuntime(rconn, timeout), newRemoteImage(iconn, timeout), nil
}

// socketPath turns an endpoint flag into an absolute socket path. Only unix
// sockets are accepted: a CRI runtime on a TCP port would be reachable by
// anyone who can reach the port.
func socketPath(endpoint string) (string, error) {
	path := endpoint
	if scheme, rest, ok := strings.Cut(endpoint, "://"); ok {
		if scheme != "unix" {
			return "", fmt.Errorf("endpoint %q: unsupported scheme %q, only unix sockets are supported", endpoint, scheme)
		}
		path = rest
	}
	if path == "" {
		return "", fmt.Errorf("endpoint %q: empty socket path", endpoint)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("endpoint %q: %w", endpoint, err)
	}
	return abs, nil
}

// criConn is one gRPC channel to a runtime socket. The runtime and image
// adapters share it when both endpoints are the same socket, so closing it
// must be safe twice.
type criConn struct {
	cc        *grpc.ClientConn
	closeOnce sync.Once
	closeErr  error
}

// dialSocket creates the channel without connecting (grpc.NewClient is lazy).
// Calls are not wait-for-ready, which is what makes them fail fast while the
// runtime is down.
func dialSocket(path string) (*criConn, error) {
	cc, err := grpc.NewClient("unix://"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMsgSize), grpc.MaxCallSendMsgSize(maxMsgSize)),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: reconnectBackoff, MinConnectTimeout: 5 * time.Second}),
	)
	if err != nil {
		return nil, err
	}
	return &criConn{cc: cc}, nil
}

// close shuts the channel down once; later calls return the first result.
func (c *criConn) close() error {
	c.closeOnce.Do(func() { c.closeErr = c.cc.Close() })
	return c.closeErr
}

// DialRuntimeAPI connects to the other gRPC services the runtime serves on
// its CRI socket (containerd's own API, which image preloading uses), with
// the CRI connection's settings. The connection is the caller's to close.
func DialRuntimeAPI(endpoint string) (*grpc.ClientConn, error) {
	path, err := socketPath(endpoint)
	if err != nil {
		return nil, fmt.Errorf("container runtime endpoint: %w", err)
	}
	c, err := dialSocket(path)
	if err != nil {
		return nil, fmt.Errorf("dial container runtime %q: %w", endpoint, err)
	}
	return c.cc, nil
}
