package testbed

import (
	"net"
	"testing"
)

// FreeAddr returns a loopback address with a port nobody listens on, for
// a berth's --listen or --healthz-port; it fails t if none can be had.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
