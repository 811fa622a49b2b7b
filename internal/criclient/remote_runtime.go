package criclient

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	utilexec "k8s.io/utils/exec"
)

// remoteRuntime implements internalapi.RuntimeService over the generated
// gRPC client. It adds only what the generated client lacks: the per-call
// timeout and the unwrapping of responses into the interface's shapes.
// Errors are the runtime's gRPC status errors, unwrapped, so callers can test
// status.Code(err) == codes.NotFound; the Manager adds context.
type remoteRuntime struct {
	conn    *criConn
	client  runtimeapi.RuntimeServiceClient
	timeout time.Duration
	lists   *listCodec // decodes the node-wide listings (listdecode.go)
}

var _ internalapi.RuntimeService = (*remoteRuntime)(nil)

func newRemoteRuntime(conn *criConn, timeout time.Duration) *remoteRuntime {
	return &remoteRuntime{conn: conn, client: runtimeapi.NewRuntimeServiceClient(conn.cc), timeout: timeout, lists: newListCodec()}
}

// Version asks for the runtime's name and CRI API version.
func (r *remoteRuntime) Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	return r.client.Version(ctx, &runtimeapi.VersionRequest{Version: apiVersion})
}

// RunPodSandbox creates and starts a sandbox. It can take as long as CNI
// setup takes, still within the request timeout as in the kubelet.
func (r *remoteRuntime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	resp, err := r.client.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: config, RuntimeHandler: runtimeHandler})
	if err != nil {
		return "", err
	}
	if resp.PodSandboxId == "" {
		return "", errors.New("runtime returned an empty sandbox ID")
	}
	return resp.PodSandboxId, nil
}

// StopPodSandbox stops a sandbox and, by CRI contract, kills what still runs in it.
func (r *remoteRuntime) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	_, err := r.client.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: podSandboxID})
	return err
}

// RemovePodSandbox removes a sandbox and, by CRI contract, its containers.
func (r *remoteRuntime) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	_, err := r.client.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: podSandboxID})
	return err
}

// PodSandboxStatus returns what the list lacks: IPs and namespace options.
func (r *remoteRuntime) PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	resp, err := r.client.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: podSandboxID, Verbose: verbose})
	if err != nil {
		return nil, err
	}
	if resp.Status == nil {
		return nil, fmt.Errorf("runtime returned no status for sandbox %q", podSandboxID)
	}
	return resp, nil
}

// ListPodSandbox lists sandboxes matching filter (nil: all). The sandboxes
// are shared with other listings and must not be modified (listdecode.go).
func (r *remoteRuntime) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	resp, err := r.client.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: filter}, r.lists.sandboxCall(filter)...)
	if err != nil {
		return nil, err
	}
	return resp.Items, nil
}

// CreateContainer creates a container in a sandbox without starting it.
func (r *remoteRuntime) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	resp, err := r.client.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: podSandboxID, Config: config, SandboxConfig: sandboxConfig})
	if err != nil {
		return "", err
	}
	if resp.ContainerId == "" {
		return "", errors.New("runtime returned an empty container ID")
	}
	return resp.ContainerId, nil
}

// StartContainer starts a created container.
func (r *remoteRuntime) StartContainer(ctx context.Context, containerID string) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	_, err := r.client.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: containerID})
	return err
}

// StopContainer stops a container, giving it timeout seconds after SIGTERM.
// The call may legitimately last that long, so the deadline is the request
// timeout plus the grace period, as in the kubelet.
func (r *remoteRuntime) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout+time.Duration(timeout)*time.Second)
	defer cancel()
	_, err := r.client.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: containerID, Timeout: timeout})
	return err
}

// RemoveContainer removes a container, stopped or not.
func (r *remoteRuntime) RemoveContainer(ctx context.Context, containerID string) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	_, err := r.client.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: containerID})
	return err
}

