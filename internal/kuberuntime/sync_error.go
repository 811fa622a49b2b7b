package kuberuntime

import "errors"

// SyncError is a failure with the kubelet's reason word, for container status
// and events. The agent puts Reason into a waiting container's state reason
// (ErrImagePull, CrashLoopBackOff, ...) and Message beside it, so a user
// reading `berth pods` sees the same words a kubelet user would.
type SyncError struct {
	Reason  string
	Message string
	Err     error
}

// Reasons a SyncError carries, the kubelet's words.
const (
	ReasonErrImagePull               = "ErrImagePull"
	ReasonImagePullBackOff           = "ImagePullBackOff"
	ReasonErrImageNeverPull          = "ErrImageNeverPull"
	ReasonInvalidImageName           = "InvalidImageName"
	ReasonImageInspectError          = "ImageInspectError"
	ReasonCreateContainerConfigError = "CreateContainerConfigError"
	ReasonCreateContainerError       = "CreateContainerError"
	ReasonRunContainerError          = "RunContainerError"
	ReasonCrashLoopBackOff           = "CrashLoopBackOff"
	ReasonCreatePodSandboxError      = "CreatePodSandboxError"
	ReasonKillContainerError         = "KillContainerError"
	ReasonKillPodSandboxError        = "KillPodSandboxError"
)

// ReasonWaitingForImport is berth's event while a container's image is
// missing and image archives are being preloaded.
const ReasonWaitingForImport = "WaitingForImport"

// Error is "Reason: Message", the way the kubelet prints a sync result.
func (e *SyncError) Error() string {
	return e.Reason + ": " + e.Message
}

// Unwrap exposes the runtime's error, so callers can still test for gRPC
// codes or context cancellation through errors.Is/As.
func (e *SyncError) Unwrap() error {
	return e.Err
}

// syncMessage is the Message of the SyncError in err's chain, for an
// event that must read like the kubelet's; err's own text if it has none.
func syncMessage(err error) string {
	if se, ok := errors.AsType[*SyncError](err); ok {
		return se.Message
	}
	return err.Error()
}
