package handlers

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// User agents of berth's HTTP probes and hooks. They keep the kubelet's
// product tokens, so applications that single out kubelet probes (to keep
// them out of access logs, say) treat berth's the same.
const (
	ProbeUserAgent     = "kube-probe/1.37 (berth)"
	LifecycleUserAgent = "kube-lifecycle/1.37 (berth)"
)

// maxRedirects is how many same-host redirects an HTTP probe or hook
// follows, as the kubelet does.
const maxRedirects = 10

// ResolvePort turns a probe's or hook's port into a number: an int as is,
// a name through the container's ports, a numeric string parsed. Shared by
// httpGet, tcpSocket and hooks so every handler reads ports the same way.
func ResolvePort(port intstr.IntOrString, c *v1.Container) (int, error) {
	n := port.IntValue()
	if port.Type == intstr.String {
		n = -1
		for _, p := range c.Ports {
			if p.Name == port.StrVal {
				n = int(p.ContainerPort)
				break
			}
		}
		if n == -1 {
			parsed, err := strconv.Atoi(port.StrVal)
			if err != nil {
				return 0, fmt.Errorf("port %q is neither a number nor a named port of container %s", port.StrVal, c.Name)
			}
			n = parsed
		}
	}
	if n <= 0 || n > 65535 {
		return 0, fmt.Errorf("port %s of container %s is out of range", port.String(), c.Name)
	}
	return n, nil
}

// NewHTTPGetRequest builds the request of an httpGet probe or hook the way
// the kubelet does: scheme, host (the action's, else host), port by number
// or name, path with its query, the action's headers (a Host header sets
// the request's host), a default Accept of */* and the given user agent
// unless the action sets one.
func NewHTTPGetRequest(ctx context.Context, action *v1.HTTPGetAction, c *v1.Container, host, userAgent string) (*http.Request, error) {
	scheme := strings.ToLower(string(action.Scheme))
	if scheme == "" {
		scheme = "http"
	}
	if action.Host != "" {
		host = action.Host
	}
	if host == "" {
		return nil, errors.New("no host to send the request to: the pod has no IP yet")
	}
	port, err := ResolvePort(action.Port, c)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(action.Path)
	if err != nil {
		return nil, fmt.Errorf("parse path %q: %w", action.Path, err)
	}
	u.Scheme = scheme
	u.Host = net.JoinHostPort(host, strconv.Itoa(port))
	if u.Path == "" {
		u.Path = "/"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, fmt.Errorf("build request for %s: %w", u, err)
	}
	for _, h := range action.HTTPHeaders {
		if strings.EqualFold(h.Name, "Host") {
			req.Host = h.Value
			continue
		}
		req.Header.Add(h.Name, h.Value)
	}
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header.Set("User-Agent", userAgent)
	}
	if _, ok := req.Header["Accept"]; !ok {
		req.Header.Set("Accept", "*/*")
	}
	return req, nil
}

// SameHostRedirects is the kubelet's redirect policy for probes and hooks:
// follow redirects to the same host, up to 10; a redirect elsewhere is not
// followed and its response is the result, so a probe cannot be turned
// into a request to an arbitrary host.
func SameHostRedirects(req *http.Request, via []*http.Request) error {
	if req.URL.Hostname() != via[0].URL.Hostname() {
		return http.ErrUseLastResponse
	}
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	return nil
}
