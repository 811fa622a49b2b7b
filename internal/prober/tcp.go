package prober

import (
	"context"
	"net"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/handlers"
)

// runTCP is a tcpSocket probe: a connection opened within the timeout
// succeeds and is closed at once.
func runTCP(ctx context.Context, a *v1.TCPSocketAction, t target, timeout time.Duration) (Result, string, error) {
	port, err := handlers.ResolvePort(a.Port, t.container)
	if err != nil {
		return Unknown, "", err
	}
	host := a.Host
	if host == "" {
		host = t.host
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return Failure, err.Error(), nil
	}
	return Success, "", conn.Close()
}
