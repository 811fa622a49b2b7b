package daemon

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"

	"github.com/berth-agent/berth/internal/doctor"
)

// refuseOtherAgents is the error berth refuses to start with when a
// kubelet or another `berth run` under procRoot runs the static pods of
// manifestPath: both would start every pod of it and fight over the
// containers. It names each one's PID, the process and the directory, and
// the fix. There is no setting to override it: two agents on one
// directory is never what anyone wants, and pointing one elsewhere is the
// fix.
//
// berth itself is never among them (FindOtherAgents skips its own PID),
// nor its previous instance under systemd, which `systemctl restart` and
// Restart= wait for to exit before starting the next. A process whose
// directory cannot be told (an unreadable config file), or a procRoot
// that cannot be listed, is only logged: refusing on a guess would stop
// berth where nothing is wrong. Only the start checks: an agent started
// later is not looked for, as the kubelet does not look for berth.
func refuseOtherAgents(procRoot, manifestPath string, log *slog.Logger) error {
	if manifestPath == "" {
		return nil
	}
	// Relative paths are berth's working directory's, as the file source
	// reads them; FindOtherAgents takes it absolute.
	dir, err := filepath.Abs(manifestPath)
	if err != nil {
		return fmt.Errorf("resolve --pod-manifest-path %s: %w", manifestPath, err)
	}
	agents, err := doctor.FindOtherAgents(procRoot, dir)
	if err != nil {
		log.Warn("cannot tell whether a kubelet or another berth runs the static pods of the manifest directory", "dir", dir, "err", err)
		return nil
	}
	var same, fixes []string
	for _, a := range agents {
		if a.ManifestPath == "" {
			log.Warn("cannot tell which directory this process runs static pods from", "pid", a.PID, "process", a.Kind, "dir", dir, "err", a.From)
			continue
		}
		same = append(same, a.String())
		fix := "stop the kubelet"
		if a.Kind == "berth" {
			fix = "stop the other berth"
		}
		if !slices.Contains(fixes, fix) {
			fixes = append(fixes, fix)
		}
	}
	if len(same) == 0 {
		return nil
	}
	return fmt.Errorf("%s: berth will not start on %s too, both would start every pod of it and fight over their containers; %s or point one of them elsewhere (--pod-manifest-path, or staticPodPath in the config)",
		strings.Join(same, "; "), dir, strings.Join(fixes, " and "))
}
