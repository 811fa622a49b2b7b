package kuberuntime

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestSyncPodSandboxNameReserved: after a kill while RunPodSandbox was in
// flight, containerd refuses the same sandbox name until that request ends.
// The retry comes after 100 ms and backs off from there, instead of the
// generic 2 s; other sandbox failures keep the caller's usual retry.
func TestSyncPodSandboxNameReserved(t *testing.T) {
	reserved := status.Error(codes.Unknown, `failed to reserve sandbox name "web-node1_prod_uid-s_0": name "web-node1_prod_uid-s_0" is reserved for "4b1f0c"`)
	f := newSyncFixture(t)
	pod := syncPod("app")
	ctx := context.Background()
	var got []time.Duration
	for range 7 {
		f.rt.InjectError("RunPodSandbox", reserved)
		res := syncPlanned(ctx, f.m, pod, nil)
		if res.Error() == nil {
			t.Fatal("SyncPod succeeded while the name was reserved")
		}
		got = append(got, res.RetryAfter())
	}
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 3200}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Fatalf("retry delays %v, want %v ms", got, want)
		}
	}

	// The old request ended: the next sync goes through.
	if err := syncPlanned(ctx, f.m, pod, nil).Error(); err != nil {
		t.Fatalf("once the name is free: %v", err)
	}

	f.rt.InjectError("RunPodSandbox", errors.New("cni plugin failed"))
	if d := syncPlanned(ctx, f.m, syncPod("other"), nil).RetryAfter(); d != 0 {
		t.Errorf("another sandbox failure asks for a retry after %v; want the caller's usual retry (0)", d)
	}
}
