package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/berth-agent/berth/internal/podsnapshot"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/source/httpsource"
	"github.com/berth-agent/berth/internal/source/laststate"
	"k8s.io/utils/clock"
)

// DefaultFileCheckFrequency is the file source's rescan period, the
// kubelet's.
const DefaultFileCheckFrequency = 20 * time.Second

// Config configures the manifest sources. Zero values take the
// defaults: DefaultFileCheckFrequency, and those of httpsource.Config for
// the HTTP fields, which Run hands to the HTTP source as they are.
type Config struct {
	// NodeName suffixes pod names and enters their UIDs; required.
	NodeName string
	// ManifestPath is a directory of manifests or one manifest file; ""
	// disables the file source.
	ManifestPath       string
	FileCheckFrequency time.Duration
	// URL serves manifests; "" disables the HTTP source.
	URL                string
	URLHeader          http.Header
	HTTPCheckFrequency time.Duration
	// HTTPBackoffMax is the longest wait after failed polls
	// (httpsource.DefaultHTTPBackoffMax).
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
	URLSigners *Signers
	// FileSigners, when set, are the keys each manifest file must be
	// signed with, in <file>.sig beside it (--pod-manifest-allowed-signers).
	FileSigners *Signers
	// Metrics are the sources' series (NewMetrics); nil counts nothing.
	Metrics *Metrics
	// MaxBytes limits one manifest file or HTTP body (podspec.DefaultMaxBytes).
	MaxBytes int64
	// MaxPods is --max-pods; one manifest may hold podspec.MaxDocuments(MaxPods)
	// documents (podspec.DefaultMaxPods when 0).
	MaxPods int
	// Permissions says what to do with a manifest someone other than
	// root may write (PermissionsStrict when "").
	Permissions Permissions
	// StateDir keeps each source entry's last good manifest across
	// restarts (<root-dir>/manifests); "" keeps it in memory only.
	StateDir string
	// Clock drives the periodic rescans, the polls and their timeout; nil
	// is the real clock.
	Clock clock.WithTickerAndDelayedExecution
	// Logger receives the sources' logs; nil is slog.Default().
	Logger *slog.Logger

	// uidKey is the node's key the UIDs berth derives from manifests
	// are HMACs with (laststate.LoadUIDKey); Run sets it before starting either
	// source, so both derive with the same key from their first pod on.
	uidKey []byte
}

// Sink takes the sources' snapshots: the merge store (*store.Store), or in
// tests a wrapper that also says when one arrived.
type Sink interface {
	Apply(ctx context.Context, snap podsnapshot.Snapshot) error
}

// SourceNames lists the sources cfg enables, for New: the agent may
// clean up orphans only once all of them delivered.
func (cfg Config) SourceNames() []string {
	var names []string
	if cfg.ManifestPath != "" {
		names = append(names, podspec.SourceFile)
	}
	if cfg.URL != "" {
		names = append(names, podspec.SourceHTTP)
	}
	return names
}

// Run starts the sources cfg enables, feeding store, and returns when ctx is
// done. It returns an error at once, starting nothing, if cfg is invalid.
func Run(ctx context.Context, cfg Config, store Sink) error {
	if cfg.NodeName == "" {
		return errors.New("manifest sources: node name is required")
	}
	cfg.uidKey = laststate.LoadUIDKey(cfg.StateDir, cfg.logger())
	var hs *httpsource.Source
	if cfg.URL != "" {
		var err error
		if hs, err = httpsource.New(cfg.httpConfig(), store); err != nil {
			return fmt.Errorf("manifest sources: %w", err)
		}
	}
	if _, err := ParsePermissions(string(cfg.Permissions)); err != nil {
		return fmt.Errorf("manifest sources: --manifest-permissions: %w", err)
	}
	// The state of a source no longer configured must not bring its
	// pods back should it return with a broken manifest.
	if cfg.ManifestPath == "" {
		laststate.Drop(cfg.StateDir, podspec.SourceFile, cfg.logger())
	}
	if cfg.URL == "" {
		laststate.Drop(cfg.StateDir, podspec.SourceHTTP, cfg.logger())
	}
	var wg sync.WaitGroup
	if cfg.ManifestPath != "" {
		fs := newFileSource(cfg, store)
		wg.Go(func() { fs.run(ctx) })
	}
	if hs != nil {
		wg.Go(func() { hs.Run(ctx) })
	}
	wg.Wait()
	return nil
}

// httpConfig is the part of cfg the HTTP source takes.
func (cfg Config) httpConfig() httpsource.Config {
	return httpsource.Config{
		NodeName: cfg.NodeName, URL: cfg.URL, URLHeader: cfg.URLHeader,
		HTTPCheckFrequency: cfg.HTTPCheckFrequency, HTTPBackoffMax: cfg.HTTPBackoffMax, Rand: cfg.Rand,
		HTTPTimeout: cfg.HTTPTimeout, HTTPClient: cfg.HTTPClient, URLCAFile: cfg.URLCAFile,
		URLSigners: cfg.URLSigners, Metrics: cfg.Metrics,
		MaxBytes: cfg.MaxBytes, MaxPods: cfg.MaxPods, StateDir: cfg.StateDir, UIDKey: cfg.uidKey,
		Clock: cfg.Clock, Logger: cfg.Logger,
	}
}

func (cfg Config) maxBytes() int64 {
	if cfg.MaxBytes > 0 {
		return cfg.MaxBytes
	}
	return podspec.DefaultMaxBytes
}

func (cfg Config) permissions() Permissions {
	p, _ := ParsePermissions(string(cfg.Permissions)) // checked by Run
	return p
}

func (cfg Config) fileCheckFrequency() time.Duration {
	if cfg.FileCheckFrequency > 0 {
		return cfg.FileCheckFrequency
	}
	return DefaultFileCheckFrequency
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
