package criclient

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// criAPIVersion is the only CRI API berth speaks; runtimes report it in
// VersionResponse.RuntimeApiVersion.
const criAPIVersion = "v1"

// CheckVersion asks the runtime at endpoint for its version and makes sure it
// speaks CRI v1. Its errors name the endpoint and say what is wrong (socket
// missing, nothing answering, wrong API), since they are what an operator
// sees when berth cannot reach the runtime.
func CheckVersion(ctx context.Context, rs internalapi.RuntimeService, endpoint string) (*runtimeapi.VersionResponse, error) {
	resp, err := rs.Version(ctx, criAPIVersion)
	if err != nil {
		return nil, versionError(endpoint, err)
	}
	if resp.RuntimeApiVersion != criAPIVersion {
		return nil, fmt.Errorf("container runtime %s %s at %s speaks CRI %q, berth needs %q",
			resp.RuntimeName, resp.RuntimeVersion, endpoint, resp.RuntimeApiVersion, criAPIVersion)
	}
	return resp, nil
}

// versionError explains a failed Version call by the gRPC code, checking the
// socket file when nothing answered: "no such socket" and "nothing
// listening" need different fixes.
func versionError(endpoint string, err error) error {
	switch status.Code(err) {
	case codes.Unimplemented:
		return fmt.Errorf("container runtime at %s does not serve the CRI v1 API (runtime.v1.RuntimeService); berth needs containerd 1.6 or newer with its cri plugin enabled, or CRI-O 1.20 or newer: %w", endpoint, err)
	case codes.Unavailable:
		if path, perr := socketPath(endpoint); perr == nil {
			if _, serr := os.Stat(path); errors.Is(serr, fs.ErrNotExist) {
				return fmt.Errorf("container runtime socket %s does not exist; is the runtime running? %w", path, err)
			}
		}
		return fmt.Errorf("container runtime at %s is not answering: %w", endpoint, err)
	case codes.DeadlineExceeded:
		return fmt.Errorf("container runtime at %s did not answer in time: %w", endpoint, err)
	}
	return fmt.Errorf("container runtime version at %s: %w", endpoint, err)
}
