package source

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/source/laststate"
	"github.com/berth-agent/berth/internal/store"
	"k8s.io/utils/clock"
)

// Defaults of Config, the kubelet's.
const (
	DefaultFileCheckFrequency = 20 * time.Second
	DefaultHTTPCheckFrequency = 20 * time.Second
	DefaultHTTPTimeout        = 10 * time.Second
)

// Config configures the manifest sources. Zero values take the
// defaults above.
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
	URLSigners *Signers
	// FileSigners, when set, are the keys each manifest file must be
	// signed with, in <file>.sig beside it (--pod-manifest-allowed-signers).
	FileSigners *Signers
	// SignatureMetrics counts refused signed bodies; nil counts nothing.
	SignatureMetrics *SignatureMetrics
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
func Run(ctx context.Context, cfg Config, store *store.Store) error {
	if cfg.NodeName == "" {
		return errors.New("manifest sources: node name is required")
	}
	cfg.uidKey = laststate.LoadUIDKey(cfg.StateDir, cfg.logger())
	var hs *httpSource
	if cfg.URL != "" {
		u, err := url.Parse(cfg.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("manifest sources: --manifest-url %q must be an http:// or https:// URL", podspec.RedactURL(cfg.URL))
		}
		if err := ValidateHeader(cfg.URLHeader); err != nil {
			return fmt.Errorf("manifest sources: --manifest-url-header: %w", err)
		}
		client, err := httpClient(cfg)
		if err != nil {
			return fmt.Errorf("manifest sources: %w", err)
		}
		hs = newHTTPSource(cfg, u, client, store)
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
		wg.Go(func() { hs.run(ctx) })
	}
	wg.Wait()
	return nil
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
