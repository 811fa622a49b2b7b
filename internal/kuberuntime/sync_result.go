package kuberuntime

import (
	"errors"
	"time"
)

// Actions an ActionResult reports.
const (
	ActionCreatePodSandbox = "CreatePodSandbox"
	ActionKillPodSandbox   = "KillPodSandbox"
	ActionKillContainer    = "KillContainer"
	ActionRemoveContainer  = "RemoveContainer"
	ActionInitContainer    = "InitContainer"
	ActionStartContainer   = "StartContainer"
	// ActionSyncPod is a sync refused as a whole (ErrNoPlan).
	ActionSyncPod = "SyncPod"
)

// ActionResult is the outcome of one step of SyncPod.
type ActionResult struct {
	// Action is one of the Action constants.
	Action string
	// Target is the container name, or the pod's name for sandbox actions.
	Target string
	// Err is nil on success, else a *SyncError whose Reason the agent puts
	// into the container's waiting state.
	Err error
	// RetryAfter is, for a back-off (CrashLoopBackOff, ImagePullBackOff,
	// ErrImagePull), how long until the step may succeed; 0 otherwise.
	RetryAfter time.Duration
	// Recorded says Err already became an event of the pod (every failure
	// to create the sandbox or start a container does), so the agent does
	// not log it a second time.
	Recorded bool
	// Pulling is how long the step spent pulling images (a container's
	// start pulls its image and its image volumes'), failed pulls
	// included, back-off waits not.
	Pulling time.Duration
}

// SyncResult is what one SyncPod did, step by step, and where the pod stands.
type SyncResult struct {
	Results []ActionResult
	// Terminal and Failed are those of the podplan.PodActions SyncPod executed: no
	// container of the pod will run again (the agent moves it to
	// terminating), and whether it ended in failure.
	Terminal bool
	Failed   bool
}

// add records one step's outcome.
func (r *SyncResult) add(action, target string, err error, retryAfter time.Duration) {
	r.Results = append(r.Results, ActionResult{Action: action, Target: target, Err: err, RetryAfter: retryAfter})
}

// UnrecordedError is the errors of the failed steps that did not become an
// event joined, nil when there are none: what the agent still has to log.
func (r SyncResult) UnrecordedError() error {
	var errs []error
	for _, a := range r.Results {
		if a.Err != nil && !a.Recorded {
			errs = append(errs, a.Err)
		}
	}
	return errors.Join(errs...)
}

// Error is every failed step's error joined, nil when all succeeded.
func (r SyncResult) Error() error {
	var errs []error
	for _, a := range r.Results {
		if a.Err != nil {
			errs = append(errs, a.Err)
		}
	}
	return errors.Join(errs...)
}

// RetryAfter is the shortest back-off still running among the steps, so the
// agent can requeue the pod exactly when a retry may succeed; 0 if none.
func (r SyncResult) RetryAfter() time.Duration {
	var d time.Duration
	for _, a := range r.Results {
		if a.RetryAfter > 0 && (d == 0 || a.RetryAfter < d) {
			d = a.RetryAfter
		}
	}
	return d
}

// Pulling is how long the sync spent pulling images. SyncPod starts one
// container after the other, so the steps' pulls never overlap and their
// sum is the time.
func (r SyncResult) Pulling() time.Duration {
	var d time.Duration
	for _, a := range r.Results {
		d += a.Pulling
	}
	return d
}

// Waiting is why the named container is not running after this sync (its
// start failed or is backing off), nil if its start succeeded or was not
// attempted.
func (r SyncResult) Waiting(container string) *SyncError {
	for i := len(r.Results) - 1; i >= 0; i-- {
		a := r.Results[i]
		if a.Target != container || (a.Action != ActionStartContainer && a.Action != ActionInitContainer) {
			continue
		}
		var se *SyncError
		if errors.As(a.Err, &se) {
			return se
		}
		return nil
	}
	return nil
}
