package syncloop

import (
	"runtime"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRegisterBuildInfo(t *testing.T) {
	for _, tt := range []struct {
		name, version, revision, wantRevision string
	}{
		{"the caller's revision", "v1.2.3", "abc123", "abc123"},
		{"the binary's revision", "dev", "", vcsRevision()},
	} {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			RegisterBuildInfo(reg, tt.version, tt.revision)
			want := `# HELP berth_build_info A metric with a constant value of 1, labelled by the version and revision berth was built from and the Go version it was built with.
# TYPE berth_build_info gauge
berth_build_info{goversion="` + runtime.Version() + `",revision="` + tt.wantRevision + `",version="` + tt.version + `"} 1
`
			if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "berth_build_info"); err != nil {
				t.Fatal(err)
			}
		})
	}
}
