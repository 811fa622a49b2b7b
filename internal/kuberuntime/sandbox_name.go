package kuberuntime

import (
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// A sandbox name (name_namespace_uid_attempt) that containerd still reserves
// for an earlier RunPodSandbox: berth was killed while that request ran,
// and the next berth asks for the same sandbox. containerd (1.6 to 2.x,
// RunPodSandbox) reserves the name before anything else and holds it until
// the request ends: on failure it releases the name once its clean-up is
// done; on success the sandbox itself keeps it and shows in the next
// listing. Either way the wait is as long as the rest of the old request
// (network set-up, mostly), not a fixed time. So the retry comes soon and
// backs off from there, and the next sync reads the pod afresh: it adopts
// the sandbox if the old request made one, and otherwise runs it again.
const (
	sandboxNameRetryInitial = 100 * time.Millisecond
	sandboxNameRetryMax     = 3200 * time.Millisecond
	sandboxNameReservedText = "failed to reserve sandbox name"
)

// sandboxNameRetryAfter is how soon to retry a failed sandbox creation: the
// next step of the pod's back-off when the runtime still reserved the name,
// 0 (the caller's usual retry) for any other failure or success.
func (m *Manager) sandboxNameRetryAfter(uid types.UID, err error) time.Duration {
	if err == nil || !strings.Contains(err.Error(), sandboxNameReservedText) {
		return 0
	}
	return m.sandboxNameBackoff.Next(string(uid))
}
