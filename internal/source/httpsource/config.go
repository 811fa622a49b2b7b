package httpsource

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"time"

	"github.com/berth-agent/berth/internal/podsnapshot"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/source/laststate"
	"github.com/berth-agent/berth/internal/source/signature"
	"github.com/berth-agent/berth/internal/source/sourcemetrics"
	"k8s.io/utils/clock"
)

// Defaults of Config, the kubelet's.
const (
	DefaultHTTPCheckFrequency = 20 * time.Second
	DefaultHTTPTimeout        = 10 * time.Second
)

// Config configures the HTTP source. Zero values take the defaults above.
type Config struct {
	// NodeName suffixes pod names and enters their UIDs; required.
	NodeName string
	// URL serves manifests, http:// or https://; required.
	URL                string
	URLHeader          http.Header
	HTTPCheckFrequency time.Duration
	// HTTPBackoffMax is the longest wait after failed polls
	// (DefaultHTTPBackoffMax); see httppoll.go.
	HTTPBackoffMax time.Duration
	// Rand returns uniform numbers in [0, 1) for the poll jitter; nil is
	// math/rand/v2. Tests fix it; a constant 0.5 polls without jitter.
	Rand func() float64
	// HTTPTimeout bounds one whole request, body included.
	HTTPTimeout time.Duration
	// HTTPClient replaces the default client (which verifies TLS
	// certificates); for tests. Redirects to another origin are refused
	// whatever client is used.
	HTTPClient *http.Client
	// URLCAFile is a PEM bundle of the CAs the URL's server certificate
	// must chain to, instead of the system's (--manifest-url-ca).
	URLCAFile string
	// URLSigners, when set, are the keys the URL's bodies must be signed
	// with (--manifest-url-allowed-signers); nil accepts unsigned bodies.
	URLSigners *signature.Signers
	// Metrics are the sources' series (sourcemetrics.New); nil counts
	// nothing.
	Metrics *sourcemetrics.Metrics
	// MaxBytes limits one body (podspec.DefaultMaxBytes).
	MaxBytes int64
	// MaxPods is --max-pods; one body may hold podspec.MaxDocuments(MaxPods)
	// documents (podspec.DefaultMaxPods when 0).
	MaxPods int
	// StateDir keeps the last good body's pods and the serials accepted
	// across restarts (<root-dir>/manifests); "" keeps them in memory only.
	StateDir string
	// UIDKey is the node's key the UIDs berth derives from manifests are
	// HMACs with (laststate.LoadUIDKey); the caller loads it once for
	// every source, so all derive with the same key.
	UIDKey []byte
	// Clock drives the polls and their timeout; nil is the real clock.
	Clock clock.WithTickerAndDelayedExecution
	// Logger receives the source's logs; nil is slog.Default().
	Logger *slog.Logger
}

// Sink takes the source's snapshots: the merge store (*store.Store), or
// in tests a wrapper that also says when one arrived.
type Sink interface {
	Apply(ctx context.Context, snap podsnapshot.Snapshot) error
}

// Source is the HTTP source, built whole by New; Run runs it.
type Source struct{ s *httpSource }

// New checks cfg (the URL, its headers, its CA bundle) and builds the
// source feeding store; it starts nothing.
func New(cfg Config, store Sink) (*Source, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("--manifest-url %q must be an http:// or https:// URL", podspec.RedactURL(cfg.URL))
	}
	if err := ValidateHeader(cfg.URLHeader); err != nil {
		return nil, fmt.Errorf("--manifest-url-header: %w", err)
	}
	client, err := httpClient(cfg)
	if err != nil {
		return nil, err
	}
	return &Source{s: newHTTPSource(cfg, u, client, store)}, nil
}

// Run polls at once and then as the schedule says until ctx is done.
func (s *Source) Run(ctx context.Context) { s.s.run(ctx) }

// newLastGoodState returns the last good state of the source under
// cfg.StateDir, or a disabled one when no state dir is configured.
func newLastGoodState(cfg Config, source string, log *slog.Logger) *laststate.State {
	return laststate.New(laststate.Config{StateDir: cfg.StateDir, Source: source, NodeName: cfg.NodeName,
		MaxBytes: cfg.maxBytes(), Clock: cfg.clock(), Log: log})
}

// newSignedOrigin returns the signature check of the source, or nil when
// no signers are configured and bodies need no signature.
func newSignedOrigin(signers *signature.Signers, cfg Config, source string, log *slog.Logger) *signature.Origin {
	if signers == nil {
		return nil
	}
	return signature.NewOrigin(signers, signature.NewSerials(cfg.StateDir, source, cfg.clock(), log), cfg.Metrics.Signatures(), source, log)
}

// restoreLastGood seeds the HTTP source with the last good body's pods. A
// broken body at start then keeps them (podsnapshot.KeepLastGood), as a broken body
// does while berth runs.
//
// They are delivered even while the URL does not answer at start (after a
// reboot, say): a source that fails never removes pods, and a reboot must
// not turn an outage of the server into an outage of the pods it served,
// least of all when that server is itself one of them. The source still
// counts as not delivered until the server answers (its snapshot is
// Failed), so SourcesReady, /readyz and orphan cleanup wait for it exactly
// as before.
func (s *httpSource) restoreLastGood() {
	if res, ok := s.state.Load()[s.origin.Path]; ok {
		s.last = res
		if s.signed != nil {
			s.signed.Serials.Adopt(s.origin.Path, signature.Keys(res))
		}
	}
}

func (cfg Config) maxBytes() int64 {
	if cfg.MaxBytes > 0 {
		return cfg.MaxBytes
	}
	return podspec.DefaultMaxBytes
}

func (cfg Config) httpCheckFrequency() time.Duration {
	if cfg.HTTPCheckFrequency > 0 {
		return cfg.HTTPCheckFrequency
	}
	return DefaultHTTPCheckFrequency
}

func (cfg Config) httpBackoffMax() time.Duration {
	if cfg.HTTPBackoffMax > 0 {
		return cfg.HTTPBackoffMax
	}
	return DefaultHTTPBackoffMax
}

func (cfg Config) rand() func() float64 {
	if cfg.Rand != nil {
		return cfg.Rand
	}
	return rand.Float64
}

func (cfg Config) httpTimeout() time.Duration {
	if cfg.HTTPTimeout > 0 {
		return cfg.HTTPTimeout
	}
	return DefaultHTTPTimeout
}

func (cfg Config) clock() clock.WithTickerAndDelayedExecution {
	if cfg.Clock != nil {
		return cfg.Clock
	}
	return clock.RealClock{}
}

func (cfg Config) logger() *slog.Logger {
	if cfg.Logger != nil {
		return cfg.Logger
	}
	return slog.Default()
}
