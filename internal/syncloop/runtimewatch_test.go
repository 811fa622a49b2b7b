package syncloop

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/podplan"
	"github.com/berth-agent/berth/internal/podworkers"
	"github.com/berth-agent/berth/internal/runtimewatch"
)

// fakeEvents is a runtime event stream the test drives: every WatchEvents
// call is handed to the test as a fakeStream.
type fakeEvents struct {
	streams chan *fakeStream
}

// fakeStream is one subscription: the test opens it, sends events through
// it (delivered from WatchEvents' goroutine, as the real one does) and ends
// it with an error.
type fakeStream struct {
	opened func()
	events chan runtimewatch.ContainerEvent
	end    chan error
}

func (f *fakeEvents) WatchEvents(ctx context.Context, opened func(), fn func(runtimewatch.ContainerEvent)) error {
	s := &fakeStream{opened: opened, events: make(chan runtimewatch.ContainerEvent), end: make(chan error)}
	select {
	case f.streams <- s:
	case <-ctx.Done():
		return ctx.Err()
	}
	for {
		select {
		case ev := <-s.events:
			fn(ev)
		case err := <-s.end:
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// countingRuntime answers Relist with no pods and counts the calls; the
// PLEG calls nothing else.
type countingRuntime struct {
	podworkers.Runtime
	relists atomic.Int32
}

func (r *countingRuntime) Relist(context.Context) (map[types.UID]*podplan.PodStatus, error) {
	r.relists.Add(1)
	return map[types.UID]*podplan.PodStatus{}, nil
}

// plegEnv runs a PLEG with an event watch on a fake clock, inside the
// test's synctest bubble; the test takes its relists from out.
type plegEnv struct {
	t      *testing.T
	clock  *clocktesting.FakeClock
	rt     *countingRuntime
	events *fakeEvents
	out    chan relist
}

// testPeriod is the short relist period, longer than eventsGrace so that
// the grace and the period's ticks never fall on the same step.
const (
	testPeriod       = 3 * time.Second
	testSafetyPeriod = 30 * time.Second
)

func newPLEGEnv(t *testing.T) *plegEnv {
	t.Helper()
	before := goleak.IgnoreCurrent()
	e := &plegEnv{
		t:      t,
		clock:  clocktesting.NewFakeClock(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)),
		rt:     &countingRuntime{},
		events: &fakeEvents{streams: make(chan *fakeStream)},
		out:    make(chan relist),
	}
	p := newPLEG(e.rt, e.clock, testPeriod)
	p.watchEvents(e.events, e.clock, slog.New(slog.NewTextHandler(io.Discard, nil)), testSafetyPeriod)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.run(ctx, e.out)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		goleak.VerifyNone(t, before)
	})
	return e
}

// relist waits for the PLEG's next relist.
func (e *plegEnv) relist() relist {
	e.t.Helper()
	select {
	case r := <-e.out:
		return r
	case <-time.After(10 * time.Second):
		e.t.Fatal("no relist")
		return relist{}
	}
}

// stream waits for the watch's next subscription.
func (e *plegEnv) stream() *fakeStream {
	e.t.Helper()
	select {
	case s := <-e.events.streams:
		return s
	case <-time.After(10 * time.Second):
		e.t.Fatal("no subscription")
		return nil
	}
}

// up opens s and lets its grace pass: the PLEG relists at once.
func (e *plegEnv) up(s *fakeStream) relist {
	e.t.Helper()
	s.opened()
	e.stepWhenWaiting(eventsGrace)
	return e.relist()
}

// stepWhenWaiting steps the clock once somebody waits on it.
func (e *plegEnv) stepWhenWaiting(d time.Duration) {
	e.t.Helper()
	e.waiters(1)
	e.clock.Step(d)
}

// waiters waits until every goroutine of the test's synctest bubble is
// parked and checks that n timers and tickers wait on the clock by then.
func (e *plegEnv) waiters(n int) {
	e.t.Helper()
	synctest.Wait()
	if got := e.clock.Waiters(); got < n {
		e.t.Fatalf("%d waiters on the clock, want %d", got, n)
	}
}

