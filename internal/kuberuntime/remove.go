package kuberuntime

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"

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
	logPath, _, known := m.ContainerFiles(id)
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
		logPath = m.OwnedLogPath(resp.Status.LogPath)
	}
	if err := m.runtime.RemoveContainer(ctx, id); err != nil && !isNotFound(err) {
		return fmt.Errorf("remove container %q: %w", id, err)
	}
	m.Forget([]string{id}, nil)
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
	m.Forget(nil, removed)
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

// PodDir is the pod's state directory under RootDir; a UID that is not a
// single safe path element is an error.
func (m *Manager) PodDir(uid types.UID) (string, error) {
	return m.config.PodDir(uid)
}

// CleanupPodDir removes the pod's state directory after the pod has
// terminated, unmounting what berth mounted under it first; a missing
// directory is success.
func (m *Manager) CleanupPodDir(uid types.UID) error {
	return m.config.CleanupPodDir(uid)
}
