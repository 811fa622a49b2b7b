package volumes

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
	m := newHost(t, Options{})
	pod := testPod()
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
	m := newHost(t, Options{})
	pod := testPod()
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
	if st.Type != unix.TMPFS_MAGIC || int64(st.Blocks)*int64(st.Bsize) != 8<<20 {
		t.Errorf("statfs type %#x size %d, want tmpfs of 8Mi", st.Type, int64(st.Blocks)*int64(st.Bsize))
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
	m := newHost(t, Options{}) // 8Gi of memory
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
