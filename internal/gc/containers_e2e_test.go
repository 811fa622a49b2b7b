//go:build e2e

package gc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/podplan"
)

// TestE2EGarbageCollect runs GC passes on the real containerd: a pod with
// an old stopped sandbox and two dead runs of one container loses the
// older run and the old sandbox; once deleted it loses everything, its
// sandbox as soon as it is stopped, and its log directory.
func TestE2EGarbageCollect(t *testing.T) {
	env := newE2EEnv(t)
	m := env.m
	ctx := context.Background()
	uid := types.UID(fmt.Sprintf("gc-%d", time.Now().UnixNano()))
	name := "gc-e2e"
	logDir := filepath.Join(env.logs, "default_"+name+"_"+string(uid))
	labels := map[string]string{criconfig.LabelPodName: name, criconfig.LabelPodNamespace: "default", criconfig.LabelPodUID: string(uid), criconfig.LabelManaged: "true"}
	sandbox := func(attempt uint32) (string, *runtimeapi.PodSandboxConfig) {
		t.Helper()
		cfg := &runtimeapi.PodSandboxConfig{
			Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: string(uid), Attempt: attempt},
			LogDirectory: logDir,
			Labels:       labels,
			Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_CONTAINER},
			}},
		}
		id, err := env.rs.RunPodSandbox(ctx, cfg, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = env.rs.StopPodSandbox(context.Background(), id)
			_ = env.rs.RemovePodSandbox(context.Background(), id)
		})
		return id, cfg
	}
	old, _ := sandbox(0)
	if err := env.rs.StopPodSandbox(ctx, old); err != nil {
		t.Fatal(err)
	}
	current, cfg := sandbox(1)
	var runs []string
	for i := range 2 {
		cl := map[string]string{criconfig.LabelContainerName: "app"}
		for k, v := range labels {
			cl[k] = v
		}
		id, err := env.rs.CreateContainer(ctx, current, &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "app", Attempt: uint32(i)},
			Image:    &runtimeapi.ImageSpec{Image: testBed.BusyboxImage, UserSpecifiedImage: testBed.BusyboxImage},
			// The sandbox's namespaces, as the kubelet passes them: CRI-O
			// refuses a container whose PID namespace differs.
			Linux:       &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: cfg.Linux.SecurityContext.NamespaceOptions}},
			Command:     []string{"sh", "-c", "echo run; exit 1"},
			LogPath:     fmt.Sprintf("app/%d.log", i),
			Labels:      cl,
			Annotations: map[string]string{criconfig.AnnotationContainerRestartCount: fmt.Sprint(i)},
		}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := env.rs.StartContainer(ctx, id); err != nil {
			t.Fatal(err)
		}
		runs = append(runs, id)
		waitPodStatus(ctx, t, m, uid, "run exited", func(s *podplan.PodStatus) bool {
			c := s.FindContainer("app")
			return c != nil && c.ID == id && c.State == podplan.ContainerStateExited
		})
	}

	pass := func(deleted bool) []string {
		t.Helper()
		snap, err := m.Relist(ctx)
		if err != nil {
			t.Fatal(err)
		}
		res := env.gc.GarbageCollect(ctx, Input{
			Pods: snap, Policy: DefaultPolicy, AllSourcesReady: true, Now: time.Now(),
			PodDeleted: func(u types.UID) bool { return deleted && u == uid },
		})
		if len(res.Errors) > 0 {
			t.Fatal(res.Errors)
		}
		var got []string
		for _, r := range res.Removed {
			got = append(got, r.Kind+":"+filepath.Base(r.ID))
		}
		return got
	}
	if got, want := pass(false), []string{"container:" + runs[0], "sandbox:" + old}; !slices.Equal(got, want) {
		t.Errorf("pass over the live pod removed %v, want %v", got, want)
	}
	if _, err := os.Stat(filepath.Join(logDir, "app", "0.log")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("log of the removed run: %v", err)
	}
	if _, err := os.Stat(filepath.Join(logDir, "app", "1.log")); err != nil {
		t.Errorf("log of the kept run: %v", err)
	}
	// Deleted: the last run goes; the sandbox is still ready, so it stays
	// until stopped, and the directories with it.
	if got, want := pass(true), []string{"container:" + runs[1]}; !slices.Equal(got, want) {
		t.Errorf("pass over the deleted pod removed %v, want %v", got, want)
	}
	if err := env.rs.StopPodSandbox(ctx, current); err != nil {
		t.Fatal(err)
	}
	// containerd 2.x may list the sandbox as ready for a moment after
	// StopPodSandbox returns; the pass is over a sandbox seen stopped.
	waitPodStatus(ctx, t, m, uid, "sandbox stopped", func(s *podplan.PodStatus) bool {
		for _, sb := range s.Sandboxes {
			if sb.ID == current {
				return sb.State != podplan.SandboxStateReady
			}
		}
		return false
	})
	if got, want := pass(true), []string{"sandbox:" + current, "pod_log_dir:" + filepath.Base(logDir)}; !slices.Equal(got, want) {
		t.Errorf("pass over the stopped deleted pod removed %v, want %v", got, want)
	}
	if snap, err := m.Relist(ctx); err != nil || snap[uid] != nil {
		t.Errorf("the runtime still has %+v (%v)", snap[uid], err)
	}
}
