package podstatus

import "sync"

// Signal tells any number of waiters that something changed, without
// queueing anything per waiter: C returns a channel that is closed at the
// next Fire, and Fire replaces it with a fresh one at once. A waiter that
// takes C before reading the state it watches cannot miss a change made
// after its read, and neither can one that takes C late: a Fire in
// between closed the channel it gets next only if it came after. The zero
// Signal is ready to use; its channel is guarded by its mutex.
type Signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// C returns the channel closed by the next Fire.
func (s *Signal) C() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Fire wakes every waiter of C; it never blocks on them.
func (s *Signal) Fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
	}
	s.ch = make(chan struct{})
}
