package kuberuntime

import (
	"testing"
	"time"

	apitest "k8s.io/cri-api/pkg/apis/testing"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestForgetStaleBackoffs(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	m := NewManager(apitest.NewFakeRuntimeService(), apitest.NewFakeImageService(), Options{
		Clock: clk, CrashLoopBackoffInitial: time.Second, CrashLoopBackoffMax: 2 * time.Second,
		ImagePullBackoffInitial: time.Second, ImagePullBackoffMax: 4 * time.Second,
	})
	m.crashBackoff.Next("uid/app")
	m.pullBackoff.Next("busybox:1.36")
	clk.Step(5 * time.Second)
	m.ForgetStaleBackoffs()
	if m.crashBackoff.Len() != 0 || m.pullBackoff.Len() != 1 {
		t.Fatalf("after 5s: crash entries %d (want 0, quiet > 2×2s), pull entries %d (want 1, quiet < 2×4s)", m.crashBackoff.Len(), m.pullBackoff.Len())
	}
	clk.Step(4 * time.Second)
	m.ForgetStaleBackoffs()
	if m.pullBackoff.Len() != 0 {
		t.Errorf("pull entry kept after 9s quiet")
	}
}
