package bench

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// podListServer is the HTTP source the http figure serves: one PodList,
// swappable, with an ETag so a conditional poll of an unchanged list costs
// a 304 and no body. It counts the bytes that cross its connections in
// both directions (request and response, headers included), which is what
// a poll costs on the wire.
type podListServer struct {
	ln  net.Listener
	srv *http.Server

	mu   sync.Mutex // guards body and etag
	body []byte
	etag string

	requests, notModified atomic.Int64
	bytesIn, bytesOut     atomic.Int64
}

// startPodListServer listens on a loopback port and serves an empty list.
func startPodListServer() (*podListServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("pod list server: %w", err)
	}
	s := &podListServer{}
	s.ln = &countingListener{Listener: ln, in: &s.bytesIn, out: &s.bytesOut}
	s.set(nil)
	s.srv = &http.Server{Handler: http.HandlerFunc(s.serve), ReadHeaderTimeout: 5 * time.Second}
	go s.srv.Serve(s.ln) //nolint:errcheck // returns when closed
	return s, nil
}

// url is what the agent's --manifest-url gets.
func (s *podListServer) url() string { return "http://" + s.ln.Addr().String() + "/pods.json" }

// set swaps the served list (nil: an empty PodList) and returns when the
// next request sees it: the moment the http figure times from.
func (s *podListServer) set(ss []podSpec) time.Time {
	body, err := json.Marshal(podList(ss))
	if err != nil {
		panic(fmt.Sprintf("encode pod list: %v", err)) // plain structs always encode
	}
	sum := sha256.Sum256(body)
	s.mu.Lock()
	s.body, s.etag = body, `"`+hex.EncodeToString(sum[:8])+`"`
	s.mu.Unlock()
	return time.Now()
}

// size is the current list's body size, what a poll without ETag costs.
func (s *podListServer) size() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.body)
}

// serve answers a poll: 304 when the agent already has this version.
func (s *podListServer) serve(w http.ResponseWriter, req *http.Request) {
	s.requests.Add(1)
	s.mu.Lock()
	body, etag := s.body, s.etag
	s.mu.Unlock()
	w.Header().Set("ETag", etag)
	if req.Header.Get("If-None-Match") == etag {
		s.notModified.Add(1)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body) //nolint:errcheck // the agent hung up; it polls again
}

// close stops serving.
func (s *podListServer) close() { s.srv.Close() }

// countingListener counts the bytes of every connection it accepts.
type countingListener struct {
	net.Listener
	in, out *atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, in: l.in, out: l.out}, nil
}

// countingConn adds what it reads and writes to its listener's counters.
type countingConn struct {
	net.Conn
	in, out *atomic.Int64
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.in.Add(int64(n))
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.out.Add(int64(n))
	return n, err
}
