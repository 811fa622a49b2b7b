package runtimewatch

import (
	"context"
	"fmt"
	"sync"
)

// runtimeName remembers the runtime's name as its Version reports it
// ("containerd", "cri-o"): the scheme of the container IDs berth shows
// (containerd://ID, cri-o://ID), as the kubelet's status does. It is read
// on first use rather than at start because the runtime may not be up
// then, and kept: a runtime does not change its name under its socket.
type runtimeName struct {
	mu   sync.Mutex // guards name
	name string
}

// get returns the runtime's name, asking the runtime until it answers once.
func (r *runtimeName) get(ctx context.Context, w *Watcher) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.name != "" {
		return r.name, nil
	}
	v, err := w.runtime.Version(ctx, "")
	if err != nil {
		return "", fmt.Errorf("runtime version: %w", err)
	}
	if v.GetRuntimeName() == "" {
		return "", fmt.Errorf("runtime version: the runtime reports no name")
	}
	r.name = v.GetRuntimeName()
	return r.name, nil
}
