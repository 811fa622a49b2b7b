package httpsource

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/source/signature"
)

// verifySignature fetches the detached signature of a new body from
// <url>.sig (the path suffixed, the query kept), checks it and reads the
// body's serial; admitSignature then checks the serial. It returns the
// verified body, nil when bodies need no signature. The signature is
// fetched only when the body changed, with the same client (CAs,
// same-origin redirects), headers and timeout as the body, and
// unconditionally: a signature must always be the one of this body.
//
// A failure leaves the source's validators as they were, so the next poll
// fetches the body again instead of hearing 304 for a body never accepted:
// a server that publishes the body before its signature is accepted one
// poll later.
func (s *httpSource) verifySignature(ctx context.Context, body []byte) (*signature.Verified, error) {
	if s.signed == nil {
		return nil, nil
	}
	sig, err := s.fetchSignature(ctx)
	if err != nil {
		return nil, err
	}
	b, err := s.signed.Verify(body, sig, s.clock.Now())
	if err != nil {
		return nil, err
	}
	return &b, nil
}

// admitSignature checks the serial of a verified body, parsed as res,
// against what it defines and what it replaces (the last good answer): a
// body older than the serial accepted from this URL, or for any of its
// pods, ConfigMaps and Secrets, is refused, so one served at another URL
// (a URL template whose label changed) is too.
func (s *httpSource) admitSignature(b *signature.Verified, res podspec.Result) error {
	if b == nil {
		return nil
	}
	return s.signed.Admit(s.origin.Path, *b, append(signature.Keys(res), signature.Keys(s.last)...))
}

// fetchSignature GETs <url>.sig; nil, nil when the server has none (404,
// 410).
func (s *httpSource) fetchSignature(ctx context.Context) ([]byte, error) {
	u, _ := url.Parse(s.url) // parsed by New
	u.Path += signature.Suffix
	if u.RawPath != "" {
		u.RawPath += signature.Suffix
	}
	where := s.origin.Path + " (signature)"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	for k, vs := range s.header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	resp, err := s.client.Do(req)
	if err != nil {
		if context.Cause(ctx) == errTimedOut {
			return nil, s.timedOut()
		}
		reason := ReasonUnreachable
		var re *redirectError
		if errors.As(err, &re) {
			reason = ReasonRedirectRefused
		}
		return nil, &fetchError{reason, fmt.Errorf("GET %s: %w", where, stripURL(err))}
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
		return nil, nil
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return nil, &fetchError{ReasonUnreachable, fmt.Errorf("GET %s: server answered %s", where, resp.Status)}
	}
	sig, err := signature.Read(resp.Body)
	if err != nil {
		if context.Cause(ctx) == errTimedOut {
			return nil, s.timedOut()
		}
		reason := ReasonUnreachable
		if errors.Is(err, signature.ErrTooLarge) {
			reason = signature.ReasonBadSignature
		}
		return nil, &fetchError{reason, fmt.Errorf("GET %s: %w", where, stripURL(err))}
	}
	return sig, nil
}
