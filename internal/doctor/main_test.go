//go:build !e2e

package doctor

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no check leaves a goroutine behind (the event
// stream's reader, the runtime connection of Run). The e2e build has its
// own TestMain, which starts the test bed.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
