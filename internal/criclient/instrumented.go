package criclient

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// runtimeMetrics are the kubelet's runtime operation metrics under berth's
// prefix, so dashboards built for kubelet_runtime_operations_* carry over by
// renaming the prefix.
type runtimeMetrics struct {
	ops      *prometheus.CounterVec
	errs     *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

func newRuntimeMetrics(reg prometheus.Registerer) *runtimeMetrics {
	m := &runtimeMetrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_runtime_operations_total",
			Help: "Cumulative number of CRI operations by operation type.",
		}, []string{"operation_type"}),
		errs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_runtime_operations_errors_total",
			Help: "Cumulative number of CRI operation errors by operation type.",
		}, []string{"operation_type"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "berth_runtime_operations_duration_seconds",
			Help: "Duration in seconds of CRI operations by operation type.",
			// The kubelet's buckets: 5 ms to about 5 hours (image pulls).
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 14),
		}, []string{"operation_type"}),
	}
	if reg != nil {
		m.ops = registerOrReuse(reg, m.ops)
		m.errs = registerOrReuse(reg, m.errs)
		m.duration = registerOrReuse(reg, m.duration)
	}
	return m
}

// registerOrReuse registers c, or returns the collector already registered
// under the same name, so instrumenting twice against one registry (a second
// Dial after a configuration reload, tests) shares the series instead of
// panicking.
func registerOrReuse[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}

// record counts one finished operation that started at start.
func (m *runtimeMetrics) record(op string, start time.Time, err error) {
	m.ops.WithLabelValues(op).Inc()
	m.duration.WithLabelValues(op).Observe(time.Since(start).Seconds())
	if err != nil {
		m.errs.WithLabelValues(op).Inc()
	}
}

// Instrument wraps the runtime and image services so every call is counted,
// timed and its errors counted in reg (nil: metrics are kept but not
// exported). Operation names are the kubelet's (list_podsandbox,
// container_status, pull_image, ...). It panics only if reg already holds a
// different collector under one of the metric names, a programming error.
func Instrument(rs internalapi.RuntimeService, is internalapi.ImageManagerService, reg prometheus.Registerer) (internalapi.RuntimeService, internalapi.ImageManagerService) {
	m := newRuntimeMetrics(reg)
	return &instrumentedRuntime{rs: rs, m: m}, &instrumentedImages{is: is, m: m}
}

// instrumentedRuntime records every RuntimeService call in m.
type instrumentedRuntime struct {
	rs internalapi.RuntimeService
	m  *runtimeMetrics
}

var _ internalapi.RuntimeService = (*instrumentedRuntime)(nil)

func (r *instrumentedRuntime) Version(ctx context.Context, apiVersion string) (*runtimeapi.VersionResponse, error) {
	start := time.Now()
	resp, err := r.rs.Version(ctx, apiVersion)
	r.m.record("version", start, err)
	return resp, err
}

func (r *instrumentedRuntime) RunPodSandbox(ctx context.Context, config *runtimeapi.PodSandboxConfig, runtimeHandler string) (string, error) {
	start := time.Now()
	id, err := r.rs.RunPodSandbox(ctx, config, runtimeHandler)
	r.m.record("run_podsandbox", start, err)
	return id, err
}

func (r *instrumentedRuntime) StopPodSandbox(ctx context.Context, podSandboxID string) error {
	start := time.Now()
	err := r.rs.StopPodSandbox(ctx, podSandboxID)
	r.m.record("stop_podsandbox", start, err)
	return err
}

func (r *instrumentedRuntime) RemovePodSandbox(ctx context.Context, podSandboxID string) error {
	start := time.Now()
	err := r.rs.RemovePodSandbox(ctx, podSandboxID)
	r.m.record("remove_podsandbox", start, err)
	return err
}

func (r *instrumentedRuntime) PodSandboxStatus(ctx context.Context, podSandboxID string, verbose bool) (*runtimeapi.PodSandboxStatusResponse, error) {
	start := time.Now()
	resp, err := r.rs.PodSandboxStatus(ctx, podSandboxID, verbose)
	r.m.record("podsandbox_status", start, err)
	return resp, err
}

func (r *instrumentedRuntime) ListPodSandbox(ctx context.Context, filter *runtimeapi.PodSandboxFilter) ([]*runtimeapi.PodSandbox, error) {
	start := time.Now()
	items, err := r.rs.ListPodSandbox(ctx, filter)
	r.m.record("list_podsandbox", start, err)
	return items, err
}

func (r *instrumentedRuntime) PortForward(ctx context.Context, req *runtimeapi.PortForwardRequest) (*runtimeapi.PortForwardResponse, error) {
	start := time.Now()
	resp, err := r.rs.PortForward(ctx, req)
	r.m.record("port_forward", start, err)
	return resp, err
}

