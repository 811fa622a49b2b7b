//go:build e2e

package kuberuntime

import (
	"context"
	"os"
	"testing"
	"time"

	internalapi "k8s.io/cri-api/pkg/apis"

	"github.com/berth-agent/berth/e2e/testbed"
	"github.com/berth-agent/berth/internal/criclient"
)

// testBed is the real containerd every e2e test of this package shares,
// with the local registry up (images_e2e_test.go pulls from it).
var testBed *testbed.Bed

func TestMain(m *testing.M) { os.Exit(testbed.Main(m, testbed.Options{Registry: true}, &testBed)) }

// newE2EManager is a Manager dialed to the test bed, with its own root and
// log directories; the connection closes when t ends.
func newE2EManager(t *testing.T) *Manager {
	return newE2EManagerWith(t, Options{})
}

// newE2EManagerWith is newE2EManager with opts; it fills their NodeName,
// RootDir and PodLogsDir.
func newE2EManagerWith(t *testing.T, opts Options) *Manager {
	t.Helper()
	rs, is := dialTestBed(t)
	opts.NodeName, opts.RootDir, opts.PodLogsDir = "e2e", t.TempDir(), t.TempDir()
	return NewManager(rs, is, opts)
}

// dialTestBed connects to the test bed's runtime and image services; the
// connection closes when t ends.
func dialTestBed(t *testing.T) (internalapi.RuntimeService, internalapi.ImageManagerService) {
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
	return rs, is
}
