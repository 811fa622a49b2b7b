package doctor

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	apitest "k8s.io/cri-api/pkg/apis/testing"
	"k8s.io/utils/clock"
)

// fakeRuntime is the CRI runtime service of the unit tests: the cri-api
// fake with the answers doctor reads made settable. Fields are set before
// the check runs and only read after.
type fakeRuntime struct {
	*apitest.FakeRuntimeService
	version   *runtimeapi.VersionResponse
	status    *runtimeapi.StatusResponse
	statusErr error
	// events stands for GetContainerEvents; nil answers Unimplemented at
	// once, as containerd 1.6 does.
	events func(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, opened func(runtimeapi.RuntimeService_GetContainerEventsClient)) error
	// runtimeConfig stands for RuntimeConfig; nil answers Unimplemented,
	// as containerd 1.x does, or runtimeConfigErr when that is set.
	runtimeConfig    *runtimeapi.RuntimeConfigResponse
	runtimeConfigErr error
}

var errUnimplemented = status.Error(codes.Unimplemented, "unknown method")

// newFakeRuntime is a ready containerd 1.6 with a network, reporting
// config as its CRI configuration (nil: none).
func newFakeRuntime(config map[string]any) *fakeRuntime {
	f := &fakeRuntime{
		FakeRuntimeService: apitest.NewFakeRuntimeService(),
		version:            &runtimeapi.VersionResponse{RuntimeName: "containerd", RuntimeVersion: "1.6.20~ds1", RuntimeApiVersion: "v1"},
		status: &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{Conditions: []*runtimeapi.RuntimeCondition{
			{Type: runtimeapi.RuntimeReady, Status: true},
			{Type: runtimeapi.NetworkReady, Status: true},
		}}},
	}
	if config != nil {
		raw, err := json.Marshal(config)
		if err != nil {
			panic(err)
		}
		f.status.Info = map[string]string{"config": string(raw)}
	}
	return f
}

func (f *fakeRuntime) Version(context.Context, string) (*runtimeapi.VersionResponse, error) {
	return f.version, nil
}

func (f *fakeRuntime) Status(context.Context, bool) (*runtimeapi.StatusResponse, error) {
	return f.status, f.statusErr
}

func (f *fakeRuntime) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, opened func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	if f.events == nil {
		return errUnimplemented
	}
	return f.events(ctx, ch, opened)
}

func (f *fakeRuntime) RuntimeConfig(context.Context) (*runtimeapi.RuntimeConfigResponse, error) {
	switch {
	case f.runtimeConfigErr != nil:
		return nil, f.runtimeConfigErr
	case f.runtimeConfig == nil:
		return nil, errUnimplemented
	}
	return f.runtimeConfig, nil
}

// fakeImages is the image service of the unit tests, with ImageFsInfo
// answering fsInfo.
type fakeImages struct {
	*apitest.FakeImageService
	fsInfo *runtimeapi.ImageFsInfoResponse
}

func (f *fakeImages) ImageFsInfo(context.Context) (*runtimeapi.ImageFsInfoResponse, error) {
	return f.fsInfo, nil
}

// fakeFS answers statfs for the paths it has, ENOENT for others.
type fakeFS map[string]unix.Statfs_t

func (f fakeFS) statfs(path string, st *unix.Statfs_t) error {
	s, ok := f[path]
	if !ok {
		return syscall.ENOENT
	}
	*st = s
	return nil
}

// fsWith is a filesystem of 1000 blocks of 4 KiB and 1000 inodes with
// availPct and inodePct percent of them free.
func fsWith(typ int64, availPct, inodePct uint64) unix.Statfs_t {
	st := unix.Statfs_t{Bsize: 4096, Blocks: 1000, Bavail: availPct * 10, Files: 1000, Ffree: inodePct * 10}
	st.Type = asType(st.Type, typ)
	return st
}

// asType is v as the type of Statfs_t.Type, int32 on 32-bit ARM and int64
// elsewhere.
func asType[T ~int32 | ~int64](_ T, v int64) T { return T(v) }

// testEnv is an env over the fakes, with the real clock (tests that time
// run in a synctest bubble).
func testEnv(t *testing.T, rt *fakeRuntime, img *fakeImages, opts Options) *env {
	t.Helper()
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	opts.RuntimeEndpoint = "unix:///run/fake.sock"
	opts = opts.withDefaults()
	if img == nil {
		img = &fakeImages{FakeImageService: apitest.NewFakeImageService()}
	}
	e := &env{opts: opts, rs: rt, is: img, statfs: fakeFS{}.statfs,
		timeSync: func(context.Context) timeSyncState { return timeSyncState{synced: true, source: "test"} }}
	if rt == nil {
		e.rs, e.dialErr = nil, status.Error(codes.Unavailable, "connection refused")
	}
	return e
}

// askedRuntime is the runtimeInfo of e's runtime.
func askedRuntime(t *testing.T, e *env) *runtimeInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return e.askRuntime(ctx)
}

// checkResult fails t unless r has status want and a message holding
// every one of msg.
func checkResult(t *testing.T, r Result, want Status, msg ...string) {
	t.Helper()
	if r.Status != want {
		t.Errorf("%s: status %s, want %s (message %q)", r.Check, r.Status, want, r.Message)
	}
	for _, m := range msg {
		if !contains(r.Message, m) {
			t.Errorf("%s: message %q lacks %q", r.Check, r.Message, m)
		}
	}
	if r.Status != OK && r.Fix == "" {
		t.Errorf("%s: %s without a fix (message %q)", r.Check, r.Status, r.Message)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func replaceAll(s, old, new string) string { return strings.ReplaceAll(s, old, new) }