func (r *instrumentedRuntime) UpdatePodSandboxResources(ctx context.Context, req *runtimeapi.UpdatePodSandboxResourcesRequest) (*runtimeapi.UpdatePodSandboxResourcesResponse, error) {
	start := time.Now()
	resp, err := r.rs.UpdatePodSandboxResources(ctx, req)
	r.m.record("update_podsandbox_resources", start, err)
	return resp, err
}

func (r *instrumentedRuntime) CheckpointPod(ctx context.Context, options *runtimeapi.CheckpointPodRequest) error {
	start := time.Now()
	err := r.rs.CheckpointPod(ctx, options)
	r.m.record("checkpoint_pod", start, err)
	return err
}

func (r *instrumentedRuntime) RestorePod(ctx context.Context, options *runtimeapi.RestorePodRequest) (*runtimeapi.RestorePodResponse, error) {
	start := time.Now()
	resp, err := r.rs.RestorePod(ctx, options)
	r.m.record("restore_pod", start, err)
	return resp, err
}

func (r *instrumentedRuntime) CreateContainer(ctx context.Context, podSandboxID string, config *runtimeapi.ContainerConfig, sandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	start := time.Now()
	id, err := r.rs.CreateContainer(ctx, podSandboxID, config, sandboxConfig)
	r.m.record("create_container", start, err)
	return id, err
}

func (r *instrumentedRuntime) StartContainer(ctx context.Context, containerID string) error {
	start := time.Now()
	err := r.rs.StartContainer(ctx, containerID)
	r.m.record("start_container", start, err)
	return err
}

func (r *instrumentedRuntime) StopContainer(ctx context.Context, containerID string, timeout int64) error {
	start := time.Now()
	err := r.rs.StopContainer(ctx, containerID, timeout)
	r.m.record("stop_container", start, err)
	return err
}

func (r *instrumentedRuntime) RemoveContainer(ctx context.Context, containerID string) error {
	start := time.Now()
	err := r.rs.RemoveContainer(ctx, containerID)
	r.m.record("remove_container", start, err)
	return err
}

func (r *instrumentedRuntime) ListContainers(ctx context.Context, filter *runtimeapi.ContainerFilter) ([]*runtimeapi.Container, error) {
	start := time.Now()
	items, err := r.rs.ListContainers(ctx, filter)
	r.m.record("list_containers", start, err)
	return items, err
}

func (r *instrumentedRuntime) ContainerStatus(ctx context.Context, containerID string, verbose bool) (*runtimeapi.ContainerStatusResponse, error) {
	start := time.Now()
	resp, err := r.rs.ContainerStatus(ctx, containerID, verbose)
	r.m.record("container_status", start, err)
	return resp, err
}

func (r *instrumentedRuntime) UpdateContainerResources(ctx context.Context, containerID string, resources *runtimeapi.ContainerResources) error {
	start := time.Now()
	err := r.rs.UpdateContainerResources(ctx, containerID, resources)
	r.m.record("update_container", start, err)
	return err
}

func (r *instrumentedRuntime) ExecSync(ctx context.Context, containerID string, cmd []string, timeout time.Duration) ([]byte, []byte, error) {
	start := time.Now()
	stdout, stderr, err := r.rs.ExecSync(ctx, containerID, cmd, timeout)
	r.m.record("exec_sync", start, err)
	return stdout, stderr, err
}

func (r *instrumentedRuntime) Exec(ctx context.Context, req *runtimeapi.ExecRequest) (*runtimeapi.ExecResponse, error) {
	start := time.Now()
	resp, err := r.rs.Exec(ctx, req)
	r.m.record("exec", start, err)
	return resp, err
}

func (r *instrumentedRuntime) Attach(ctx context.Context, req *runtimeapi.AttachRequest) (*runtimeapi.AttachResponse, error) {
	start := time.Now()
	resp, err := r.rs.Attach(ctx, req)
	r.m.record("attach", start, err)
	return resp, err
}

func (r *instrumentedRuntime) ReopenContainerLog(ctx context.Context, containerID string) error {
	start := time.Now()
	err := r.rs.ReopenContainerLog(ctx, containerID)
	r.m.record("reopen_container_log", start, err)
	return err
}

func (r *instrumentedRuntime) CheckpointContainer(ctx context.Context, options *runtimeapi.CheckpointContainerRequest) error {
	start := time.Now()
	err := r.rs.CheckpointContainer(ctx, options)
	r.m.record("checkpoint_container", start, err)
	return err
}

// GetContainerEvents is timed over the stream's whole life; the count and
// the error say how often the stream broke.
func (r *instrumentedRuntime) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, connectionEstablishedCallback func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	start := time.Now()
	err := r.rs.GetContainerEvents(ctx, ch, connectionEstablishedCallback)
	r.m.record("get_container_events", start, err)
	return err
}

