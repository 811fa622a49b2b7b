package httpsource

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/berth-agent/berth/internal/podsnapshot"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/source/laststate"
	"github.com/berth-agent/berth/internal/source/signature"
	"github.com/berth-agent/berth/internal/source/sourcemetrics"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
)

// ReasonUnreachable is a manifest URL that did not answer with manifests.
const ReasonUnreachable = "Unreachable"

// httpSource polls a URL serving manifests (one Pod, a PodList or a
// multi-document stream). It keeps the last good answer through every kind
// of failure: a server that is down, slow, answers an error, an empty or an
// oversized body never removes pods.
//
// All fields below the configuration are owned by the goroutine in run.
type httpSource struct {
	url      string         // as requested
	origin   podspec.Origin // the URL as printed (podspec.RedactURL) and as hashed into UIDs
	header   http.Header
	nodeName string
	maxBytes int64
	maxPods  int
	timeout  time.Duration
	client   *http.Client
	clock    clock.WithTickerAndDelayedExecution
	store    Sink
	log      *slog.Logger
	schedule *pollSchedule // when to poll next (httppoll.go)

	respHeader http.Header // of the last poll's response, for the schedule; nil when none came

	etag, lastModified string         // validators of the last good answer
	last               podspec.Result // last good answer, after podsnapshot.KeepLastGood
	answered           bool           // the server has answered with manifests at least once
	problem            *podspec.Problem
	state              *laststate.State       // last good body's pods across restarts
	signed             *signature.Origin      // nil: bodies need no signature
	uidKey             []byte                 // the node's UID key the pods' UIDs are derived with
	metrics            *sourcemetrics.Metrics // nil counts nothing
	// resolver resolves the pods' references to the body's ConfigMaps
	// and Secrets, keeping the last good resolution.
	resolver *podsnapshot.Resolver
}

func newHTTPSource(cfg Config, u *url.URL, client *http.Client, store Sink) *httpSource {
	log := cfg.logger().With("source", podspec.SourceHTTP, "url", podspec.RedactURL(u.String()))
	return &httpSource{
		url:      u.String(),
		origin:   podspec.HTTPOrigin(u),
		header:   cfg.URLHeader.Clone(),
		nodeName: cfg.NodeName,
		maxBytes: cfg.maxBytes(),
		maxPods:  cfg.MaxPods,
		timeout:  cfg.httpTimeout(),
		client:   client,
		clock:    cfg.clock(),
		store:    store,
		log:      log,
		schedule: newPollSchedule(cfg.httpCheckFrequency(), cfg.httpBackoffMax(), cfg.rand()),
		state:    newLastGoodState(cfg, podspec.SourceHTTP, log),
		signed:   newSignedOrigin(cfg.URLSigners, cfg, podspec.SourceHTTP, log),
		uidKey:   cfg.UIDKey,
		resolver: podsnapshot.NewResolver(cfg.UIDKey),
		metrics:  cfg.Metrics,
	}
}

// run polls at once and then as the schedule says until ctx is done.
func (s *httpSource) run(ctx context.Context) {
	s.restoreLastGood()
	for {
		s.poll(ctx)
		if ctx.Err() != nil || s.send(ctx) != nil {
			return
		}
		t := s.clock.NewTimer(s.schedule.next(s.problem != nil, s.respHeader, s.clock.Now()))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
	}
}

// poll fetches the URL once and updates the source's state.
func (s *httpSource) poll(ctx context.Context) {
	res, body, changed, err := s.fetch(ctx)
	if ctx.Err() != nil {
		return
	}
	s.metrics.Read(podspec.SourceHTTP, s.origin.Path, s.clock.Now(), err == nil)
	if err != nil {
		if s.problem == nil || s.problem.Message != err.Error() {
			s.log.Warn("manifest URL failed; keeping the pods it served before", "err", err)
		}
		s.problem = &podspec.Problem{Source: podspec.SourceHTTP, Origin: s.origin.Path, Reason: reasonOf(err), Message: err.Error()}
		return
	}
	if s.problem != nil {
		s.log.Info("manifest URL answers again")
	}
	s.problem = nil
	s.answered = true
	if !changed {
		return
	}
	fresh := res
	res = podsnapshot.KeepLastGood(s.last, res)
	if body != nil {
		s.signed.Accept(s.origin.Path, *body, signature.RaisedKeys(fresh, s.last, res))
		n, _ := s.signed.Serials.OriginSerial(s.origin.Path)
		s.metrics.Accepted(podspec.SourceHTTP, s.origin.Path, n)
	}
	if !slices.Equal(s.last.Problems, res.Problems) {
		for _, pr := range res.Problems {
			s.log.Warn("manifest rejected", "origin", pr.Origin, "line", pr.Line, "field", pr.Field,
				"reason", pr.Reason, "pod", pr.Name, "namespace", pr.Namespace, "err", pr.Message)
		}
	}
	s.last = res
}

// fetchError is a failed poll, with the Problem reason to report.
type fetchError struct {
	reason string
	err    error
}

