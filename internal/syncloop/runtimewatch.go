package syncloop

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/runtimewatch"
)

// runtimeEvents is a runtime that streams container events. *kuberuntime.Manager
// implements it; runtimes without the call answer runtimewatch.ErrEventsUnsupported.
type runtimeEvents interface {
	WatchEvents(ctx context.Context, opened func(), fn func(runtimewatch.ContainerEvent)) error
}

var _ runtimeEvents = (*kuberuntime.Manager)(nil)

const (
	// eventsGrace is how long a freshly opened stream must stay open (or
	// deliver an event) before the PLEG trusts it: a runtime without the
	// call accepts the subscription and only fails its first read.
	eventsGrace = time.Second
	// eventsRetryMin and eventsRetryMax bound the wait before subscribing
	// again after the stream broke; while it is down the PLEG relists at
	// its short period, so nothing waits on the retry.
	eventsRetryMin = time.Second
	eventsRetryMax = 30 * time.Second
	// eventsUnsupportedRetry is how often a runtime that had no events is
	// asked again: containerd may have been upgraded under berth.
	eventsUnsupportedRetry = 5 * time.Minute
)

// runtimeWatch keeps the one container event stream berth holds on its
// runtime (containerd 1.7 splits one queue between all subscribers, so a
// second stream of ours would steal events from the first) and tells the
// PLEG when to relist. It never passes on what an event says: it records
// when the newest event was produced and whether the stream is trusted, and
// kicks the PLEG, which relists when either is newer than its last relist.
// That makes replays (containerd 2.x sends a new subscriber the last five
// minutes of events; 1.7 queues events while nobody listens) and duplicates
// harmless: an event older than the last relist is already in it.
type runtimeWatch struct {
	src   runtimeEvents
	clock clock.WithDelayedExecution
	log   *slog.Logger
	// kick wakes the PLEG after any change below; one pending kick is
	// enough, so senders never block.
	kick chan struct{}

	mu      sync.Mutex // guards the fields below
	session uint64     // the current subscription, to ignore a late grace timer
	open    bool       // the current subscription has not ended
	up      bool       // the stream is trusted: the PLEG relists rarely
	gen     uint64     // counts changes of up: each one calls for a relist
	newest  time.Time  // when the newest event was produced
}

func newRuntimeWatch(src runtimeEvents, clk clock.WithDelayedExecution, log *slog.Logger) *runtimeWatch {
	return &runtimeWatch{src: src, clock: clk, log: log, kick: make(chan struct{}, 1)}
}

// state is what the PLEG decides on: whether the stream is trusted, how
// often that changed, and when the newest event was produced.
func (w *runtimeWatch) state() (up bool, gen uint64, newest time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.up, w.gen, w.newest
}

// run subscribes until ctx is done, again after every break.
func (w *runtimeWatch) run(ctx context.Context) {
	retry := eventsRetryMin
	unsupportedLogged := false
	for {
		session := w.begin()
		err := w.src.WatchEvents(ctx, func() { w.opened(session) }, w.event)
		wasUp := w.end()
		if ctx.Err() != nil {
			return
		}
		wait := retry
		switch {
		case errors.Is(err, runtimewatch.ErrEventsUnsupported):
			if !unsupportedLogged {
				w.log.Info("the container runtime streams no container events; relisting it every period")
				unsupportedLogged = true
			}
			wait = eventsUnsupportedRetry
		case wasUp:
			w.log.Warn("container event stream broke; relisting now and every period until it is back", "err", err)
			retry = eventsRetryMin
			wait = retry
		default:
			w.log.Debug("container event stream failed", "err", err, "retry", retry)
			retry = min(2*retry, eventsRetryMax)
		}
		t := w.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// begin starts a subscription and returns its number.
func (w *runtimeWatch) begin() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.session++
	w.open = true
	return w.session
}

// opened is the runtime accepting the subscription: the stream is trusted
// once it stayed open for eventsGrace.
func (w *runtimeWatch) opened(session uint64) {
	w.clock.AfterFunc(eventsGrace, func() { w.trust(session) })
}

// trust marks the stream of session up, unless it ended meanwhile.
func (w *runtimeWatch) trust(session uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if session != w.session || !w.open || w.up {
		return
	}
	w.up = true
	w.gen++
	w.wake()
	w.log.Info("watching the container runtime through its event stream")
}

// event records one event; the first proves the stream works.
func (w *runtimeWatch) event(ev runtimewatch.ContainerEvent) {
	w.log.Debug("container event", "containerID", ev.ContainerID, "sandboxID", ev.SandboxID, "type", ev.Type.String(), "at", ev.At)
	w.mu.Lock()
	defer w.mu.Unlock()
	if ev.At.After(w.newest) {
		w.newest = ev.At
	}
	if !w.up {
		w.up = true
		w.gen++
		w.log.Info("watching the container runtime through its event stream")
	}
	w.wake()
}

// end closes the current subscription and reports whether it was up.
func (w *runtimeWatch) end() (wasUp bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.open = false
	wasUp = w.up
	if w.up {
		w.up = false
		w.gen++
		w.wake()
	}
	return wasUp
}

// wake kicks the PLEG without blocking; w.mu is held.
func (w *runtimeWatch) wake() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}
