package doctor

import (
	"errors"
	"io/fs"

	"github.com/berth-agent/berth/internal/source"
)

// checkManifestDir: --pod-manifest-path exists and only root can change
// what it holds, by the rule the file source reads it under
// (source.CheckManifestPath: root-owned, not writable by group or others,
// nor any directory above it). A missing directory is a WARN: berth
// starts without it and reads it once it appears.
func checkManifestDir(dir string) Result {
	r := Result{Check: "manifest-dir"}
	if dir == "" {
		r.Status, r.Message = OK, "no --pod-manifest-path: the file source is off"
		return r
	}
	err := source.CheckManifestPath(dir)
	switch {
	case err == nil:
		r.Status, r.Message = OK, dir+" is writable by root only, and so is every directory above it"
	case errors.Is(err, fs.ErrNotExist):
		r.Status, r.Message = Warn, dir+" does not exist ("+err.Error()+"): berth starts without it and reads it once it is created"
		r.Fix = "mkdir -p -m 0755 " + dir
	default:
		r.Status, r.Message = Fail, err.Error()
		r.Fix = "give the path named to root and take write access from group and others (chown root PATH; chmod go-w PATH): whoever can write there can run any pod as root"
	}
	return r
}
