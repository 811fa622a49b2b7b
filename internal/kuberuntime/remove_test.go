package kuberuntime

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	fakeapi "k8s.io/cri-api/pkg/apis/testing"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/podplan"
	"github.com/berth-agent/berth/internal/runtimewatch/runtimewatchtest"
)

func TestRemovePod(t *testing.T) {
	env := newCRITestEnv(t)
	runtimewatchtest.SetPods(env.rs, 2)
	logDir := filepath.Join(env.m.opts.PodLogsDir, "default_web-node_uid-0")
	logFile := filepath.Join(logDir, "app", "0.log")
	if err := os.MkdirAll(filepath.Dir(logFile), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(logFile, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env.rs.Lock()
	env.rs.Containers["c-uid-0"].LogPath = logFile
	env.rs.Unlock()
	ctx := context.Background()
	if _, err := env.m.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := env.m.PodStatus(ctx, "uid-0")
	if err != nil {
		t.Fatal(err)
	}
	env.calls()

	if err := env.m.RemovePod(ctx, st); err != nil {
		t.Fatal(err)
	}
	if calls, want := env.calls(), []string{"RemoveContainer", "RemovePodSandbox"}; !slices.Equal(calls, want) {
		t.Errorf("calls = %v, want %v (cached ownership needs no status call)", calls, want)
	}
	if _, err := os.Stat(logDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("pod log directory left behind: %v", err)
	}
	_, _, cachedC := env.m.ContainerFiles("c-uid-0")
	if cachedC || env.m.KnowsSandbox("s-uid-0") {
		t.Error("removed objects are still cached")
	}
	pods, err := env.m.Relist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pods["uid-0"]; ok || len(pods) != 1 {
		t.Errorf("after RemovePod the runtime still has %v", pods)
	}

	// Idempotent: the same status again, everything already gone.
	env.rs.InjectError("ContainerStatus", status.Error(codes.NotFound, "gone"))
	env.rs.InjectError("RemovePodSandbox", status.Error(codes.NotFound, "gone"))
	if err := env.m.RemovePod(ctx, st); err != nil {
		t.Errorf("second RemovePod: %v", err)
	}
}

func TestRemovePodLeavesForeignAndKeepsLogsOnFailure(t *testing.T) {
	env := newCRITestEnv(t)
	runtimewatchtest.SetPods(env.rs, 1)
	logDir := filepath.Join(env.m.opts.PodLogsDir, "default_web-node_uid-0")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := env.m.PodStatus(ctx, "uid-0")
	if err != nil {
		t.Fatal(err)
	}
	st.Containers = append(st.Containers, &podplan.ContainerStatus{ID: "c-foreign", Labels: map[string]string{criconfig.LabelPodUID: "uid-0"}})
	st.Sandboxes = append(st.Sandboxes, &podplan.SandboxStatus{ID: "s-foreign"})
	env.calls()
	env.rs.InjectError("RemovePodSandbox", status.Error(codes.Internal, "busy"))

	if err := env.m.RemovePod(ctx, st); err == nil {
		t.Fatal("RemovePod hid a failure")
	}
	calls := env.calls()
	if want := []string{"RemoveContainer", "RemovePodSandbox"}; !slices.Equal(calls, want) {
		t.Errorf("calls = %v, want %v: foreign objects untouched", calls, want)
	}
	if _, err := os.Stat(logDir); err != nil {
		t.Errorf("logs removed although the pod is not gone: %v", err)
	}
}

func TestRemoveContainer(t *testing.T) {
	tests := []struct {
		name        string
		managed     bool
		statusErr   error
		wantErr     bool
		wantCalls   []string
		wantLogGone bool
		// logOutside puts the log file the runtime reports outside
		// PodLogsDir: a hostile runtime naming a file berth must not remove.
		logOutside bool
	}{
		{name: "owned, not yet relisted", managed: true, wantCalls: []string{"ContainerStatus", "RemoveContainer"}, wantLogGone: true},
		{name: "log path outside the logs directory left alone", managed: true, logOutside: true, wantCalls: []string{"ContainerStatus", "RemoveContainer"}},
		{name: "foreign refused", managed: false, wantErr: true, wantCalls: []string{"ContainerStatus"}},
		{name: "already gone", managed: true, statusErr: status.Error(codes.NotFound, "gone"), wantCalls: []string{"ContainerStatus"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := newCRITestEnv(t)
			logFile := filepath.Join(env.m.opts.PodLogsDir, "default_web-node_uid-1", "app", "0.log")
			reported := logFile
			if tt.logOutside {
				logFile = filepath.Join(t.TempDir(), "victim")
				reported = filepath.Join(env.m.opts.PodLogsDir, "..", filepath.Base(filepath.Dir(logFile)), "victim")
			}
			if err := os.MkdirAll(filepath.Dir(logFile), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(logFile, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			fc := runtimewatchtest.FakeContainer("c1", "s1", "uid-1", 0)
			fc.LogPath = reported
			if !tt.managed {
				delete(fc.Labels, criconfig.LabelManaged)
			}
			env.rs.SetFakeContainers([]*fakeapi.FakeContainer{fc})
			if tt.statusErr != nil {
				env.rs.InjectError("ContainerStatus", tt.statusErr)
			}
			err := env.m.RemoveContainer(context.Background(), "c1")
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if calls := env.calls(); !slices.Equal(calls, tt.wantCalls) {
				t.Errorf("calls = %v, want %v", calls, tt.wantCalls)
			}
			_, statErr := os.Stat(logFile)
			if gone := errors.Is(statErr, fs.ErrNotExist); gone != tt.wantLogGone {
				t.Errorf("log file gone = %v, want %v", gone, tt.wantLogGone)
			}
		})
	}
}
