//go:build e2e

package kuberuntime

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestE2ERuntimeRestart stops containerd under a dialed client: calls fail
// fast while it is down, and the same client works again once it is back.
// It must not run in parallel with other tests: they would see the outage.
func TestE2ERuntimeRestart(t *testing.T) {
	m := newE2EManager(t)
	ctx := context.Background()
	if _, err := m.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	if err := testBed.StopContainerd(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	defer func() {
		if !restarted {
			if err := testBed.StartContainerd(); err != nil {
				t.Errorf("restart containerd: %v", err)
			}
		}
	}()

	for i := range 3 {
		start := time.Now()
		_, err := m.Relist(ctx)
		took := time.Since(start)
		if status.Code(err) != codes.Unavailable {
			t.Errorf("call %d with containerd down: err = %v, want Unavailable", i, err)
		}
		if took > 3*time.Second {
			t.Errorf("call %d with containerd down took %v; it must fail fast", i, took)
		}
		t.Logf("call %d with containerd down failed in %v", i, took)
	}

	if err := testBed.StartContainerd(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	start := time.Now()
	for {
		_, err := m.Relist(ctx)
		if err == nil {
			break
		}
		if time.Since(start) > 30*time.Second {
			t.Fatalf("same client still failing 30s after containerd came back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("same client answered %v after containerd reported ready", time.Since(start))
}
