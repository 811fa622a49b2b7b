//go:build e2e

package doctor

import (
	"os"
	"testing"

	"github.com/berth-agent/berth/e2e/testbed"
)

// testBed is the real containerd the e2e tests of this package share.
var testBed *testbed.Bed

func TestMain(m *testing.M) { os.Exit(testbed.Main(m, testbed.Options{}, &testBed)) }
