package criclient

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeapi "k8s.io/cri-api/pkg/apis/testing"
)

func TestInstrumentCountsAndTimes(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	frs, fis := fakeapi.NewFakeRuntimeService(), fakeapi.NewFakeImageService()
	rs, is := Instrument(frs, fis, reg)
	ctx := context.Background()

	for range 3 {
		if _, err := rs.ListPodSandbox(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	frs.InjectError("ContainerStatus", status.Error(codes.NotFound, "gone"))
	if _, err := rs.ContainerStatus(ctx, "c1", false); status.Code(err) != codes.NotFound {
		t.Fatalf("wrapper changed the error: %v", err)
	}
	if _, err := is.PullImage(ctx, &runtimeapi.ImageSpec{Image: "busybox:1.36"}, nil, nil); err != nil {
		t.Fatal(err)
	}

	const want = `
# HELP berth_runtime_operations_errors_total Cumulative number of CRI operation errors by operation type.
# TYPE berth_runtime_operations_errors_total counter
berth_runtime_operations_errors_total{operation_type="container_status"} 1
# HELP berth_runtime_operations_total Cumulative number of CRI operations by operation type.
# TYPE berth_runtime_operations_total counter
berth_runtime_operations_total{operation_type="container_status"} 1
berth_runtime_operations_total{operation_type="list_podsandbox"} 3
berth_runtime_operations_total{operation_type="pull_image"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"berth_runtime_operations_total", "berth_runtime_operations_errors_total"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(reg, "berth_runtime_operations_duration_seconds"); n != 3 {
		t.Errorf("duration histogram has %d series, want 3", n)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "berth_runtime_operations_duration_seconds" {
			continue
		}
		for _, m := range mf.Metric {
			if m.Label[0].GetValue() == "list_podsandbox" && m.Histogram.GetSampleCount() != 3 {
				t.Errorf("list_podsandbox observed %d durations, want 3", m.Histogram.GetSampleCount())
			}
		}
	}
}

func TestInstrumentTwiceSharesSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	rs1, _ := Instrument(fakeapi.NewFakeRuntimeService(), fakeapi.NewFakeImageService(), reg)
	rs2, _ := Instrument(fakeapi.NewFakeRuntimeService(), fakeapi.NewFakeImageService(), reg)
	ctx := context.Background()
	if _, err := rs1.Version(ctx, "v1"); err != nil {
		t.Fatal(err)
	}
	if _, err := rs2.Version(ctx, "v1"); err != nil {
		t.Fatal(err)
	}
	m := newRuntimeMetrics(reg)
	if got := testutil.ToFloat64(m.ops.WithLabelValues("version")); got != 2 {
		t.Errorf("version count = %v, want 2 across both wrappers", got)
	}
}

func TestInstrumentWithoutRegistry(t *testing.T) {
	rs, _ := Instrument(fakeapi.NewFakeRuntimeService(), fakeapi.NewFakeImageService(), nil)
	if _, err := rs.Status(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(rs.(*instrumentedRuntime).m.ops.WithLabelValues("status")); got != 1 {
		t.Errorf("status count = %v, want 1", got)
	}
}
