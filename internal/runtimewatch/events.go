package runtimewatch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/podplan"
)

// ContainerEvent is what berth takes from one CRI container event: which
// object it is about and when the runtime produced it. The statuses the
// event carries are deliberately dropped: an event is only a hint that
// something changed, and the state berth acts on always comes from a list
// taken after it (Relist), so a late, replayed or reordered event can never
// make berth act on a stale state.
type ContainerEvent struct {
	ContainerID string
	SandboxID   string
	Type        runtimeapi.ContainerEventType
	// At is when the runtime produced the event (its clock, which on one
	// host is berth's).
	At time.Time
}

// ErrEventsUnsupported is WatchEvents' answer when the runtime does not
// stream container events (containerd 1.6 answers Unimplemented).
var ErrEventsUnsupported = errors.New("the container runtime does not stream container events")

// eventBuffer is how many received events may wait for the consumer. The
// stream's reader blocks beyond it, which only delays events: the runtime
// keeps them (2.x per subscriber, 1.7 in its shared queue).
const eventBuffer = 64

// WatchEvents holds one GetContainerEvents stream open until it ends and
// passes every event about a berth-owned object (or one whose owner cannot
// be told, a removed sandbox) to fn, in order, from the calling goroutine.
// opened is called when the runtime accepted the subscription; it does not
// prove the runtime implements the call (an Unimplemented answer comes with
// the first read), so the caller should wait for a first event or a quiet
// moment before relying on it. The returned error is ErrEventsUnsupported,
// ctx's error, or why the stream broke.
func (w *Watcher) WatchEvents(ctx context.Context, opened func(), fn func(ContainerEvent)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan *runtimeapi.ContainerEventResponse, eventBuffer)
	established := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- w.runtime.GetContainerEvents(ctx, ch, func(runtimeapi.RuntimeService_GetContainerEventsClient) {
			close(established)
			if opened != nil {
				opened()
			}
		})
	}()
	deliver := func(ev *runtimeapi.ContainerEventResponse) {
		if !eventOwned(ev) {
			return
		}
		// A sandbox can change with no container changing (its pause
		// process died): the relist this event leads to must list
		// sandboxes afresh instead of reusing its last listing.
		w.lastSandboxes.stale.Store(true)
		fn(ContainerEvent{
			ContainerID: ev.GetContainerId(),
			SandboxID:   ev.GetPodSandboxStatus().GetId(),
			Type:        ev.GetContainerEventType(),
			At:          unixNanoTime(ev.GetCreatedAt()),
		})
	}
	for {
		select {
		case ev := <-ch:
			deliver(ev)
		case err := <-done:
			// The reader handed every event over before it returned.
			for len(ch) > 0 {
				deliver(<-ch)
			}
			select {
			case <-established:
			default:
				if err == nil { // a runtime (or fake) that returns at once without a stream
					return ErrEventsUnsupported
				}
			}
			switch {
			case status.Code(err) == codes.Unimplemented:
				return ErrEventsUnsupported
			case ctx.Err() != nil:
				return ctx.Err()
			case err == nil:
				return errors.New("container events stream ended")
			}
			return fmt.Errorf("container events stream: %w", err)
		}
	}
}

// eventOwned reports whether an event may concern berth: its sandbox
// carries berth's label, or the event comes without the sandbox (removed
// already), in which case only a list can tell.
func eventOwned(ev *runtimeapi.ContainerEventResponse) bool {
	sb := ev.GetPodSandboxStatus()
	if sb == nil {
		return true
	}
	return podplan.Owned(sb.GetLabels())
}
