package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/berth-agent/berth/internal/podpath"
	"github.com/berth-agent/berth/internal/podplan"
)

// isNotFound reports whether the runtime said the object does not exist.
// Stopping or removing what is already gone is success: the caller wanted it
// gone, and a retry after a half-finished attempt must not fail forever.
func isNotFound(err error) bool {
	return status.Code(err) == codes.NotFound
}

// RemoveContainer removes one berth-owned container and its log file, for
// the crash-loop and garbage-collection paths. A container already gone is
// success; one without berth's ownership label is refused.
func (m *Manager) RemoveContainer(ctx context.Context, id string) error {
	logPath, known := m.statusCache.containerLogPath(id)
	if !known {
		// Not seen by a relist yet: ask the runtime whose it is.
		resp, err := m.runtime.ContainerStatus(ctx, id, false)
		if isNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("remove container %q: status: %w", id, err)
		}
		if !podplan.Owned(resp.Status.Labels) {
			return fmt.Errorf("refusing to remove container %q: it is not managed by berth", id)
		}
		logPath = m.ownedLogPath(resp.Status.LogPath)
	}
	if err := m.runtime.RemoveContainer(ctx, id); err != nil && !isNotFound(err) {
		return fmt.Errorf("remove container %q: %w", id, err)
	}
	m.statusCache.forget([]string{id}, nil)
	// The runtime leaves the log file behind; a crash-looping container
	// would otherwise fill the disk one attempt at a time.
	if logPath != "" {
		if err := os.Remove(logPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove log of container %q: %w", id, err)
		}
	}
	return nil
}

// RemovePod removes a terminated pod from the runtime: its containers first,
// then its sandboxes, then the pod's log directory once nothing of the pod is
// left. Only berth-owned objects are touched. It is idempotent: what is
// already gone counts as removed, so a retry after a partial failure
// finishes the job. Failures are returned joined.
func (m *Manager) RemovePod(ctx context.Context, status *podplan.PodStatus) error {
	var errs []error
	for _, c := range status.Containers {
		if !podplan.Owned(c.Labels) {
			continue
		}
		if err := m.RemoveContainer(ctx, c.ID); err != nil {
			errs = append(errs, err)
		}
	}
	var removed []string
	for _, s := range status.OwnedSandboxes() {
		if err := m.runtime.RemovePodSandbox(ctx, s.ID); err != nil && !isNotFound(err) {
			errs = append(errs, fmt.Errorf("remove sandbox %q: %w", s.ID, err))
			continue
		}
		removed = append(removed, s.ID)
	}
	m.statusCache.forget(nil, removed)
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if dir := m.PodLogDir(status); dir != "" {
		if err := os.RemoveAll(dir); err != nil {
			return fmt.Errorf("remove logs of pod %s/%s: %w", status.Namespace, status.Name, err)
		}
	}
	return nil
}

// PodLogDir is the pod's directory in the CRI log layout
// (<PodLogsDir>/<namespace>_<name>_<uid>), "" when the status lacks the
// identity to name it safely. The identity comes from the runtime's labels:
// one that would name a directory anywhere else (a '/', "..", a '_') is no
// pod berth ever made a directory for, so there is nothing to remove.
func (m *Manager) PodLogDir(status *podplan.PodStatus) string {
	if m.opts.PodLogsDir == "" {
		return ""
	}
	dir, err := podpath.LogDir(m.opts.PodLogsDir, status.Namespace, status.Name, string(status.UID))
	if err != nil {
		return ""
	}
	return dir
}

// ownedLogPath is path, cleaned, when it lies below PodLogsDir, else "".
// berth removes and rotates the file a runtime reports as a container's
// log: a hostile or confused runtime must not make it remove /etc/shadow.
func (m *Manager) ownedLogPath(path string) string {
	if !podpath.Under(m.opts.PodLogsDir, path) {
		return ""
	}
	return filepath.Clean(path)
}

// ownedTermPath is path, cleaned, when it lies below RootDir/pods, else "":
// the same for the termination-message file berth removes with a container.
func (m *Manager) ownedTermPath(path string) string {
	if !podpath.Under(filepath.Join(m.opts.RootDir, "pods"), path) {
		return ""
	}
	return filepath.Clean(path)
}

// ContainerFiles are the log and termination-message files of a container
// the latest relist saw, for container GC (cri/gc), which removes them with
// the container: each is "" unless it lies under berth's own roots. known
// is false once the container was removed since the relist.
func (m *Manager) ContainerFiles(id string) (logPath, termPath string, known bool) {
	logPath, known = m.statusCache.containerLogPath(id)
	if !known {
		return "", "", false
	}
	return logPath, m.ownedTermPath(m.statusCache.containerTermPath(id)), true
}

// KnowsSandbox reports whether the latest relist saw the sandbox and
// nothing removed it since, so container GC (cri/gc) skips, without a
// runtime call, a sandbox a pod worker already removed.
func (m *Manager) KnowsSandbox(id string) bool {
	return m.statusCache.knowsSandbox(id)
}

// Forget drops objects container GC (cri/gc) removed from the status cache,
// so the next pass over the same snapshot does not try them again.
func (m *Manager) Forget(containerIDs, sandboxIDs []string) {
	m.statusCache.forget(containerIDs, sandboxIDs)
}
