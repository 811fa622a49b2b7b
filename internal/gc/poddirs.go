package gc

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/types"
)

// removePodDirs removes the log directory (when known) and the state
// directory of a pod that no longer exists, reporting what was there.
func (c *Collector) removePodDirs(uid types.UID, logDir string) ([]Removal, error) {
	var out []Removal
	var errs []error
	if logDir != "" {
		if _, err := os.Lstat(logDir); err == nil {
			if err := os.RemoveAll(logDir); err != nil {
				errs = append(errs, fmt.Errorf("remove pod log directory: %w", err))
			} else {
				out = append(out, Removal{Kind: KindPodLogDir, UID: uid, ID: logDir, Reason: ReasonLeftoverDir})
			}
		}
	}
	dir, err := c.manager.PodDir(uid)
	if err != nil {
		// A UID that is no single path element (from a runtime's label)
		// never got a directory from berth: nothing to remove.
		return out, errors.Join(errs...)
	}
	if _, err := os.Lstat(dir); err == nil {
		if err := c.manager.CleanupPodDir(uid); err != nil {
			errs = append(errs, err)
		} else {
			out = append(out, Removal{Kind: KindPodDir, UID: uid, ID: dir, Reason: ReasonLeftoverDir})
		}
	}
	return out, errors.Join(errs...)
}

// SweepPodDirs removes the state directories under RootDir/pods of pods
// for which keep is false, with their log directories under PodLogsDir: the
// leftovers of pods removed while berth was down or that a crash
// interrupted. A log directory is only ever removed together with a state
// directory of the same UID, which berth alone creates, so the logs of pods
// another agent runs on the same host are never touched. The agent calls
// it once all sources are ready, with keep true for every pod a source asks
// for, a pod worker handles or the runtime still has.
func (c *Collector) SweepPodDirs(keep func(types.UID) bool) ([]Removal, error) {
	entries, err := os.ReadDir(filepath.Join(c.opts.RootDir, "pods"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sweep pod directories: %w", err)
	}
	var out []Removal
	var errs []error
	for _, e := range entries {
		uid := types.UID(e.Name())
		if !e.IsDir() || keep(uid) {
			continue
		}
		logDirs, err := filepath.Glob(filepath.Join(globEscape(c.opts.PodLogsDir), "*_"+globEscape(string(uid))))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, d := range logDirs {
			removed, err := c.removePodDirs(uid, d)
			out = append(out, removed...)
			errs = append(errs, err)
		}
		if len(logDirs) == 0 {
			removed, err := c.removePodDirs(uid, "")
			out = append(out, removed...)
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}
