package criclient

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"
)

// testCRIServer is a minimal CRI runtime on a unix socket, for what the
// fakes cannot show: the real gRPC channel's connect, reconnect, deadline
// and message-size behaviour.
type testCRIServer struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	apiVersion string
	block      bool // Version blocks until the caller gives up
	listBytes  int  // ListContainers returns about this many bytes
}

func (s *testCRIServer) Version(ctx context.Context, _ *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	if s.block {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "test", RuntimeVersion: "1.0", RuntimeApiVersion: s.apiVersion}, nil
}

func (s *testCRIServer) ListContainers(context.Context, *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	resp := &runtimeapi.ListContainersResponse{}
	for size := 0; size < s.listBytes; size += 1 << 16 {
		resp.Containers = append(resp.Containers, &runtimeapi.Container{
			Id: "c", Annotations: map[string]string{"blob": strings.Repeat("x", 1<<16)},
		})
	}
	return resp, nil
}

func (s *testCRIServer) ExecSync(context.Context, *runtimeapi.ExecSyncRequest) (*runtimeapi.ExecSyncResponse, error) {
	return &runtimeapi.ExecSyncResponse{Stdout: []byte("out"), Stderr: []byte("bad things"), ExitCode: 3}, nil
}

// serveCRI serves srv (no CRI service at all if nil) on path until the
// returned stop is called or the test ends.
func serveCRI(t *testing.T, path string, srv *testCRIServer) (stop func()) {
	t.Helper()
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer()
	if srv != nil {
		runtimeapi.RegisterRuntimeServiceServer(gs, srv)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = gs.Serve(l)
	}()
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			gs.Stop()
			<-done
		}
	}
	t.Cleanup(stop)
	return stop
}

// closeServices closes both services of a Dial.
func closeServices(t *testing.T, rs interface{ Close(context.Context) error }, is interface{ Close(context.Context) error }) {
	t.Helper()
	if err := rs.Close(context.Background()); err != nil {
		t.Error(err)
	}
	if err := is.Close(context.Background()); err != nil {
		t.Errorf("closing the shared channel twice: %v", err)
	}
}

// waitReady waits until the gRPC channel is ready, following its
// connectivity-state changes (an idle channel is told to connect, as a call
// would), and returns how long that took; reconnection is a real-time
// affair of the gRPC channel, so this test cannot use a fake clock.
func waitReady(t *testing.T, what string, cc *grpc.ClientConn) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for s := cc.GetState(); s != connectivity.Ready; s = cc.GetState() {
		if s == connectivity.Idle {
			cc.Connect()
		}
		if !cc.WaitForStateChange(ctx, s) {
			t.Fatalf("%s: channel still %v after 10s", what, s)
		}
	}
	return time.Since(start)
}

func TestSocketPath(t *testing.T) {
	tests := []struct {
		in, want string
		bad      bool
	}{
		{in: "unix:///run/containerd/containerd.sock", want: "/run/containerd/containerd.sock"},
		{in: "/run/crio/crio.sock", want: "/run/crio/crio.sock"},
		{in: "tcp://127.0.0.1:1234", bad: true},
		{in: "npipe:////./pipe/containerd", bad: true},
		{in: "unix://", bad: true},
		{in: "", bad: true},
	}
	for _, tt := range tests {
		got, err := socketPath(tt.in)
		if (err != nil) != tt.bad || got != tt.want {
			t.Errorf("socketPath(%q) = %q, %v; want %q, bad=%v", tt.in, got, err, tt.want, tt.bad)
		}
	}
	if _, _, err := Dial("tcp://127.0.0.1:1", "", 0); err == nil || !strings.Contains(err.Error(), "only unix sockets") {
		t.Errorf("Dial of a TCP endpoint: %v", err)
	}
}

