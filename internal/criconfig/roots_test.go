package criconfig

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/podpath/podpathtest"
)

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

// TestHostilePodFieldsStayInsideRoots feeds every function that builds a
// path from a pod field with fields that climb out of the roots, as a pod
// that got past validation (or a runtime's labels) could carry them:
// each refuses, and nothing outside the roots is created, changed or
// removed. GC's removal of the same pod's directories has its own test
// (gc's TestRemovePodDirsStaysInsideRoots) and so has the runtime
// manager's RemovePod (kuberuntime's TestRemovePodStaysInsideRoots).
func TestHostilePodFieldsStayInsideRoots(t *testing.T) {
	pod := func(ns, name, uid string) *v1.Pod {
		p := ccPod()
		p.Namespace, p.Name, p.UID = ns, name, types.UID(uid)
		return p
	}
	tests := []struct {
		name      string
		pod       *v1.Pod
		container string
		volume    string
	}{
		{name: "uid", pod: pod("prod", "web", "../../victim"), container: "app", volume: "data"},
		{name: "uid with a newline", pod: pod("prod", "web", "a\n../../../victim"), container: "app", volume: "data"},
		{name: "namespace", pod: pod("../victim", "web", "u"), container: "app", volume: "data"},
		{name: "name", pod: pod("prod", "../../victim", "u"), container: "app", volume: "data"},
		{name: "container name", pod: pod("prod", "web", "u"), container: "../../../../victim", volume: "data"},
		{name: "volume name", pod: pod("prod", "web", "u"), container: "app", volume: "../../../../../victim"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := podpathtest.NewVictimBed(t)
			m, _ := newCfgBuilder(t, Options{RootDir: b.Root, PodLogsDir: b.Logs})
			p := tt.pod
			p.Spec.Containers[0].Name = tt.container
			badUID := p.UID != "u"
			badLogDir := badUID || p.Namespace != "prod" || p.Name != "web"
			if _, err := m.SandboxConfig(p, 0); err == nil && badLogDir {
				t.Error("SandboxConfig accepted the pod")
			}
			if _, err := m.vols.EnsureHostsFile(p, []string{"10.88.0.2"}, "web", ""); err == nil && badUID {
				t.Error("EnsureHostsFile accepted the pod")
			}
			if _, _, err := m.vols.VolumePath(p, &v1.Volume{Name: tt.volume, VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}); err == nil && (badUID || tt.volume != "data") {
				t.Error("VolumePath accepted the emptyDir")
			}
			if _, err := m.vols.NewTerminationMessageFile(p, tt.container); err == nil && (badUID || tt.container != "app") {
				t.Error("NewTerminationMessageFile accepted the pod")
			}
			if _, err := m.ContainerConfig(context.Background(), p, &p.Spec.Containers[0], 0, nil, "busybox"); err == nil && tt.container != "app" {
				t.Error("ContainerConfig accepted the container")
			}
			m.NextLogIndex(p, tt.container)
			if err := m.CleanupPodDir(p.UID); err == nil && badUID {
				t.Error("CleanupPodDir accepted the UID")
			}
			b.Check(t)
		})
	}
}

// TestPlantedLinksAreNotFollowed plants symbolic links to a victim
// directory where berth creates and removes a pod's files: as the pod
// directory's subdirectories, inside an emptyDir (where a container can
// create them), and in the pod's log directory. Creating refuses to go
// through them; removing the pod directory unlinks them and leaves the
// victim alone (the runtime manager's RemovePod test covers the log
// directory).
func TestPlantedLinksAreNotFollowed(t *testing.T) {
	b := podpathtest.NewVictimBed(t)
	m, _ := newCfgBuilder(t, Options{RootDir: b.Root, PodLogsDir: b.Logs})
	pod := ccPod()
	podDir := mustPath(t)(m.PodDir(pod.UID))
	data := filepath.Join(podDir, "volumes", "kubernetes.io~empty-dir", "data")
	logDir := mustPath(t)(m.podLogDir(pod))
	for _, d := range []string{data, logDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	for _, link := range []string{
		filepath.Join(podDir, "containers"),
		filepath.Join(data, "escape"),
		filepath.Join(logDir, "app"),
	} {
		if err := os.Symlink(b.Victim, link); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.vols.NewTerminationMessageFile(pod, "app"); err == nil {
		t.Error("NewTerminationMessageFile went through a link")
	}
	if err := os.Remove(filepath.Join(data, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(b.Victim, filepath.Join(filepath.Dir(data), "other")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := m.vols.VolumePath(pod, &v1.Volume{Name: "other", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}); err == nil {
		t.Error("VolumePath accepted a link as an emptyDir's directory")
	}
	if err := os.Symlink(b.Victim, filepath.Join(data, "escape")); err != nil {
		t.Fatal(err)
	}
	b.Check(t)

	if err := m.CleanupPodDir(pod.UID); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(podDir); !os.IsNotExist(err) {
		t.Errorf("%s left behind: %v", podDir, err)
	}
	b.Check(t)
}