func (e *fetchError) Error() string { return e.err.Error() }

func reasonOf(err error) string {
	var fe *fetchError
	if errors.As(err, &fe) {
		return fe.reason
	}
	var re *signature.Refusal
	if errors.As(err, &re) {
		return re.Reason
	}
	return ReasonUnreachable
}

// errTimedOut cancels a request that did not complete within the timeout.
var errTimedOut = errors.New("timed out")

// fetch makes one conditional GET. changed is false when the server says
// the manifests are as last time (304). body is the signed body to accept
// with res, when bodies must be signed. The timeout runs on the source's
// clock, like the polls, so a test decides exactly when a slow server is
// given up on.
func (s *httpSource) fetch(ctx context.Context) (res podspec.Result, body *signature.Verified, changed bool, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	timer := s.clock.AfterFunc(s.timeout, func() { cancel(errTimedOut) })
	defer timer.Stop()
	s.respHeader = nil
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.url, nil)
	if err != nil {
		return podspec.Result{}, nil, false, err
	}
	for k, vs := range s.header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	if s.answered {
		if s.etag != "" {
			req.Header.Set("If-None-Match", s.etag)
		}
		if s.lastModified != "" {
			req.Header.Set("If-Modified-Since", s.lastModified)
		}
	}
	resp, err := s.client.Do(req)
	if err != nil {
		if context.Cause(ctx) == errTimedOut {
			return podspec.Result{}, nil, false, s.timedOut()
		}
		reason := ReasonUnreachable
		var re *redirectError
		if errors.As(err, &re) {
			reason = ReasonRedirectRefused
		}
		return podspec.Result{}, nil, false, &fetchError{reason, fmt.Errorf("GET %s: %w", s.origin.Path, stripURL(err))}
	}
	defer resp.Body.Close()
	s.respHeader = resp.Header
	if resp.StatusCode == http.StatusNotModified && s.answered {
		return podspec.Result{}, nil, false, nil
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return podspec.Result{}, nil, false, &fetchError{ReasonUnreachable, fmt.Errorf("GET %s: server answered %s", s.origin.Path, resp.Status)}
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, s.maxBytes+1))
	if err != nil {
		if context.Cause(ctx) == errTimedOut {
			return podspec.Result{}, nil, false, s.timedOut()
		}
		return podspec.Result{}, nil, false, &fetchError{ReasonUnreachable, fmt.Errorf("GET %s: reading the body: %w", s.origin.Path, stripURL(err))}
	}
	if int64(len(data)) > s.maxBytes {
		return podspec.Result{}, nil, false, &fetchError{podspec.ReasonTooLarge, fmt.Errorf("GET %s: body is larger than the limit of %d bytes", s.origin.Path, s.maxBytes)}
	}
	if strings.TrimSpace(string(data)) == "" {
		// Servers in trouble answer 200 with nothing; an empty PodList
		// is how to say "no pods".
		return podspec.Result{}, nil, false, &fetchError{podspec.ReasonEmpty, fmt.Errorf("GET %s: empty body; serve an empty PodList to remove all pods", s.origin.Path)}
	}
	if body, err = s.verifySignature(ctx, data); err != nil {
		return podspec.Result{}, nil, false, err
	}
	res = podspec.ParseKeyed(data, s.origin, s.nodeName, s.maxPods, s.uidKey)
	if err := s.admitSignature(body, res); err != nil {
		return podspec.Result{}, nil, false, err
	}
	s.etag = resp.Header.Get("ETag")
	s.lastModified = resp.Header.Get("Last-Modified")
	return res, body, true, nil
}

// timedOut is the error of a request the timeout cancelled: the client
// itself only says "context canceled".
func (s *httpSource) timedOut() error {
	return &fetchError{ReasonUnreachable, fmt.Errorf("GET %s: no complete answer within %s", s.origin.Path, s.timeout)}
}

// stripURL drops the URL from a *url.Error: callers name the redacted URL
// themselves, and the raw one may carry a password or a token.
func stripURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// send hands the current state to the store. Until the server has answered
// once the snapshot is Failed, so SourcesReady stays false and the agent
// does not clean up pods it may yet be told to run.
func (s *httpSource) send(ctx context.Context) error {
	var extra []podspec.Problem
	if s.problem != nil {
		extra = []podspec.Problem{*s.problem}
	}
	if s.signed != nil {
		// Durable before the store has the pods of the body accepted.
		s.signed.Serials.Flush(func() (origins, names sets.Set[string]) {
			return sets.New(s.origin.Path), sets.New(signature.Keys(s.last)...)
		})
	}
	if s.answered {
		s.state.Save(map[string]podspec.Result{s.origin.Path: s.last})
	}
	results := []podsnapshot.Merged{{Origin: s.origin, Result: s.last}}
	snap := podsnapshot.Assemble(podspec.SourceHTTP, results, !s.answered || s.problem != nil, extra, s.resolver)
	if snap.Version = s.etag; snap.Version == "" {
		snap.Version = s.lastModified
	}
	return s.store.Apply(ctx, snap)
}
