package doctor

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestCheckEvents: a stream that stays open for the grace period, or
// delivers an event, is OK; Unimplemented (containerd 1.6), a stream that
// breaks, or one that never opens is a WARN. It runs in a synctest bubble,
// so the grace period and the timeout pass in fake time, and the bubble
// proves the stream's goroutine ends with the check.
func TestCheckEvents(t *testing.T) {
	openAndWait := func(ctx context.Context, _ chan *runtimeapi.ContainerEventResponse, opened func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
		opened(nil)
		<-ctx.Done()
		return ctx.Err()
	}
	tests := []struct {
		name    string
		events  func(context.Context, chan *runtimeapi.ContainerEventResponse, func(runtimeapi.RuntimeService_GetContainerEventsClient)) error
		version string // the runtime's release, if not 1.6.20~ds1
		down    bool
		want    Status
		wantIn  string
	}{
		{"unimplemented", nil, "", false, Warn, "streams no container events: berth relists its containers every second"},
		{"open past the grace period", openAndWait, "", false, OK, "containerd 1.6.20~ds1 streams container events"},
		{"an event before the grace period", func(ctx context.Context, ch chan *runtimeapi.ContainerEventResponse, opened func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
			opened(nil)
			select {
			case ch <- &runtimeapi.ContainerEventResponse{ContainerId: "c1"}:
			case <-ctx.Done():
			}
			<-ctx.Done()
			return ctx.Err()
		}, "", false, OK, "streams container events"},
		{"unimplemented after opening", func(_ context.Context, _ chan *runtimeapi.ContainerEventResponse, opened func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
			opened(nil)
			return errUnimplemented
		}, "", false, Warn, "streams no container events"},
		{"broken stream", func(_ context.Context, _ chan *runtimeapi.ContainerEventResponse, opened func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
			opened(nil)
			return errors.New("transport is closing")
		}, "", false, Warn, "container event stream failed (transport is closing)"},
		{"never opens", func(ctx context.Context, _ chan *runtimeapi.ContainerEventResponse, _ func(runtimeapi.RuntimeService_GetContainerEventsClient)) error {
			<-ctx.Done()
			return ctx.Err()
		}, "", false, Warn, "did not open its container event stream in time"},
		{"runtime down", nil, "", true, Warn, "not checked"},
		{"containerd 1.7 by its release, no stream opened", nil, "v1.7.27", false, OK, "containerd v1.7.27 streams container events (known by its release"},
		{"containerd 2 opens the stream", openAndWait, "v2.1.9", false, OK, "containerd v2.1.9 streams container events"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var rt *fakeRuntime
				if !tt.down {
					rt = newFakeRuntime(nil)
					rt.events = tt.events
					if tt.version != "" {
						rt.version.RuntimeVersion = tt.version
					}
				}
				e := testEnv(t, rt, nil, Options{})
				checkResult(t, e.checkEvents(t.Context(), askedRuntime(t, e)), tt.want, tt.wantIn)
			})
		})
	}
}

// TestReleaseOf reads the releases runtimes report.
func TestReleaseOf(t *testing.T) {
	tests := []struct {
		version      string
		major, minor int
		ok           bool
	}{
		{"1.6.20~ds1", 1, 6, true},
		{"v1.7.27", 1, 7, true},
		{"v2.1.9", 2, 1, true},
		{"1.31.0-rc.1", 1, 31, true},
		{"1.7-beta", 1, 7, true},
		{"devel", 0, 0, false},
		{"", 0, 0, false},
	}
	for _, tt := range tests {
		major, minor, ok := releaseOf(tt.version)
		if ok != tt.ok || ok && (major != tt.major || minor != tt.minor) {
			t.Errorf("releaseOf(%q) = %d, %d, %v; want %d, %d, %v", tt.version, major, minor, ok, tt.major, tt.minor, tt.ok)
		}
	}
}
