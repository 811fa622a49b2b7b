package prober

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/handlers"
)

// runGRPC is a grpc probe: the standard grpc.health.v1 Check, for the
// action's service ("" is the server as a whole), over plaintext to the
// pod's IP. SERVING succeeds; anything else, an error or no answer within
// the timeout fails, with the kubelet's words.
func runGRPC(ctx context.Context, a *v1.GRPCAction, t target, timeout time.Duration) (Result, string, error) {
	addr := net.JoinHostPort(t.host, strconv.Itoa(int(a.Port)))
	// passthrough: an IP needs no resolver goroutine.
	conn, err := grpc.NewClient("passthrough:///"+addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUserAgent(handlers.ProbeUserAgent))
	if err != nil {
		return Unknown, "", fmt.Errorf("grpc client for %s: %w", addr, err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	service := ""
	if a.Service != nil {
		service = *a.Service
	}
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		switch status.Code(err) {
		case codes.Unimplemented:
			return Failure, fmt.Sprintf("this server does not implement the grpc health protocol (grpc.health.v1.Health): %s", status.Convert(err).Message()), nil
		case codes.DeadlineExceeded:
			return Failure, fmt.Sprintf("timeout: health rpc did not complete within %v", timeout), nil
		}
		return Failure, fmt.Sprintf("error: health rpc probe failed: %v", err), nil
	}
	if resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		return Failure, fmt.Sprintf("service unhealthy (responded with %q)", resp.GetStatus()), nil
	}
	return Success, "", nil
}
