package criconfig

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/berth-agent/berth/internal/podpath/podpathtest"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
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

func TestCleanupPodDirIdempotent(t *testing.T) {
	m, _ := newCfgBuilder(t, Options{})
	pod := ccPod()
	dir := mustPath(t)(m.emptyDirPath(pod.UID, "cache"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := m.CleanupPodDir(pod.UID); err != nil {
			t.Fatalf("cleanup %d: %v", i+1, err)
		}
	}
	if _, err := os.Stat(mustPath(t)(m.PodDir(pod.UID))); !os.IsNotExist(err) {
		t.Errorf("pod directory still there: %v", err)
	}
	if err := m.CleanupPodDir(""); err == nil {
		t.Errorf("cleanup of an empty UID succeeded; it must never remove RootDir/pods")
	}
}

// TestMemoryEmptyDir mounts a real tmpfs, so it needs root (CAP_SYS_ADMIN).
func TestMemoryEmptyDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting tmpfs needs root")
	}
	m, _ := newCfgBuilder(t, Options{})
	pod := ccPod()
	limit := resource.MustParse("8Mi")
	ed := &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: &limit}
	dir, err := m.ensureEmptyDir(pod, "shm", ed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unmount(dir) })
	// A second container mounting the volume must not stack a second tmpfs.
	if _, err := m.ensureEmptyDir(pod, "shm", ed); err != nil {
		t.Fatal(err)
	}
	mps, err := mountPointsUnder(mustPath(t)(m.PodDir(pod.UID)))
	if err != nil {
		t.Fatal(err)
	}
	if len(mps) != 1 || mps[0] != dir {
		t.Fatalf("mounts under the pod directory = %v, want one tmpfs at %s", mps, dir)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Type != unix.TMPFS_MAGIC || int64(st.Blocks)*st.Bsize != 8<<20 {
		t.Errorf("statfs type %#x size %d, want tmpfs of 8Mi", st.Type, int64(st.Blocks)*st.Bsize)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o777 {
		t.Errorf("tmpfs root: %v, %v", fi, err)
	}
	if err := m.CleanupPodDir(pod.UID); err != nil {
		t.Fatal(err)
	}
	if mps, _ := mountPointsUnder(mustPath(t)(m.PodDir(pod.UID))); len(mps) != 0 {
		t.Errorf("still mounted after cleanup: %v", mps)
	}
	if _, err := os.Stat(mustPath(t)(m.PodDir(pod.UID))); !os.IsNotExist(err) {
		t.Errorf("pod directory still there: %v", err)
	}
}

func TestUnescapeMountPath(t *testing.T) {
	tests := map[string]string{
		`/plain`:            "/plain",
		`/with\040space`:    "/with space",
		`/tab\011and\134bs`: "/tab\tand\\bs",
		`/bad\09`:           `/bad\09`,
		`/end\04`:           `/end\04`,
	}
	for in, want := range tests {
		if got := unescapeMountPath(in); got != want {
			t.Errorf("unescapeMountPath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMemoryVolumeSize(t *testing.T) {
	m, _ := newCfgBuilder(t, Options{}) // 8Gi of memory
	q := resource.MustParse
	limited := func(mem string) v1.Container {
		return v1.Container{Resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceMemory: q(mem)}}}
	}
	tests := []struct {
		name       string
		containers []v1.Container
		sizeLimit  string
		want       int64
	}{
		{"no limits: the node's memory", []v1.Container{{}}, "", 8 << 30},
		{"sizeLimit", []v1.Container{{}}, "64Mi", 64 << 20},
		{"pod limit", []v1.Container{limited("100Mi"), limited("28Mi")}, "", 128 << 20},
		{"one unlimited container: the node's memory", []v1.Container{limited("100Mi"), {}}, "", 8 << 30},
		{"sizeLimit above the pod limit", []v1.Container{limited("100Mi")}, "1Gi", 100 << 20},
		{"sizeLimit below the pod limit", []v1.Container{limited("100Mi")}, "10Mi", 10 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{Containers: tt.containers}}
			ed := &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory}
			if tt.sizeLimit != "" {
				l := q(tt.sizeLimit)
				ed.SizeLimit = &l
			}
			got, err := m.memoryVolumeSize(pod, ed)
			if err != nil || got != tt.want {
				t.Errorf("size = %d, %v; want %d", got, err, tt.want)
			}
		})
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
			if _, err := m.ensureHostsFile(p, []string{"10.88.0.2"}); err == nil && badUID {
				t.Error("ensureHostsFile accepted the pod")
			}
			if _, err := m.ensureEmptyDir(p, tt.volume, &v1.EmptyDirVolumeSource{}); err == nil && (badUID || tt.volume != "data") {
				t.Error("ensureEmptyDir accepted the pod")
			}
			if _, err := m.newTerminationMessageFile(p, tt.container); err == nil && (badUID || tt.container != "app") {
				t.Error("newTerminationMessageFile accepted the pod")
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
	data := mustPath(t)(m.emptyDirPath(pod.UID, "data"))
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
	if _, err := m.newTerminationMessageFile(pod, "app"); err == nil {
		t.Error("newTerminationMessageFile went through a link")
	}
	if err := os.Remove(filepath.Join(podDir, "volumes", emptyDirPluginDir, "data", "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(b.Victim, filepath.Join(podDir, "volumes", emptyDirPluginDir, "other")); err != nil {
		t.Fatal(err)
	}
	if _, err := m.ensureEmptyDir(pod, "other", &v1.EmptyDirVolumeSource{}); err == nil {
		t.Error("ensureEmptyDir accepted a link as the volume's directory")
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
