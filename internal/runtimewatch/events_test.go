package runtimewatch

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeapi "k8s.io/cri-api/pkg/apis/testing"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/runtimewatch/runtimewatchtest"
)

// streamingRuntime is the cri-api fake with a container event stream:
// GetContainerEvents accepts the subscription (unless open is false),
// delivers events in order and ends with err, as a runtime's stream does.
type streamingRuntime struct {
	*fakeapi.FakeRuntimeService
	open   bool
	events []*runtimeapi.ContainerEventResponse
	err    error
}

func (r *streamingRuntime) GetContainerEvents(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, established func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
	if !r.open {
		return r.err
	}
	established(nil)
	for _, ev := range r.events {
		select {
		case ch <- ev:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return r.err
}

// eventFor is an event about container id in a sandbox with labels; nil
// labels make an event without the sandbox (removed already).
func eventFor(id string, labels map[string]string, at time.Time) *runtimeapi.ContainerEventResponse {
	ev := &runtimeapi.ContainerEventResponse{ContainerId: id, ContainerEventType: runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT, CreatedAt: at.UnixNano()}
	if labels != nil {
		ev.PodSandboxStatus = &runtimeapi.PodSandboxStatus{Id: "s-" + id, Labels: labels}
	}
	return ev
}

func TestWatchEvents(t *testing.T) {
	at := runtimewatchtest.BaseTime.Add(time.Minute)
	foreign := map[string]string{"io.kubernetes.pod.uid": "x"}
	tests := []struct {
		name    string
		rt      streamingRuntime
		want    []string // container IDs passed on
		opened  bool
		wantErr error  // errors.Is
		errText string // else a substring
	}{
		{
			name:    "berth's and sandbox-less events are passed on, foreign ones dropped",
			rt:      streamingRuntime{open: true, err: errors.New("connection reset"), events: []*runtimeapi.ContainerEventResponse{eventFor("a", runtimewatchtest.PodLabels("u", "p"), at), eventFor("f", foreign, at), eventFor("gone", nil, at)}},
			want:    []string{"a", "gone"},
			opened:  true,
			errText: "connection reset",
		},
		{
			name:    "containerd 1.6 answers Unimplemented on the first read",
			rt:      streamingRuntime{open: true, err: status.Error(codes.Unimplemented, "unknown method GetContainerEvents")},
			opened:  true,
			wantErr: ErrEventsUnsupported,
		},
		{
			name:    "a runtime that returns without a stream",
			rt:      streamingRuntime{},
			wantErr: ErrEventsUnsupported,
		},
		{
			name:    "a stream the runtime ends cleanly is a break",
			rt:      streamingRuntime{open: true},
			opened:  true,
			errText: "stream ended",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.rt.FakeRuntimeService = fakeapi.NewFakeRuntimeService()
			w := New(&tt.rt, Options{Clock: clocktesting.NewFakeClock(runtimewatchtest.BaseTime), PodLogsDir: t.TempDir()})
			var got []string
			opened := false
			err := w.WatchEvents(context.Background(), func() { opened = true }, func(ev ContainerEvent) {
				got = append(got, ev.ContainerID)
				if !ev.At.Equal(at) {
					t.Errorf("event at %v, want %v", ev.At, at)
				}
			})
			if !slices.Equal(got, tt.want) {
				t.Errorf("events passed on = %v, want %v", got, tt.want)
			}
			if opened != tt.opened {
				t.Errorf("opened = %v, want %v", opened, tt.opened)
			}
			switch {
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Errorf("err = %v, want %v", err, tt.wantErr)
				}
			case err == nil || errors.Is(err, ErrEventsUnsupported) || !strings.Contains(err.Error(), tt.errText):
				t.Errorf("err = %v, want one saying %q", err, tt.errText)
			}
		})
	}
}

// TestEventMakesRelistListSandboxes: a sandbox can die with no container
// changing state (its pause process killed); the relist an event leads to
// must list sandboxes afresh rather than reuse its last listing, or the
// death would wait for the safety net.
func TestEventMakesRelistListSandboxes(t *testing.T) {
	env := newCRITestEnv(t)
	runtimewatchtest.SetPods(env.rs, 2)
	ctx := context.Background()
	if _, err := env.w.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	env.calls()
	rt := &streamingRuntime{FakeRuntimeService: env.rs, open: true, err: errors.New("eof"),
		events: []*runtimeapi.ContainerEventResponse{eventFor("s-uid-0", runtimewatchtest.PodLabels("uid-0", "web-node"), runtimewatchtest.BaseTime)}}
	env.w.runtime = rt
	if err := env.w.WatchEvents(ctx, nil, func(ContainerEvent) {}); err == nil {
		t.Fatal("stream ended without an error")
	}
	env.calls()
	if _, err := env.w.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := env.calls(), []string{"ListContainers", "ListPodSandbox"}; !slices.Equal(got, want) {
		t.Errorf("relist after an event: calls = %v, want %v", got, want)
	}
	if _, err := env.w.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if got, want := env.calls(), []string{"ListContainers"}; !slices.Equal(got, want) {
		t.Errorf("next relist: calls = %v, want %v", got, want)
	}
}
