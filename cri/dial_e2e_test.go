//go:build e2e

package cri

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestE2ECheckVersion(t *testing.T) {
	rs, is, err := Dial(testBed.Endpoint, "", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close(context.Background())
	defer is.Close(context.Background())
	v, err := CheckVersion(context.Background(), rs, testBed.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	if v.RuntimeName != "containerd" || v.RuntimeApiVersion != "v1" {
		t.Errorf("version = %+v, want containerd speaking v1", v)
	}
	t.Logf("runtime %s %s, CRI %s", v.RuntimeName, v.RuntimeVersion, v.RuntimeApiVersion)
}

func TestE2ECheckVersionMissingSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "containerd.sock")
	rs, is, err := Dial(path, "", time.Minute)
	if err != nil {
		t.Fatalf("Dial must not need the runtime: %v", err)
	}
	defer rs.Close(context.Background())
	defer is.Close(context.Background())
	start := time.Now()
	_, err = CheckVersion(context.Background(), rs, path)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("err = %v, want it to say socket %s does not exist", err, path)
	}
	if took > 2*time.Second {
		t.Errorf("CheckVersion took %v against a missing socket; it must fail fast", took)
	}
	t.Logf("missing socket reported in %v: %v", took, err)
}

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
