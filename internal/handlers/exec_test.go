package handlers

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	apitest "k8s.io/cri-api/pkg/apis/testing"
	utilexec "k8s.io/utils/exec"
)

func TestExecSync(t *testing.T) {
	tests := []struct {
		name        string
		err         error
		wantExit    int
		wantTimeout bool
		wantErr     bool
	}{
		{name: "exit 0"},
		{name: "non-zero exit is a result", err: utilexec.CodeExitError{Err: errors.New("exited"), Code: 7}, wantExit: 7},
		{name: "grpc deadline is a timeout", err: status.Error(codes.DeadlineExceeded, "deadline"), wantTimeout: true, wantErr: true},
		{name: "containerd's timeout words", err: status.Error(codes.Unknown, "failed to exec in container: timeout 1s exceeded: context deadline exceeded"), wantTimeout: true, wantErr: true},
		{name: "other failure", err: status.Error(codes.NotFound, "no such container"), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rs := apitest.NewFakeRuntimeService()
			if tt.err != nil {
				rs.InjectError("ExecSync", tt.err)
			}
			res, err := NewExecer(rs).ExecSync(context.Background(), "c1", []string{"check"}, time.Second)
			if res.ExitCode != tt.wantExit || (err != nil) != tt.wantErr || errors.Is(err, ErrExecTimeout) != tt.wantTimeout {
				t.Errorf("= %+v, %v; want exit %d, error %v, timeout %v", res, err, tt.wantExit, tt.wantErr, tt.wantTimeout)
			}
		})
	}
}
