//go:build e2e

package criclient

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"
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
