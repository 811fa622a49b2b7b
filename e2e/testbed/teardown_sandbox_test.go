package testbed

import (
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// vanishedRuntime answers as a runtime whose sandbox was removed by someone
// else between the teardown's listing and its calls.
type vanishedRuntime struct {
	runtimeapi.RuntimeServiceClient
	stopErr, removeErr error
}

func (v vanishedRuntime) PodSandboxStatus(context.Context, *runtimeapi.PodSandboxStatusRequest, ...grpc.CallOption) (*runtimeapi.PodSandboxStatusResponse, error) {
	return nil, status.Error(codes.NotFound, "sandbox not found")
}

func (v vanishedRuntime) StopPodSandbox(context.Context, *runtimeapi.StopPodSandboxRequest, ...grpc.CallOption) (*runtimeapi.StopPodSandboxResponse, error) {
	return &runtimeapi.StopPodSandboxResponse{}, v.stopErr
}

func (v vanishedRuntime) RemovePodSandbox(context.Context, *runtimeapi.RemovePodSandboxRequest, ...grpc.CallOption) (*runtimeapi.RemovePodSandboxResponse, error) {
	return &runtimeapi.RemovePodSandboxResponse{}, v.removeErr
}

func TestRemoveSandboxTreatsNotFoundAsRemoved(t *testing.T) {
	notFound := status.Error(codes.NotFound, "an error occurred when try to find sandbox")
	tests := []struct {
		name    string
		rt      vanishedRuntime
		wantErr bool
	}{
		{"gone before stop", vanishedRuntime{stopErr: notFound, removeErr: notFound}, false},
		{"gone before remove", vanishedRuntime{removeErr: notFound}, false},
		{"other stop error", vanishedRuntime{stopErr: status.Error(codes.Internal, "shim died")}, true},
		{"other remove error", vanishedRuntime{removeErr: status.Error(codes.Unavailable, "down")}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := removeSandbox(context.Background(), tt.rt, "sb1")
			if (err != nil) != tt.wantErr {
				t.Errorf("removeSandbox err = %v, want error %v", err, tt.wantErr)
			}
		})
	}
}
