package doctor

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func contains(s, sub string) bool { return strings.Contains(s, sub) }

func replaceAll(s, old, new string) string { return strings.ReplaceAll(s, old, new) }
