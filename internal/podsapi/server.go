package podsapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/netutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	podsv1alpha1 "k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	"github.com/berth-agent/berth/internal/unixsocket"
)

// The kubelet's socket under its root directory
// (kubeletconfig.DefaultKubeletPodsAPIDirName and pods.Socket with
// ".sock"): berth's is at the same place under --root-dir.
const (
	DirName    = "pods-api"
	SocketName = "pods-api.sock"
)

// SocketPath is the pods API's socket under rootDir.
func SocketPath(rootDir string) string {
	return filepath.Join(rootDir, DirName, SocketName)
}

// Pods is what the pods API serves. Every method may be called from any
// goroutine.
type Pods interface {
	// ManagedPods returns the pods berth runs, each with its current
	// status (empty before its first sync), and whether every source has
	// delivered. The slice is the caller's; the pods are shared with
	// other readers and never written.
	ManagedPods() (pods []*v1.Pod, complete bool)
	// Changed returns a channel closed at the next change of what
	// ManagedPods returns; a watch takes it before it lists the pods.
	Changed() <-chan struct{}
}

// Options are what the pods API is built with.
type Options struct {
	// SocketGroup is the group id of the admin group allowed to use the
	// socket (--socket-group): the socket is then 0660 of that group in
	// a directory berth creates 0750 of that group. 0 is root alone: the
	// socket 0600 in a directory 0700.
	SocketGroup int
	Logger      *slog.Logger
}

// Limits of the pods API. A watch costs a goroutine or two and a hash per
// pod, and relists on every change; a list a copy of every pod and their
// encodings. Requests are tiny (a UID at most).
const (
	maxWatches     = 16
	maxListBuilds  = 2
	maxConns       = 64
	maxStreams     = 32
	maxRequestSize = 16 << 10
	// sendGrace is how long a watcher may leave an event unread (gRPC's
	// flow control blocks the send) before it is dropped.
	sendGrace = 30 * time.Second
)

// Server serves the pods API on its unix socket.
type Server struct {
	podsv1alpha1.UnimplementedPodsServer
	pods Pods
	log  *slog.Logger
	gid  int
	srv  *grpc.Server

	// Limits; New sets them, tests lower them before Serve.
	watches   chan struct{} // one token per watch being served
	builds    chan struct{} // one token per list being built
	sendGrace time.Duration

	listener net.Listener
	socket   string // removed when Serve returns
}

// New builds the pods API over pods.
func New(pods Pods, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Server{
		pods:      pods,
		log:       opts.Logger.With("api", "pods"),
		gid:       opts.SocketGroup,
		watches:   make(chan struct{}, maxWatches),
		builds:    make(chan struct{}, maxListBuilds),
		sendGrace: sendGrace,
	}
	s.srv = grpc.NewServer(
		grpc.MaxRecvMsgSize(maxRequestSize),
		grpc.MaxConcurrentStreams(maxStreams),
		// Stop returns once every handler has: nothing outlives Serve.
		grpc.WaitForHandlers(true),
	)
	podsv1alpha1.RegisterPodsServer(s.srv, s)
	return s
}

// Listen creates the socket at path (SocketPath of --root-dir) as
// unixsocket.Listen does: root's alone (0600 in a 0700 directory), or
// also the socket group's; a stale socket of a crashed run, or anything
// planted at path, is replaced without being followed.
func (s *Server) Listen(path string) error {
	m := unixsocket.Modes{Mode: 0o600, DirMode: 0o700}
	if s.gid != 0 {
		m = unixsocket.Modes{Mode: 0o660, DirMode: 0o750, Group: s.gid}
	}
	l, err := unixsocket.Listen(path, m)
	if err != nil {
		return fmt.Errorf("pods API: %w", err)
	}
	s.listener = netutil.LimitListener(l, maxConns)
	s.socket = path
	return nil
}

// Serve answers on the socket until ctx ends, then ends every call and
// removes the socket.
func (s *Server) Serve(ctx context.Context) error {
	errc := make(chan error, 1)
	go func() { errc <- s.srv.Serve(s.listener) }()
	s.log.Info("serving the kubelet's pods API", "socket", s.socket)
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	s.srv.Stop()
	if ctx.Err() != nil {
		err = <-errc
	}
	os.Remove(s.socket)
	if errors.Is(err, grpc.ErrServerStopped) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("pods API on %s: %w", s.socket, err)
	}
	return nil
}

// ListPods returns every pod berth runs, sorted by UID as the kubelet's.
func (s *Server) ListPods(ctx context.Context, _ *podsv1alpha1.ListPodsRequest) (*podsv1alpha1.ListPodsResponse, error) {
	var out [][]byte
	err := s.withPods(ctx, func(pods []*v1.Pod) error {
		out = make([][]byte, 0, len(pods))
		for _, p := range pods {
			data, err := marshal(p)
			if err != nil {
				return err
			}
			out = append(out, data)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return &podsv1alpha1.ListPodsResponse{Pods: out}, nil
}

// GetPod returns the pod of the UID asked for; NotFound, as the kubelet
// answers, when berth runs none.
func (s *Server) GetPod(ctx context.Context, req *podsv1alpha1.GetPodRequest) (*podsv1alpha1.GetPodResponse, error) {
	var data []byte
	err := s.withPods(ctx, func(pods []*v1.Pod) error {
		i := slices.IndexFunc(pods, func(p *v1.Pod) bool { return p.UID == types.UID(req.GetPodUID()) })
		if i < 0 {
			return status.Errorf(codes.NotFound, "pod with UID %s not found", req.GetPodUID())
		}
		var err error
		data, err = marshal(pods[i])
		return err
	})
	if err != nil {
		return nil, err
	}
	return &podsv1alpha1.GetPodResponse{Pod: data}, nil
}

// withPods calls f with the pods sorted by UID, holding a list token: at
// most maxListBuilds copies of the pods and their encodings are built at
// once, others wait. Until every source has delivered the answer is
// FailedPrecondition, as the kubelet's while its sources are not ready: a
// list then could miss pods berth is about to run.
func (s *Server) withPods(ctx context.Context, f func([]*v1.Pod) error) error {
	select {
	case s.builds <- struct{}{}:
		defer func() { <-s.builds }()
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
	pods, complete := s.pods.ManagedPods()
	if !complete {
		return status.Error(codes.FailedPrecondition, "berth is starting: not every pod source has delivered its manifests yet")
	}
	slices.SortFunc(pods, func(a, b *v1.Pod) int { return strings.Compare(string(a.UID), string(b.UID)) })
	return f(pods)
}

// marshal encodes p as the kubelet serves it (v1.Pod#Marshal): a pod
// without a status yet is Pending, as the kubelet's before its status
// manager has one.
func marshal(p *v1.Pod) ([]byte, error) {
	if p.Status.Phase == "" {
		cp := *p
		cp.Status.Phase = v1.PodPending
		p = &cp
	}
	data, err := p.Marshal()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "encode pod %s/%s (uid %s): %v", p.Namespace, p.Name, p.UID, err)
	}
	return data, nil
}
