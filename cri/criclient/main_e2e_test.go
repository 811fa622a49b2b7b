//go:build e2e

package criclient

import (
	"fmt"
	"os"
	"testing"

	"github.com/berth-agent/berth/e2e/testbed"
)

// testBed is the real containerd the e2e tests of this package share.
var testBed *testbed.Bed

func TestMain(m *testing.M) {
	bed, err := testbed.Start(testbed.Options{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "start test bed: %v\n", err)
		os.Exit(1)
	}
	testBed = bed
	code := m.Run()
	if err := bed.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "close test bed: %v\n", err)
		code = 1
	}
	os.Exit(code)
}
