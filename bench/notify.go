package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"
)

// notifySocket plays systemd's part of the sd_notify protocol: the agent
// gets its path in NOTIFY_SOCKET and sends datagrams such as "READY=1".
// READY=1 is the moment a Type=notify unit counts as started, so it is
// what the adoption figure times.
type notifySocket struct {
	path  string
	conn  *net.UnixConn
	ready chan time.Time // arrival time of every READY=1
}

// listenNotify opens the datagram socket at path and starts reading it.
func listenNotify(path string) (*notifySocket, error) {
	_ = os.Remove(path)
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("notify socket: %w", err)
	}
	n := &notifySocket{path: path, conn: conn, ready: make(chan time.Time, 64)}
	go n.read()
	return n, nil
}

// read records READY=1 arrivals until the socket closes. A message may
// carry several newline-separated assignments.
func (n *notifySocket) read() {
	buf := make([]byte, 4096)
	for {
		k, err := n.conn.Read(buf)
		if err != nil {
			return
		}
		at := time.Now()
		for _, line := range strings.Split(string(buf[:k]), "\n") {
			if line == "READY=1" {
				select {
				case n.ready <- at:
				default: // nobody waits for that many; the newest do not matter
				}
			}
		}
	}
}

// drain forgets READY=1 messages from earlier agent starts.
func (n *notifySocket) drain() {
	for {
		select {
		case <-n.ready:
		default:
			return
		}
	}
}

// waitReady returns the arrival time of the next READY=1, or an error when
// ctx ends or alive reports the agent gone.
func (n *notifySocket) waitReady(ctx context.Context, alive func() error) (time.Time, error) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case at := <-n.ready:
			return at, nil
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("no READY=1: %w", ctx.Err())
		case <-tick.C:
			if err := alive(); err != nil {
				return time.Time{}, err
			}
		}
	}
}

// close stops reading and removes the socket.
func (n *notifySocket) close() error {
	err := n.conn.Close()
	_ = os.Remove(n.path)
	return err
}
