package volumes

import (
	"os"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-agent/berth/internal/podresources"
)

// newHost is a Host in temporary directories on a machine of 8 GiB,
// unless opts says otherwise.
func newHost(t *testing.T, opts Options) *Host {
	t.Helper()
	if opts.RootDir == "" {
		opts.RootDir = t.TempDir()
	}
	if opts.PodLogsDir == "" {
		opts.PodLogsDir = t.TempDir()
	}
	if opts.NodeFacts == nil {
		opts.NodeFacts = func() (podresources.NodeFacts, error) {
			return podresources.NodeFacts{Allocatable: v1.ResourceList{v1.ResourceMemory: resource.MustParse("8Gi")}}, nil
		}
	}
	return New(opts)
}

// testPod is a pod with one container, app.
func testPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "prod", UID: "uid-5"},
		Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "app", Image: "busybox:1.36"}}},
	}
}

// expectBind checks that hostPath ends in suffix and is a bind mount of
// want.
func expectBind(t *testing.T, hostPath, suffix, want string) {
	t.Helper()
	if !strings.HasSuffix(hostPath, suffix) {
		t.Errorf("host path = %q, want it to end in %s", hostPath, suffix)
	}
	got, err := os.Stat(hostPath)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(want)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(got, fi) {
		t.Errorf("%s is not a bind mount of %s", hostPath, want)
	}
}
