package backoff

import (
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Keyed is a per-key exponential back-off, used for image pulls (per image)
// and crash loops (per pod UID and container name). A key that has been quiet
// for twice the maximum delay starts again from the initial delay, which is
// the kubelet's "reset after 10 minutes of running" for the default 5 minutes.
type Keyed struct {
	clock   clock.PassiveClock
	initial time.Duration
	max     time.Duration

	mu      sync.Mutex // guards entries
	entries map[string]backoffEntry
}

type backoffEntry struct {
	delay time.Duration
	last  time.Time // when delay was last raised
}

// New returns a back-off starting at initial and doubling up to max.
func New(c clock.PassiveClock, initial, max time.Duration) *Keyed {
	if max < initial {
		max = initial
	}
	return &Keyed{clock: c, initial: initial, max: max, entries: map[string]backoffEntry{}}
}

// Next records one more failure of key and returns the delay that now applies
// to it: initial on the first failure, doubled on each later one, capped at max.
func (b *Keyed) Next(key string) time.Duration {
	return b.NextWithin(key, b.max)
}

// NextWithin is Next under a lower ceiling for this key alone (a pod's own
// crash-loop ceiling): the delay never exceeds ceiling, the first one
// included. A ceiling above the back-off's max is the max.
func (b *Keyed) NextWithin(key string, ceiling time.Duration) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	ceiling = min(ceiling, b.max)
	now := b.clock.Now()
	e, ok := b.entries[key]
	switch {
	case !ok || b.expired(e, now):
		e.delay = b.initial
	default:
		e.delay = 2 * e.delay
	}
	e.delay = min(e.delay, ceiling)
	e.last = now
	b.entries[key] = e
	return e.delay
}

// Remaining reports how long key must still wait after a failure at since; 0
// means it may be retried now. A key without failures never waits.
func (b *Keyed) Remaining(key string, since time.Time) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	e, ok := b.entries[key]
	if !ok || b.expired(e, now) {
		return 0
	}
	return max(since.Add(e.delay).Sub(now), 0)
}

// RemainingSinceLast is Remaining measured from key's most recent failure,
// for callers that do not keep the failure time themselves (image pulls).
func (b *Keyed) RemainingSinceLast(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	e, ok := b.entries[key]
	if !ok || b.expired(e, now) {
		return 0
	}
	return max(e.last.Add(e.delay).Sub(now), 0)
}

// Delay is the delay currently recorded for key, 0 if none.
func (b *Keyed) Delay(key string) time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	e, ok := b.entries[key]
	if !ok || b.expired(e, b.clock.Now()) {
		return 0
	}
	return e.delay
}

// Reset forgets key, so its next failure starts from the initial delay.
func (b *Keyed) Reset(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.entries, key)
}

// GC drops entries that have expired, so keys of pods long gone do not
// accumulate over years of uptime.
func (b *Keyed) GC() {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	for k, e := range b.entries {
		if b.expired(e, now) {
			delete(b.entries, k)
		}
	}
}

// Len is the number of keys tracked, for leak tests and metrics.
func (b *Keyed) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.entries)
}

// expired is true when the key has been quiet for twice the maximum delay.
// Callers hold b.mu.
func (b *Keyed) expired(e backoffEntry, now time.Time) bool {
	return now.Sub(e.last) > 2*b.max
}