// ListContainers lists containers matching filter (nil: all). The
// containers are shared with other listings and must not be modified
// (listdecode.go).
func (r *remoteRuntime) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	resp, err := r.client.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: filter}, r.lists.containerCall(filter)...)
	if err != nil {
		return nil, err
	}
	return resp.Containers, nil
}

// ContainerStatus returns what the list lacks: exit code, times, reason, message.
func (r *remoteRuntime) ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	resp, err := r.client.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: containerID, Verbose: verbose})
	if err != nil {
		return nil, err
	}
	if resp.Status == nil {
		return nil, fmt.Errorf("runtime returned no status for container %q", containerID)
	}
	return resp, nil
}

// UpdateContainerResources changes a running container's resources.
func (r *remoteRuntime) UpdateContainerResources(ctx context.Context, containerID string, resources *runtimeapi.ContainerResources) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	_, err := r.client.UpdateContainerResources(ctx, &runtimeapi.UpdateContainerResourcesRequest{
		ContainerId: containerID,
		Linux:       resources.GetLinux(),
		Windows:     resources.GetWindows(),
	})
	return err
}

// ExecSync runs cmd in a container and waits for it (exec probes, hooks). A
// non-zero exit is an error carrying the code, as the kubelet's prober
// expects. With timeout 0 the command is bounded only by ctx.
func (r *remoteRuntime) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	var cancel context.CancelFunc
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, r.timeout+timeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	defer cancel()
	resp, err := r.client.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: containerID, Cmd: cmd, Timeout: int64(timeout.Seconds())})
	if err != nil {
		return nil, nil, err
	}
	if resp.ExitCode != 0 {
		return resp.Stdout, resp.Stderr, utilexec.CodeExitError{
			Err:  fmt.Errorf("command %q exited with %d: %s", strings.Join(cmd, " "), resp.ExitCode, resp.Stderr),
			Code: int(resp.ExitCode),
		}
	}
	return resp.Stdout, resp.Stderr, nil
}

// Exec prepares a streaming exec endpoint.
func (r *remoteRuntime) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	return r.client.Exec(ctx, req)
}

// Attach prepares a streaming attach endpoint.
func (r *remoteRuntime) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	return r.client.Attach(ctx, req)
}

// PortForward prepares a streaming port-forward endpoint.
func (r *remoteRuntime) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	return r.client.PortForward(ctx, req)
}

// UpdatePodSandboxResources passes pod-level resources to the runtime.
func (r *remoteRuntime) UpdatePodSandboxResources(ctx context.Context, req *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	return r.client.UpdatePodSandboxResources(ctx, req)
}

// ReopenContainerLog asks the runtime to reopen a container's log after rotation.
func (r *remoteRuntime) ReopenContainerLog(ctx context.Context, containerID string) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	_, err := r.client.ReopenContainerLog(ctx, &runtimeapi.ReopenContainerLogRequest{ContainerId: containerID})
	return err
}

// CheckpointContainer checkpoints a container. It can take long, so it is
// bounded by the request's own timeout when it has one.
func (r *remoteRuntime) CheckpointContainer(ctx context.Context, options *runtimeapi.CheckpointContainerRequest) error {
	timeout := r.timeout
	if options.GetTimeout() > 0 {
		timeout = time.Duration(options.Timeout) * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := r.client.CheckpointContainer(ctx, options)
	return err
}

// CheckpointPod checkpoints a whole sandbox.
func (r *remoteRuntime) CheckpointPod(ctx context.Context, options *runtimeapi.CheckpointPodRequest) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	_, err := r.client.CheckpointPod(ctx, options)
	return err
}

// RestorePod restores a sandbox from a checkpoint.
func (r *remoteRuntime) RestorePod(ctx context.Context, options *runtimeapi.RestorePodRequest) (*runtimeapi.RestorePodResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	return r.client.RestorePod(ctx, options)
}

