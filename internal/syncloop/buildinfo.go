package syncloop

import (
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// RegisterBuildInfo registers berth_build_info on reg: a gauge of 1 whose
// labels say which berth runs, as Prometheus' own build_info does, so a
// fleet's dashboards can join any series on it. version and revision are
// the caller's; an empty revision is the VCS revision Go stamped into the
// binary ("unknown" without one).
func RegisterBuildInfo(reg prometheus.Registerer, version, revision string) {
	if revision == "" {
		revision = vcsRevision()
	}
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "berth_build_info",
		Help: "A metric with a constant value of 1, labelled by the version and revision berth was built from and the Go version it was built with.",
	}, []string{"version", "revision", "goversion"})
	g.WithLabelValues(version, revision, runtime.Version()).Set(1)
	reg.MustRegister(g)
}

// vcsRevision is the commit the binary was built from, with "-dirty" when
// the tree had changes, or "unknown".
func vcsRevision() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown"
	}
	rev, dirty := "", false
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "unknown"
	}
	if dirty {
		rev += "-dirty"
	}
	return rev
}
