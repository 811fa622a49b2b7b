//go:build e2e

package runtimewatch

import (
	"context"
	"os"
	"testing"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"

	"github.com/berth-agent/berth/e2e/testbed"
	"github.com/berth-agent/berth/internal/criclient"
	"github.com/berth-agent/berth/internal/runtimewatch/runtimewatchtest"
)

// testBed is the real containerd every e2e test of this package shares.
var testBed *testbed.Bed

func TestMain(m *testing.M) { os.Exit(testbed.Main(m, testbed.Options{}, &testBed)) }

// e2eEnv is a connection to the test bed and a log directory of its own,
// where the pods a test starts keep their logs.
type e2eEnv struct {
	rs         internalapi.RuntimeService
	is         internalapi.ImageManagerService
	podLogsDir string
}

// newE2EEnv dials the test bed; the connection closes when t ends.
func newE2EEnv(t *testing.T) *e2eEnv {
	t.Helper()
	rs, is, err := criclient.Dial(testBed.Endpoint, "", 30*time.Second)
	if err != nil {
		t.Fatalf("dial the test bed: %v", err)
	}
	t.Cleanup(func() {
		if err := rs.Close(context.Background()); err != nil {
			t.Errorf("close runtime connection: %v", err)
		}
	})
	return &e2eEnv{rs: rs, is: is, podLogsDir: t.TempDir()}
}

// startPod runs a sandbox with the given busybox containers on the test
// bed, with its logs in env's log directory; it is removed when t ends.
func (e *e2eEnv) startPod(ctx context.Context, t *testing.T, name string, hostNetwork bool, containers ...runtimewatchtest.Container) *runtimewatchtest.Pod {
	t.Helper()
	return runtimewatchtest.StartPod(ctx, t, e.rs, testBed.BusyboxImage, e.podLogsDir, name, hostNetwork, containers...)
}
