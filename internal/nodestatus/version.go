package nodestatus

import (
	"runtime/debug"
	"strings"
)

// fallbackKubernetesVersion is the Kubernetes release whose API berth is built
// against when the build info cannot say (a binary built without module
// information): k8s.io/api v0.X.Y is Kubernetes v1.X.Y.
const fallbackKubernetesVersion = "v1.37.2"

// KubeletVersion is the nodeInfo.kubeletVersion berth reports: the
// Kubernetes release of the API it is built against (k8s.io/api v0.X.Y
// is v1.X.Y), with berth's own version as semver build metadata, e.g.
// v1.37.2+berth.1.4.0. It must parse as semver: kubeadm's upgrade checks
// and the kubectl and dashboard columns parse it, and the version-skew
// policy (a node at most three minors older than the API server, never
// newer) is judged on it. The build metadata is ignored in those
// comparisons, so berth is judged as the kubelet release whose pod API it
// implements, and a reader still sees it is berth.
func KubeletVersion(berthVersion string) string {
	return kubernetesVersion() + "+berth." + semverBuild(berthVersion)
}

func kubernetesVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return fallbackKubernetesVersion
	}
	for _, d := range bi.Deps {
		if d.Path != "k8s.io/api" {
			continue
		}
		if rest, ok := strings.CutPrefix(d.Version, "v0."); ok && !strings.ContainsAny(rest, "-+") {
			return "v1." + rest
		}
	}
	return fallbackKubernetesVersion
}

// semverBuild turns v into semver build identifiers: dot-separated runs of
// [0-9A-Za-z-], every other character a dash.
func semverBuild(v string) string {
	v = strings.TrimPrefix(v, "v")
	ids := strings.Split(v, ".")
	out := ids[:0]
	for _, id := range ids {
		id = strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' {
				return r
			}
			return '-'
		}, id)
		if id != "" {
			out = append(out, id)
		}
	}
	if len(out) == 0 {
		return "unknown"
	}
	return strings.Join(out, ".")
}
