package api

import (
	"net"
	"net/http"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// limitListener caps the connections open at once on one listener, so that
// whoever can connect (every local user, on the TCP port) cannot make berth
// run out of file descriptors: berth must still read its manifests and
// talk to the runtime.
//
// Blocking Accept at the cap (netutil.LimitListener) would let one user who
// holds the slots with idle connections lock everyone else out until they
// let go. Instead, a connection arriving at the cap takes the slot of one
// that is doing nothing: idle between requests (longest idle first), or
// connected for longer than grace without having sent a request. Only when
// every slot serves a request (bounded by the server's timeouts) is the
// newcomer closed at once, which a client sees as a fast failure, not a
// hang.
type limitListener struct {
	net.Listener
	max   int
	grace time.Duration
	clock clock.PassiveClock

	mu    sync.Mutex // guards conns and the state fields of its members
	conns map[*limitConn]struct{}
}

func newLimitListener(l net.Listener, max int, grace time.Duration, clk clock.PassiveClock) *limitListener {
	return &limitListener{Listener: l, max: max, grace: grace, clock: clk, conns: map[*limitConn]struct{}{}}
}

// limitConn is a connection counted by its listener until it is closed or
// evicted.
type limitConn struct {
	net.Conn
	l *limitListener
	// state and since are the connection's HTTP state and when it entered
	// it; guarded by l.mu.
	state http.ConnState
	since time.Time
}

// Accept returns the next connection that gets a slot, closing those that
// arrive while every slot is busy with a request.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		lc := &limitConn{Conn: c, l: l, state: http.StateNew, since: l.clock.Now()}
		admitted, victim := l.admit(lc)
		if victim != nil {
			// Closing the socket under the server makes its read fail;
			// the server then closes the wrapper, which finds its slot
			// already given away.
			victim.Conn.Close()
		}
		if admitted {
			return lc, nil
		}
		c.Close()
	}
}

// admit gives lc a slot, evicting a connection that does nothing if it
// must. It returns whether lc got one, and the connection to close.
func (l *limitListener) admit(lc *limitConn) (bool, *limitConn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.conns) < l.max {
		l.conns[lc] = struct{}{}
		return true, nil
	}
	now := l.clock.Now()
	var idle, fresh *limitConn
	for c := range l.conns {
		switch {
		case c.state == http.StateIdle && (idle == nil || c.since.Before(idle.since)):
			idle = c
		case c.state == http.StateNew && now.Sub(c.since) >= l.grace && (fresh == nil || c.since.Before(fresh.since)):
			fresh = c
		}
	}
	victim := idle
	if victim == nil {
		victim = fresh
	}
	if victim == nil {
		return false, nil
	}
	delete(l.conns, victim)
	l.conns[lc] = struct{}{}
	return true, victim
}

// setState records the HTTP state of a connection (http.Server.ConnState),
// which tells the listener which connections it may evict.
func (c *limitConn) setState(s http.ConnState) {
	if s == http.StateClosed || s == http.StateHijacked {
		c.release()
		return
	}
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	c.state, c.since = s, c.l.clock.Now()
}

// release frees the connection's slot; it is idempotent, and a no-op for
// an evicted connection whose slot went to another.
func (c *limitConn) release() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	delete(c.l.conns, c)
}

func (c *limitConn) Close() error {
	c.release()
	return c.Conn.Close()
}

// open is how many connections hold a slot.
func (l *limitListener) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns)
}

// trackConnState is the http.Server.ConnState hook feeding limitListener.
func trackConnState(c net.Conn, s http.ConnState) {
	if lc, ok := c.(*limitConn); ok {
		lc.setState(s)
	}
}
