package gc

import (
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berth-agent/berth/internal/criconfig"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeapi "k8s.io/cri-api/pkg/apis/testing"
)

// rotateEnv is a fake runtime with one running container whose log file
// lives in a temporary directory.
type rotateEnv struct {
	*gcTestEnv
	id, log string
}

func newRotateEnv(t *testing.T) *rotateEnv {
	t.Helper()
	env := newGCTestEnv(t)
	dir := filepath.Join(env.logs, "default_a-node_a", "app")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	e := &rotateEnv{gcTestEnv: env, id: "c-a", log: filepath.Join(dir, "0.log")}
	labels := podLabels("a", "a-node")
	labels[criconfig.LabelContainerName] = "app"
	env.rs.SetFakeSandboxes([]*fakeapi.FakePodSandbox{fakeSandbox("s-a", "a", 0)})
	env.rs.SetFakeContainers([]*fakeapi.FakeContainer{{ContainerStatus: runtimeapi.ContainerStatus{
		Id: e.id, Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, State: runtimeapi.ContainerState_CONTAINER_RUNNING,
		CreatedAt: baseTime.UnixNano(), Labels: labels, LogPath: e.log,
	}, SandboxID: "s-a"}})
	if _, err := env.m.Relist(context.Background()); err != nil {
		t.Fatal(err)
	}
	env.calls()
	return e
}

// write appends n bytes to the current log, as the runtime would.
func (e *rotateEnv) write(t *testing.T, content string) {
	t.Helper()
	f, err := os.OpenFile(e.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o640)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
}

// files lists the log directory's file names.
func (e *rotateEnv) files(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Dir(e.log))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, en := range entries {
		out = append(out, en.Name())
	}
	return out
}

func gunzip(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestRotateLogs(t *testing.T) {
	e := newRotateEnv(t)
	ctx := context.Background()
	policy := LogRotationPolicy{MaxSize: 100, MaxFiles: 3, Workers: 2}

	// Under the limit: one stat, no runtime call, nothing changes.
	e.write(t, strings.Repeat("a", 99))
	res := e.gc.RotateLogs(ctx, []string{e.id}, policy)
	if len(res.Rotated) != 0 || len(res.Errors) != 0 {
		t.Fatalf("under the limit: %+v", res)
	}
	if calls := e.calls(); len(calls) != 0 {
		t.Errorf("under the limit the runtime was called: %v", calls)
	}

	// At the limit: renamed with the kubelet's timestamp and reopened.
	e.write(t, "a")
	res = e.gc.RotateLogs(ctx, []string{e.id}, policy)
	if !slices.Equal(res.Rotated, []string{e.log}) || len(res.Errors) != 0 {
		t.Fatalf("at the limit: %+v", res)
	}
	if calls := e.calls(); !slices.Equal(calls, []string{"ReopenContainerLog"}) {
		t.Errorf("calls = %v", calls)
	}
	first := "0.log." + baseTime.Format(rotateTimestampFormat)
	if got := e.files(t); !slices.Equal(got, []string{first}) {
		t.Errorf("files after the first rotation: %v", got)
	}

	// The next pass compresses the rotated file (the runtime has moved
	// on to the reopened one) without rotating again.
	e.write(t, "b\n")
	res = e.gc.RotateLogs(ctx, []string{e.id}, policy)
	if res.Compressed != 1 || len(res.Rotated) != 0 || len(res.Errors) != 0 {
		t.Fatalf("compress pass: %+v", res)
	}
	if got := e.files(t); !slices.Equal(got, []string{"0.log", first + ".gz"}) {
		t.Errorf("files after compression: %v", got)
	}
	if got := gunzip(t, filepath.Join(filepath.Dir(e.log), first+".gz")); got != strings.Repeat("a", 100) {
		t.Errorf("compressed content = %q", got)
	}

	// More rotations keep at most MaxFiles files: the oldest go.
	for i := range 3 {
		e.clock.Step(time.Minute)
		e.write(t, strings.Repeat(string(rune('c'+i)), 100))
		if res := e.gc.RotateLogs(ctx, []string{e.id}, policy); len(res.Errors) != 0 {
			t.Fatal(res.Errors)
		}
	}
	got := e.files(t)
	if len(got) > policy.MaxFiles {
		t.Errorf("%d files, want at most %d: %v", len(got), policy.MaxFiles, got)
	}
	newest := "0.log." + baseTime.Add(3*time.Minute).Format(rotateTimestampFormat)
	prev := "0.log." + baseTime.Add(2*time.Minute).Format(rotateTimestampFormat) + ".gz"
	if want := []string{prev, newest}; !slices.Equal(got, want) {
		t.Errorf("files = %v, want %v (current file not yet written again)", got, want)
	}
}

func TestRotateLogsReopenFailsKeepsTheFile(t *testing.T) {
	e := newRotateEnv(t)
	e.write(t, strings.Repeat("a", 200))
	e.rs.InjectError("ReopenContainerLog", errors.New("container not running"))
	res := e.gc.RotateLogs(context.Background(), []string{e.id}, LogRotationPolicy{MaxSize: 100, MaxFiles: 5, Workers: 1})
	if len(res.Errors) != 1 || len(res.Rotated) != 0 {
		t.Fatalf("result %+v, want one error", res)
	}
	if got := e.files(t); !slices.Equal(got, []string{"0.log"}) {
		t.Errorf("files = %v, want the current file put back", got)
	}
}

func TestRotateLogsCleansInterruptedCompression(t *testing.T) {
	e := newRotateEnv(t)
	dir := filepath.Dir(e.log)
	for name, content := range map[string]string{
		"0.log.20260101-120000":        "done",
		"0.log.20260101-120000.gz":     "",
		"0.log.20260101-130000.gz.tmp": "partial",
		"0.log.20260101-140000":        "uncompressed",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o640); err != nil {
			t.Fatal(err)
		}
	}
	e.write(t, strings.Repeat("a", 200))
	res := e.gc.RotateLogs(context.Background(), []string{e.id}, LogRotationPolicy{MaxSize: 100, MaxFiles: 4, Workers: 1})
	if len(res.Errors) != 0 {
		t.Fatal(res.Errors)
	}
	want := []string{"0.log.20260101-120000.gz", "0.log.20260101-140000.gz", "0.log." + baseTime.Format(rotateTimestampFormat)}
	slices.Sort(want)
	if got := e.files(t); !slices.Equal(got, want) {
		t.Errorf("files = %v, want %v", got, want)
	}
}

func TestRotateLogsCompressesWhenTheContainerStops(t *testing.T) {
	e := newRotateEnv(t)
	ctx := context.Background()
	policy := LogRotationPolicy{MaxSize: 10, MaxFiles: 5, Workers: 1}
	e.write(t, strings.Repeat("a", 20))
	if res := e.gc.RotateLogs(ctx, []string{e.id}, policy); len(res.Rotated) != 1 {
		t.Fatalf("no rotation: %+v", res)
	}
	// The container is no longer running: its rotated file is compressed
	// and forgotten.
	res := e.gc.RotateLogs(ctx, nil, policy)
	if res.Compressed != 1 {
		t.Errorf("compressed %d, want 1", res.Compressed)
	}
	if n := len(e.gc.logs.pending); n != 0 {
		t.Errorf("%d pending files remembered", n)
	}
}
