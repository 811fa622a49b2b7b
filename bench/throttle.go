package bench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"

	"golang.org/x/time/rate"
)

// throttleProxy is a slow registry: a reverse proxy on loopback in front
// of the bed's registry whose response bodies, all of them together, flow
// at a fixed rate, as from a registry across a slow link.
type throttleProxy struct {
	ln  net.Listener
	srv *http.Server
}

// startThrottleProxy proxies to the registry at target (host:port),
// bytesPerSecond at most.
func startThrottleProxy(target string, bytesPerSecond int) (*throttleProxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("throttling proxy: %w", err)
	}
	// A burst of 32 KiB: small beside a second's worth, so the rate holds
	// over any stretch longer than a few milliseconds.
	lim := rate.NewLimiter(rate.Limit(bytesPerSecond), 32<<10)
	rp := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "http", Host: target})
	rp.ModifyResponse = func(resp *http.Response) error {
		resp.Body = &throttledBody{ReadCloser: resp.Body, lim: lim, ctx: resp.Request.Context()}
		return nil
	}
	p := &throttleProxy{ln: ln, srv: &http.Server{Handler: rp, ReadHeaderTimeout: 5 * time.Second}}
	go p.srv.Serve(ln) //nolint:errcheck // returns when closed
	return p, nil
}

// host is the proxy's host:port, the registry host of its image references.
func (p *throttleProxy) host() string { return p.ln.Addr().String() }

func (p *throttleProxy) close() { p.srv.Close() }

// throttledBody reads a response body no faster than lim lets it.
type throttledBody struct {
	io.ReadCloser
	lim *rate.Limiter
	ctx context.Context
}

func (t *throttledBody) Read(p []byte) (int, error) {
	if len(p) > t.lim.Burst() {
		p = p[:t.lim.Burst()]
	}
	n, err := t.ReadCloser.Read(p)
	if n > 0 {
		if werr := t.lim.WaitN(t.ctx, n); werr != nil {
			return n, werr
		}
	}
	return n, err
}
