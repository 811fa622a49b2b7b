package prober

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/handlers"
)

// maxBody bounds the part of a response body kept as the probe's output.
const maxBody = 10 * 1024

// newHTTPClient is the client of every HTTP probe, as the kubelet's: no
// proxy, no keep-alive (no idle connections, so no goroutine outlives a
// probe), no compression, certificates not checked (a pod's serving
// certificate is not for its IP), redirects to the same host only.
func newHTTPClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			TLSClientConfig:    &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the kubelet's behaviour: pods serve certificates for names, not IPs
			DisableKeepAlives:  true,
			DisableCompression: true,
			Proxy:              nil,
		},
		CheckRedirect: handlers.SameHostRedirects,
	}
}

// runHTTP is an httpGet probe: a status from 200 to 399 succeeds (a
// redirect to another host is not followed and counts as success, as in the
// kubelet), anything else or no answer within the timeout fails. A request
// that cannot even be built (a named port the container lacks) is a broken
// probe.
func runHTTP(ctx context.Context, client *http.Client, a *v1.HTTPGetAction, t target, timeout time.Duration) (Result, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := handlers.NewHTTPGetRequest(ctx, a, t.container, t.host, handlers.ProbeUserAgent)
	if err != nil {
		return Unknown, "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return Failure, err.Error(), nil
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return Failure, fmt.Sprintf("read response body: %v", err), nil
	}
	switch {
	case resp.StatusCode >= http.StatusMultipleChoices && resp.StatusCode < http.StatusBadRequest:
		return Success, fmt.Sprintf("Probe terminated redirects, Response body: %s", body), nil
	case resp.StatusCode >= http.StatusOK && resp.StatusCode < http.StatusMultipleChoices:
		return Success, string(body), nil
	}
	return Failure, fmt.Sprintf("HTTP probe failed with statuscode: %d", resp.StatusCode), nil
}
