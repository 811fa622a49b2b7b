package podtest

import (
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// AsyncClock is the fake clock with AfterFunc callbacks run on a goroutine
// of their own, as the real clock runs them. The fake calls them inside
// Step with its lock held, while a lane timer's callback takes the pod
// workers' mutex, under which lanes read the clock: a deadlock the real
// clock cannot have. Fired counts the timers fired, inside Step, so a test
// knows right after a step whether a timer fired, before its callback ran.
type AsyncClock struct {
	*clocktesting.FakeClock
	Fired *atomic.Int64
}

// NewAsyncClock wraps c.
func NewAsyncClock(c *clocktesting.FakeClock) AsyncClock {
	return AsyncClock{FakeClock: c, Fired: new(atomic.Int64)}
}

// AfterFunc runs f on a goroutine of its own once d has passed on c.
func (c AsyncClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return c.FakeClock.AfterFunc(d, func() {
		c.Fired.Add(1)
		go f()
	})
}
