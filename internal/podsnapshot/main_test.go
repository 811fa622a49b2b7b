package podsnapshot

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/berth-agent/berth/internal/podspec"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var webOrigin = podspec.Origin{Source: podspec.SourceFile, Path: "/etc/kubernetes/manifests/web.yaml"}