func TestDialIsLazyFailsFastAndReconnects(t *testing.T) {
	// Registered first, so it runs after the servers' cleanups; goroutines
	// from before the test (the e2e build's shared test bed) are not ours.
	before := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, before) })
	path := filepath.Join(t.TempDir(), "cri.sock")
	endpoint := "unix://" + path
	rs, is, err := Dial(endpoint, "", time.Minute)
	if err != nil {
		t.Fatalf("Dial must not need the runtime: %v", err)
	}
	defer closeServices(t, rs, is)
	ctx := context.Background()

	start := time.Now()
	_, err = CheckVersion(ctx, rs, endpoint)
	if err == nil || !strings.Contains(err.Error(), "socket "+path+" does not exist") {
		t.Errorf("missing socket: %v", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a call without runtime took %v; it must fail fast", d)
	}

	stop := serveCRI(t, path, &testCRIServer{apiVersion: "v1"})
	cc := rs.(*remoteRuntime).conn.cc
	took := waitReady(t, "runtime started", cc)
	if _, err := CheckVersion(ctx, rs, endpoint); err != nil {
		t.Fatalf("runtime started: %v", err)
	}
	t.Logf("runtime came up: same client answered after %v", took)

	stop()
	start = time.Now()
	_, err = rs.Version(ctx, "v1")
	if status.Code(err) != codes.Unavailable {
		t.Errorf("runtime down: err = %v, want Unavailable", err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("a call with the runtime down took %v; it must fail fast", d)
	}
	_, err = CheckVersion(ctx, rs, endpoint)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("runtime down: CheckVersion error %v does not name the socket", err)
	}

	serveCRI(t, path, &testCRIServer{apiVersion: "v1"})
	took = waitReady(t, "runtime restarted", cc)
	if _, err := rs.Version(ctx, "v1"); err != nil {
		t.Fatalf("runtime restarted: %v", err)
	}
	if took > 3*time.Second {
		t.Errorf("reconnection took %v, want about the 1s back-off cap", took)
	}
	t.Logf("runtime restarted: same client answered after %v", took)
}

func TestCheckVersionErrors(t *testing.T) {
	tests := []struct {
		name string
		srv  *testCRIServer
		want string
	}{
		{"not a CRI v1 runtime", nil, "does not serve the CRI v1 API"},
		{"older API", &testCRIServer{apiVersion: "v1alpha2"}, `speaks CRI "v1alpha2", berth needs "v1"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "cri.sock")
			serveCRI(t, path, tt.srv)
			rs, is, err := Dial(path, "", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			defer closeServices(t, rs, is)
			_, err = CheckVersion(context.Background(), rs, path)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("err = %v, want it to name %s and say %q", err, path, tt.want)
			}
		})
	}
}

func TestDialTimeouts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cri.sock")
	serveCRI(t, path, &testCRIServer{block: true})
	tests := []struct {
		name       string
		reqTimeout time.Duration
		ctxTimeout time.Duration
	}{
		{"request timeout bounds the call", 200 * time.Millisecond, time.Minute},
		{"a shorter context wins", time.Minute, 200 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs, is, err := Dial(path, "", tt.reqTimeout)
			if err != nil {
				t.Fatal(err)
			}
			defer closeServices(t, rs, is)
			ctx, cancel := context.WithTimeout(context.Background(), tt.ctxTimeout)
			defer cancel()
			start := time.Now()
			_, err = CheckVersion(ctx, rs, path)
			if status.Code(errors.Unwrap(err)) != codes.DeadlineExceeded || !strings.Contains(err.Error(), "did not answer in time") {
				t.Errorf("err = %v, want a deadline error", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("call took %v", d)
			}
		})
	}
}

func TestDialLargeMessagesAndExitCodes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cri.sock")
	serveCRI(t, path, &testCRIServer{listBytes: 8 << 20})
	rs, is, err := Dial(path, path, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer closeServices(t, rs, is)
	ctx := context.Background()
	list, err := rs.ListContainers(ctx, nil)
	if err != nil {
		t.Fatalf("an 8 MiB listing must fit: %v", err)
	}
	if len(list) != 128 {
		t.Errorf("listed %d containers, want 128", len(list))
	}
	stdout, _, err := rs.ExecSync(ctx, "c", []string{"false"}, time.Second)
	var exit utilexec.CodeExitError
	if !errors.As(err, &exit) || exit.Code != 3 || string(stdout) != "out" || !strings.Contains(err.Error(), "bad things") {
		t.Errorf("ExecSync = %q, %v; want exit code 3 with stderr", stdout, err)
	}
}

// TestBufferPoolTiers checks the pool gRPC reads CRI messages into: a
// relist-sized message gets a buffer at most twice its size, never gRPC's
// default 1 MiB tier.
func TestBufferPoolTiers(t *testing.T) {
	for _, tc := range []struct {
		size, wantCap int
	}{
		{size: 100, wantCap: 256},
		{size: 4 << 10, wantCap: 4 << 10},
		{size: 44 << 10, wantCap: 64 << 10},
		{size: 300 << 10, wantCap: 512 << 10},
		{size: 1 << 20, wantCap: 1 << 20},
	} {
		buf := mem.DefaultBufferPool().Get(tc.size)
		if len(*buf) != tc.size || cap(*buf) != tc.wantCap {
			t.Errorf("Get(%d): len %d cap %d, want len %d cap %d", tc.size, len(*buf), cap(*buf), tc.size, tc.wantCap)
		}
		mem.DefaultBufferPool().Put(buf)
	}
}
