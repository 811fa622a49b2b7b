package httpsource

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/podsnapshot"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podspec/podspectest"
	"github.com/berth-agent/berth/internal/source/laststate"
	"github.com/berth-agent/berth/internal/source/signature"
	"github.com/berth-agent/berth/internal/source/sourcemetrics/sourcemetricstest"
	"github.com/berth-agent/berth/internal/store"
)

// changed is signalled after every snapshot a test's source hands its
// store and every timer a test's clock arms: the events after which what a
// test waits for may hold. One slot: a signal sent while no test waits is
// kept for the next wait, so none is missed. The package's tests do not run
// in parallel, so one channel serves them all.
var changed = make(chan struct{}, 1)

func signal() {
	select {
	case changed <- struct{}{}:
	default:
	}
}

// signalledStore is the store a test's source feeds, signalling changed
// once each snapshot is merged.
type signalledStore struct{ *store.Store }

func (s signalledStore) Apply(ctx context.Context, snap podsnapshot.Snapshot) error {
	defer signal()
	return s.Store.Apply(ctx, snap)
}

// signalClock is a fake clock that signals changed whenever the source
// arms a timer, so a test steps it only once the source waits on it.
type signalClock struct{ *clocktesting.FakeClock }

func newClock(t time.Time) *signalClock {
	return &signalClock{clocktesting.NewFakeClock(t)}
}

func (c *signalClock) NewTimer(d time.Duration) clock.Timer {
	defer signal()
	return c.FakeClock.NewTimer(d)
}

func (c *signalClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	defer signal()
	return c.FakeClock.AfterFunc(d, f)
}

// eventually waits until cond holds, checking it again after each snapshot
// merged and each timer armed; it never polls.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := time.NewTimer(updateTimeout)
	defer timeout.Stop()
	for !cond() {
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("no %s within %s", what, updateTimeout)
		}
	}
}

// updateTimeout bounds the wait for an event that must come. It only ends
// a failing test.
const updateTimeout = 30 * time.Second

// runSource runs the HTTP source of cfg as package source's Run does: the
// node's UID key from the state dir, the config checked before anything
// starts.
func runSource(ctx context.Context, cfg Config, st *store.Store) error {
	if cfg.UIDKey == nil {
		cfg.UIDKey = laststate.LoadUIDKey(cfg.StateDir, cfg.logger())
	}
	s, err := New(cfg, signalledStore{st})
	if err != nil {
		return fmt.Errorf("manifest sources: %w", err)
	}
	s.Run(ctx)
	return nil
}

// watchedSource runs the source of cfg against a fresh store until the test
// ends.
func watchedSource(t *testing.T, cfg Config) *store.Store {
	t.Helper()
	if cfg.NodeName == "" {
		cfg.NodeName = podspectest.Node
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	st := store.New(podspec.SourceHTTP)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- runSource(ctx, cfg, st) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return st
}

// startedSource is one berth lifetime of the source: a fresh store, as
// after a restart, with the state dir the test gives.
type startedSource struct {
	store *store.Store
	stop  func()
}

func startSources(t *testing.T, cfg Config) *startedSource {
	t.Helper()
	if cfg.NodeName == "" {
		cfg.NodeName = podspectest.Node
	}
	cfg.Clock = newClock(time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC))
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	st := store.New(podspec.SourceHTTP)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- runSource(ctx, cfg, st) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return &startedSource{store: st, stop: stop}
}

// next waits for the next update and renders it as "OP name image..." lines,
// sorted, one per pod.
func next(t *testing.T, s *store.Store) string {
	t.Helper()
	select {
	case u := <-s.Updates():
		var lines []string
		for _, p := range u.Pods {
			lines = append(lines, fmt.Sprintf("%s %s %s", u.Op, p.Name, p.Spec.Containers[0].Image))
		}
		sort.Strings(lines)
		return strings.Join(lines, "\n")
	case <-time.After(updateTimeout):
		t.Fatalf("no update within %s", updateTimeout)
		return ""
	}
}

func problemsOf(s *store.Store) string {
	var out []string
	for _, p := range s.Problems() {
		out = append(out, p.Reason+" "+filepath.Base(p.Origin)+" "+p.Field)
	}
	return strings.Join(out, "\n")
}

// podLines renders the store's pods as sorted "name image" lines.
func podLines(s *store.Store) string {
	var lines []string
	for _, p := range s.Pods() {
		lines = append(lines, p.Name+" "+p.Spec.Containers[0].Image)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func mustSigners(t testing.TB, file string) *signature.Signers {
	t.Helper()
	s, err := signature.ParseAllowedSigners([]byte(file), "allowed_signers")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// signatureFailures is berth_manifest_signature_failures_total{source,
// reason} in reg.
func signatureFailures(t *testing.T, reg *prometheus.Registry, source, reason string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "berth_manifest_signature_failures_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["source"] == source && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// unixSeconds is t as the sources' timestamp gauges hold it.
func unixSeconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// gauge is the value of name{source,origin} in reg, 0 when absent.
func gauge(t testing.TB, reg prometheus.Gatherer, name, source, origin string) float64 {
	t.Helper()
	v, _ := sourcemetricstest.Value(t, reg, name, source, origin)
	return v
}
