package api

import (
	"net/http"
	"runtime"
	"runtime/debug"

	"k8s.io/apimachinery/pkg/version"
)

// versionInfo is what /version serves: the API server's version.Info, so
// a tool that reads `kubectl version -o json`'s serverVersion reads
// berth's. The version string is the caller's (the Makefile stamps it);
// the revision is the caller's, or else the one the Go toolchain recorded
// in the binary when it was built from a checkout.
func versionInfo(gitVersion, gitCommit string) version.Info {
	treeState := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			switch {
			case s.Key == "vcs.revision" && gitCommit == "":
				gitCommit = s.Value
			case s.Key == "vcs.modified" && s.Value == "true":
				treeState = "dirty"
			case s.Key == "vcs.modified":
				treeState = "clean"
			}
		}
	}
	if gitVersion == "" {
		gitVersion = "dev"
	}
	return version.Info{
		GitVersion:   gitVersion,
		GitCommit:    gitCommit,
		GitTreeState: treeState,
		GoVersion:    runtime.Version(),
		Compiler:     runtime.Compiler,
		Platform:     runtime.GOOS + "/" + runtime.GOARCH,
	}
}

// version serves the daemon's version. It is not secret: it is served on
// TCP whatever --listen-pods says, as /metrics' go_info already tells.
func (api *Server) version(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, api.versionInfo)
}
