package kuberuntime

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeri "k8s.io/cri-api/pkg/apis/testing"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/podpath/podpathtest"
	"github.com/berth-agent/berth/internal/podplan"
	"github.com/berth-agent/berth/internal/podresources"
)

// newCfgManager is a Manager over the cri-api fakes with its state and log
// directories in the test's temp dir and fixed machine figures: 4 CPUs,
// 8 GiB, 100 GiB of disk, berth at oom_score_adj -999.
func newCfgManager(t *testing.T, opts Options) (*Manager, *fakeri.FakeRuntimeService, *fakeri.FakeImageService) {
	t.Helper()
	if opts.RootDir == "" {
		opts.RootDir = t.TempDir()
	}
	if opts.PodLogsDir == "" {
		opts.PodLogsDir = t.TempDir()
	}
	if opts.HostIP == "" {
		opts.HostIP = "192.168.1.10"
	}
	rt, img := fakeri.NewFakeRuntimeService(), fakeri.NewFakeImageService()
	m := NewManager(rt, img, opts)
	m.config = criconfig.New(img, m.configOptions(func() (podresources.NodeFacts, error) {
		return podresources.NodeFacts{
			Allocatable: v1.ResourceList{
				v1.ResourceCPU:              resource.MustParse("4"),
				v1.ResourceMemory:           resource.MustParse("8Gi"),
				v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
			},
			MinOOMScoreAdj: -999,
		}, nil
	}))
	return m, rt, img
}

func sbPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-node1", Namespace: "prod", UID: "uid-7",
			Labels:      map[string]string{"app": "web", criconfig.LabelManaged: "false"},
			Annotations: map[string]string{"kubernetes.io/config.source": "file"},
		},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "app", Image: "busybox"}},
		},
	}
}

func mountAt(cfg *runtimeapi.ContainerConfig, path string) *runtimeapi.Mount {
	for _, m := range cfg.Mounts {
		if m.ContainerPath == path {
			return m
		}
	}
	return nil
}

// mustPath fails the test on a path error: test pods have valid names.
func mustPath(t *testing.T) func(string, error) string {
	return func(p string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
}

func TestNextRestartCount(t *testing.T) {
	m, _, _ := newCfgManager(t, Options{})
	pod := sbPod()
	st := &podplan.PodStatus{Containers: []*podplan.ContainerStatus{{Name: "app", RestartCount: 4}}}
	if got := m.nextRestartCount(pod, "app", st); got != 5 {
		t.Errorf("with a status: %d, want 5", got)
	}
	if got := m.nextRestartCount(pod, "app", &podplan.PodStatus{}); got != 0 {
		t.Errorf("first start: %d, want 0", got)
	}
}

// TestRemovePodStaysInsideRoots feeds RemovePod pods whose fields climb
// out of the roots, as a pod that got past validation (or a runtime's
// labels) could carry them, and a log directory where a link to a victim
// was planted: nothing outside the roots is created, changed or removed.
func TestRemovePodStaysInsideRoots(t *testing.T) {
	for _, tt := range []struct{ name, ns, pod, uid string }{
		{name: "uid", ns: "prod", pod: "web", uid: "../../victim"},
		{name: "uid with a newline", ns: "prod", pod: "web", uid: "a\n../../../victim"},
		{name: "namespace", ns: "../victim", pod: "web", uid: "u"},
		{name: "name", ns: "prod", pod: "../../victim", uid: "u"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := podpathtest.NewVictimBed(t)
			m, _, _ := newCfgManager(t, Options{RootDir: b.Root, PodLogsDir: b.Logs})
			if err := m.RemovePod(context.Background(), &podplan.PodStatus{UID: types.UID(tt.uid), Name: tt.pod, Namespace: tt.ns}); err != nil {
				t.Errorf("RemovePod: %v", err)
			}
			b.Check(t)
		})
	}
	t.Run("planted link", func(t *testing.T) {
		b := podpathtest.NewVictimBed(t)
		m, _, _ := newCfgManager(t, Options{RootDir: b.Root, PodLogsDir: b.Logs})
		pod := sbPod()
		st := &podplan.PodStatus{UID: pod.UID, Name: pod.Name, Namespace: pod.Namespace}
		logDir := m.PodLogDir(st)
		if err := os.MkdirAll(logDir, 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(b.Victim, filepath.Join(logDir, "app")); err != nil {
			t.Fatal(err)
		}
		if err := m.RemovePod(context.Background(), st); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(logDir); !os.IsNotExist(err) {
			t.Errorf("%s left behind: %v", logDir, err)
		}
		b.Check(t)
	})
}

// field is an env var source reading a field of the pod.
func field(path string) *v1.EnvVarSource {
	return &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}
}
