package syncloop

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podtest"
)

// warnRecorder is a slog.Handler keeping every WARN record as
// "message: attrs", so a test can count how often a failure was logged.
type warnRecorder struct {
	mu    *sync.Mutex // guards warns
	warns *[]string
	attrs []slog.Attr
}

func newWarnRecorder() warnRecorder {
	return warnRecorder{mu: &sync.Mutex{}, warns: new([]string)}
}

func (w warnRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (w warnRecorder) Handle(_ context.Context, r slog.Record) error {
	var b strings.Builder
	b.WriteString(r.Message + ":")
	for _, a := range w.attrs {
		b.WriteString(" " + a.String())
	}
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	w.mu.Lock()
	*w.warns = append(*w.warns, b.String())
	w.mu.Unlock()
	return nil
}

func (w warnRecorder) WithAttrs(attrs []slog.Attr) slog.Handler {
	w.attrs = append(append([]slog.Attr(nil), w.attrs...), attrs...)
	return w
}

func (w warnRecorder) WithGroup(string) slog.Handler { return w }

func (w warnRecorder) matching(substr string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, s := range *w.warns {
		if strings.Contains(s, substr) {
			out = append(out, s)
		}
	}
	return out
}

// TestCrashLoopBackOffWarnsOnce: a container in crash-loop back-off is a
// BackOff event, logged at WARN with the event; the pod worker does not
// log the same failure again at WARN.
func TestCrashLoopBackOffWarnsOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := newWarnRecorder()
		h := newHarness(t, harnessOpts{log: slog.New(rec)})
		p := podtest.Simple(t, "crash", "exit 1")
		h.apply(podspec.SourceFile, p)
		h.eventually("running", func() bool { n, _ := h.rt.running(p.UID); return n == 1 })
		// exitSeen kills the container and steps to the relist that sees it.
		exitSeen := func() {
			t.Helper()
			synced := h.steps("sync")
			h.rt.exit(p.UID, 1, h.clock.Now())
			h.step(h.agent.cfg.RelistPeriod)
			h.eventually("the sync after the exit", func() bool { return h.steps("sync") > synced })
		}
		exitSeen()
		h.eventually("restarted after the exit", func() bool {
			st := h.status(p.UID)
			return st != nil && st.Status.ContainerStatuses[0].RestartCount == 1 && st.Status.ContainerStatuses[0].State.Running != nil
		})
		exitSeen()
		h.eventually("CrashLoopBackOff shown while backing off", func() bool {
			st := h.status(p.UID)
			if st == nil {
				return false
			}
			w := st.Status.ContainerStatuses[0].State.Waiting
			return w != nil && w.Reason == "CrashLoopBackOff"
		})
		h.stop()
		if got := rec.matching("event=BackOff"); len(got) == 0 {
			t.Errorf("no WARN line for the BackOff event; WARN lines: %q", rec.matching(""))
		}
		if got := rec.matching("CrashLoopBackOff"); len(got) != 0 {
			t.Errorf("the back-off was logged again at WARN besides its event: %q", got)
		}
	})
}