// event sends one event produced at at through s.
func (e *plegEnv) event(s *fakeStream, at time.Time) {
	e.t.Helper()
	select {
	case s.events <- runtimewatch.ContainerEvent{ContainerID: "c", At: at}:
	case <-time.After(10 * time.Second):
		e.t.Fatal("event not taken")
	}
}

// TestPLEGEventsTriggerRelist: while the stream is up an event newer than
// the last relist relists at once, with no clock step, and the ticks of the
// short period do not relist until the safety period has passed.
func TestPLEGEventsTriggerRelist(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newPLEGEnv(t)
		first := e.relist() // at start, before any stream
		s := e.stream()
		up := e.up(s)
		if !up.at.After(first.at) {
			t.Fatalf("relist on the stream coming up at %v, first at %v", up.at, first.at)
		}
		e.clock.Step(500 * time.Millisecond)
		e.event(s, e.clock.Now())
		r := e.relist()
		if !r.at.Equal(e.clock.Now()) {
			t.Fatalf("relist at %v, want at once (%v)", r.at, e.clock.Now())
		}
		// The short period's ticks pass without a relist until the safety
		// period: the relist received next is the safety net's.
		for range int(testSafetyPeriod/testPeriod) + 1 {
			e.clock.Step(testPeriod)
		}
		r = e.relist()
		if got := r.at.Sub(up.at); got < testSafetyPeriod {
			t.Fatalf("safety relist %v after the last, want >= %v", got, testSafetyPeriod)
		}
		if n := e.rt.relists.Load(); n != 4 {
			t.Fatalf("%d relists, want 4 (start, stream up, event, safety net)", n)
		}
	})
}

// TestPLEGStreamBreakRelistsAtOnce: a broken stream relists at once (what
// happens next goes unseen until the stream is back), then every short
// period, and a new subscription relists at once again (what happened
// meanwhile may have been missed).
func TestPLEGStreamBreakRelistsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newPLEGEnv(t)
		e.relist()
		s := e.stream()
		up := e.up(s)
		s.end <- errors.New("connection reset")
		r := e.relist()
		if !r.at.Equal(up.at) {
			t.Fatalf("relist after the break at %v, want at once (%v)", r.at, up.at)
		}
		e.waiters(2)             // the ticker and the retry's timer
		e.clock.Step(testPeriod) // the short period, and past the retry's wait
		r = e.relist()
		if got := r.at.Sub(up.at); got != testPeriod {
			t.Fatalf("relist %v after the break, want the short period", got)
		}
		s = e.stream()
		again := e.up(s)
		if !again.at.After(r.at) {
			t.Fatalf("no relist on resubscribing: %v", again.at)
		}
	})
}

// TestPLEGUnsupportedRelistsEveryPeriod: on a runtime without events
// (containerd 1.6) the PLEG relists every period as before.
func TestPLEGUnsupportedRelistsEveryPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newPLEGEnv(t)
		first := e.relist()
		s := e.stream()
		s.opened() // 1.6 accepts the call and fails the first read
		s.end <- runtimewatch.ErrEventsUnsupported
		e.waiters(3) // the ticker, the grace of the failed stream, the retry's timer
		for i := 1; i <= 3; i++ {
			e.clock.Step(testPeriod)
			if r := e.relist(); r.at.Sub(first.at) != time.Duration(i)*testPeriod {
				t.Fatalf("relist %d at %v, want every period", i, r.at.Sub(first.at))
			}
		}
	})
}

// TestEventDue covers the decision taken on every event: only a change of
// the stream or an event not older than the last relist calls for one, so
// replayed and duplicated events cost nothing.
func TestEventDue(t *testing.T) {
	last := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		seen, gen uint64
		newest    time.Time
		want      bool
	}{
		{"no event yet", 1, 1, time.Time{}, false},
		{"replayed from before the last relist", 1, 1, last.Add(-4 * time.Minute), false},
		{"duplicate of an event the last relist followed", 1, 1, last.Add(-time.Nanosecond), false},
		{"produced as the relist began", 1, 1, last, true},
		{"newer than the relist", 1, 1, last.Add(time.Millisecond), true},
		{"stream came up or broke", 1, 2, time.Time{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := eventDue(last, tt.seen, tt.gen, tt.newest); got != tt.want {
				t.Errorf("eventDue = %v, want %v", got, tt.want)
			}
		})
	}
}