// GetContainerEvents streams container events into ch until ctx ends or the
// stream breaks. It has no timeout: the stream is meant to live long.
func (r *remoteRuntime) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, connectionEstablishedCallback func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := r.client.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		return err
	}
	if connectionEstablishedCallback != nil {
		connectionEstablishedCallback(stream)
	}
	for {
		resp, err := stream.Recv()
		if err == io.EOF {
			return errors.New("container events stream closed by the runtime")
		}
		if err != nil {
			return err
		}
		select {
		case ch <- resp:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// ContainerStats returns one container's resource usage.
func (r *remoteRuntime) ContainerStats(ctx context.Context, containerID string) (*runtimeapi.ContainerStats, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	resp, err := r.client.ContainerStats(ctx, &runtimeapi.ContainerStatsRequest{ContainerId: containerID})
	if err != nil {
		return nil, err
	}
	return resp.Stats, nil
}

// ListContainerStats returns resource usage of containers matching filter.
func (r *remoteRuntime) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	resp, err := r.client.ListContainerStats(ctx, &runtimeapi.ListContainerStatsRequest{Filter: filter})
	if err != nil {
		return nil, err
	}
	return resp.Stats, nil
}

// PodSandboxStats returns one sandbox's resource usage.
func (r *remoteRuntime) PodSandboxStats(ctx context.Context, podSandboxID string) (*runtimeapi.PodSandboxStats, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	resp, err := r.client.PodSandboxStats(ctx, &runtimeapi.PodSandboxStatsRequest{PodSandboxId: podSandboxID})
	if err != nil {
		return nil, err
	}
	return resp.Stats, nil
}

// ListPodSandboxStats returns resource usage of sandboxes matching filter.
func (r *remoteRuntime) ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	resp, err := r.client.ListPodSandboxStats(ctx, &runtimeapi.ListPodSandboxStatsRequest{Filter: filter})
	if err != nil {
		return nil, err
	}
	return resp.Stats, nil
}

// ListMetricDescriptors describes the metrics ListPodSandboxMetrics returns.
func (r *remoteRuntime) ListMetricDescriptors(ctx context.Context) ([]*runtimeapi.MetricDescriptor, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	resp, err := r.client.ListMetricDescriptors(ctx, &runtimeapi.ListMetricDescriptorsRequest{})
	if err != nil {
		return nil, err
	}
	return resp.Descriptors, nil
}

// ListPodSandboxMetrics returns the runtime's metrics of all sandboxes.
func (r *remoteRuntime) ListPodSandboxMetrics(ctx context.Context) ([]*runtimeapi.PodSandboxMetrics, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	resp, err := r.client.ListPodSandboxMetrics(ctx, &runtimeapi.ListPodSandboxMetricsRequest{})
	if err != nil {
		return nil, err
	}
	return resp.PodMetrics, nil
}

// UpdateRuntimeConfig passes runtime-wide settings (the pod CIDR).
func (r *remoteRuntime) UpdateRuntimeConfig(ctx context.Context, runtimeConfig *runtimeapi.RuntimeConfig) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	_, err := r.client.UpdateRuntimeConfig(ctx, &runtimeapi.UpdateRuntimeConfigRequest{RuntimeConfig: runtimeConfig})
	return err
}

// Status reports the runtime's conditions (RuntimeReady, NetworkReady).
func (r *remoteRuntime) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	resp, err := r.client.Status(ctx, &runtimeapi.StatusRequest{Verbose: verbose})
	if err != nil {
		return nil, err
	}
	if resp.Status == nil {
		return nil, errors.New("runtime returned no status")
	}
	return resp, nil
}

// RuntimeConfig returns the runtime's configuration (cgroup driver).
func (r *remoteRuntime) RuntimeConfig(ctx context.Context) (*runtimeapi.RuntimeConfigResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	return r.client.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
}

// Close shuts the channel down; safe to call more than once and on both
// services when they share a socket.
func (r *remoteRuntime) Close(context.Context) error {
	return r.conn.close()
}