func (r *instrumentedRuntime) ContainerStats(ctx context.Context, containerID string) (*runtimeapi.ContainerStats, error) {
	start := time.Now()
	resp, err := r.rs.ContainerStats(ctx, containerID)
	r.m.record("container_stats", start, err)
	return resp, err
}

func (r *instrumentedRuntime) ListContainerStats(ctx context.Context, filter *runtimeapi.ContainerStatsFilter) ([]*runtimeapi.ContainerStats, error) {
	start := time.Now()
	resp, err := r.rs.ListContainerStats(ctx, filter)
	r.m.record("list_container_stats", start, err)
	return resp, err
}

func (r *instrumentedRuntime) PodSandboxStats(ctx context.Context, podSandboxID string) (*runtimeapi.PodSandboxStats, error) {
	start := time.Now()
	resp, err := r.rs.PodSandboxStats(ctx, podSandboxID)
	r.m.record("podsandbox_stats", start, err)
	return resp, err
}

func (r *instrumentedRuntime) ListPodSandboxStats(ctx context.Context, filter *runtimeapi.PodSandboxStatsFilter) ([]*runtimeapi.PodSandboxStats, error) {
	start := time.Now()
	resp, err := r.rs.ListPodSandboxStats(ctx, filter)
	r.m.record("list_podsandbox_stats", start, err)
	return resp, err
}

func (r *instrumentedRuntime) ListMetricDescriptors(ctx context.Context) ([]*runtimeapi.MetricDescriptor, error) {
	start := time.Now()
	resp, err := r.rs.ListMetricDescriptors(ctx)
	r.m.record("list_metric_descriptors", start, err)
	return resp, err
}

func (r *instrumentedRuntime) ListPodSandboxMetrics(ctx context.Context) ([]*runtimeapi.PodSandboxMetrics, error) {
	start := time.Now()
	resp, err := r.rs.ListPodSandboxMetrics(ctx)
	r.m.record("list_podsandbox_metrics", start, err)
	return resp, err
}

func (r *instrumentedRuntime) UpdateRuntimeConfig(ctx context.Context, runtimeConfig *runtimeapi.RuntimeConfig) error {
	start := time.Now()
	err := r.rs.UpdateRuntimeConfig(ctx, runtimeConfig)
	r.m.record("update_runtime_config", start, err)
	return err
}

func (r *instrumentedRuntime) Status(ctx context.Context, verbose bool) (*runtimeapi.StatusResponse, error) {
	start := time.Now()
	resp, err := r.rs.Status(ctx, verbose)
	r.m.record("status", start, err)
	return resp, err
}

func (r *instrumentedRuntime) RuntimeConfig(ctx context.Context) (*runtimeapi.RuntimeConfigResponse, error) {
	start := time.Now()
	resp, err := r.rs.RuntimeConfig(ctx)
	r.m.record("runtime_config", start, err)
	return resp, err
}

// Close is not a runtime operation and is not recorded.
func (r *instrumentedRuntime) Close(ctx context.Context) error {
	return r.rs.Close(ctx)
}

// instrumentedImages records every ImageManagerService call in m.
type instrumentedImages struct {
	is internalapi.ImageManagerService
	m  *runtimeMetrics
}

var _ internalapi.ImageManagerService = (*instrumentedImages)(nil)

func (r *instrumentedImages) ListImages(ctx context.Context, filter *runtimeapi.ImageFilter) ([]*runtimeapi.Image, error) {
	start := time.Now()
	resp, err := r.is.ListImages(ctx, filter)
	r.m.record("list_images", start, err)
	return resp, err
}

func (r *instrumentedImages) ImageStatus(ctx context.Context, image *runtimeapi.ImageSpec, verbose bool) (*runtimeapi.ImageStatusResponse, error) {
	start := time.Now()
	resp, err := r.is.ImageStatus(ctx, image, verbose)
	r.m.record("image_status", start, err)
	return resp, err
}

func (r *instrumentedImages) PullImage(ctx context.Context, image *runtimeapi.ImageSpec, auth *runtimeapi.AuthConfig, podSandboxConfig *runtimeapi.PodSandboxConfig) (string, error) {
	start := time.Now()
	ref, err := r.is.PullImage(ctx, image, auth, podSandboxConfig)
	r.m.record("pull_image", start, err)
	return ref, err
}

func (r *instrumentedImages) RemoveImage(ctx context.Context, image *runtimeapi.ImageSpec) error {
	start := time.Now()
	err := r.is.RemoveImage(ctx, image)
	r.m.record("remove_image", start, err)
	return err
}

func (r *instrumentedImages) ImageFsInfo(ctx context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	start := time.Now()
	resp, err := r.is.ImageFsInfo(ctx)
	r.m.record("image_fs_info", start, err)
	return resp, err
}

// Close is not a runtime operation and is not recorded.
func (r *instrumentedImages) Close(ctx context.Context) error {
	return r.is.Close(ctx)
}
