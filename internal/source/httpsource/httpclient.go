package httpsource

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strings"

	"golang.org/x/net/http/httpguts"
)

// ReasonRedirectRefused is a manifest URL that redirected to another
// origin.
const ReasonRedirectRefused = "RedirectRefused"

// maxRedirects is Go's default limit, kept.
const maxRedirects = 10

// redirectError refuses a redirect to another origin.
type redirectError struct{ from, to string }

func (e *redirectError) Error() string {
	return fmt.Sprintf("redirect from %s to %s refused: berth follows redirects within the same origin only "+
		"(scheme, host and port); point --manifest-url at the final location", e.from, e.to)
}

// httpClient builds the HTTP source's client: cfg.HTTPClient or one with
// the system's roots, or only the CAs of cfg.URLCAFile, and in both cases
// the same-origin redirect policy. The CA bundle is read once, at start.
func httpClient(cfg Config) (*http.Client, error) {
	var c http.Client
	switch {
	case cfg.HTTPClient != nil:
		c = *cfg.HTTPClient
	case cfg.URLCAFile != "":
		if !strings.HasPrefix(strings.ToLower(cfg.URL), "https://") {
			return nil, errors.New("--manifest-url-ca is set but --manifest-url is not an https:// URL")
		}
		t, err := caTransport(cfg.URLCAFile)
		if err != nil {
			return nil, fmt.Errorf("--manifest-url-ca: %w", err)
		}
		c.Transport = t
	}
	c.CheckRedirect = sameOriginRedirect
	return &c, nil
}

// NewHTTPClient is the HTTP source's kind of client for the other requests
// berth makes to a fleet's server (the status report): certificates
// checked against the system's CAs, or only those of the PEM file caFile,
// and redirects followed within the first request's origin only.
func NewHTTPClient(caFile string) (*http.Client, error) {
	c := &http.Client{CheckRedirect: sameOriginRedirect}
	if caFile != "" {
		t, err := caTransport(caFile)
		if err != nil {
			return nil, err
		}
		c.Transport = t
	}
	return c, nil
}

// caTransport trusts only the CAs of a PEM file, read once.
func caTransport(caFile string) (*http.Transport, error) {
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("no PEM certificate in %s", caFile)
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return t, nil
}

// sameOriginRedirect follows a redirect only within the origin of the
// first request. Go forwards custom headers (an X-Api-Key) to any host and
// follows https to http; a manifest server that moves elsewhere must be
// reconfigured, not followed.
func sameOriginRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	from, to := originOf(via[0].URL), originOf(req.URL)
	if from != to {
		return &redirectError{from: from, to: to}
	}
	return nil
}

// originOf is scheme://host:port, lower-cased, with the default port made
// explicit; it carries no user info, path or query, so it is safe to print.
func originOf(u *url.URL) string {
	scheme := strings.ToLower(u.Scheme)
	port := u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme + "://" + strings.ToLower(u.Hostname()) + ":" + port
}

// ValidateHeader checks the --manifest-url-header values at start: a name
// that is not a valid token, or a value with CR, LF or another control
// character, would otherwise fail every poll (or, with a lenient client,
// smuggle a header).
func ValidateHeader(h http.Header) error {
	keys := make([]string, 0, len(h))
	for k := range h {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		if !httpguts.ValidHeaderFieldName(k) {
			errs = append(errs, fmt.Errorf("invalid header name %q", k))
			continue
		}
		for _, v := range h[k] {
			if !httpguts.ValidHeaderFieldValue(v) {
				errs = append(errs, fmt.Errorf("header %s: value has a CR, LF or other control character", k))
			}
		}
	}
	return errors.Join(errs...)
}
