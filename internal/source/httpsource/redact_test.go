package httpsource

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podspec/podspectest"
	"github.com/berth-agent/berth/internal/store"
)

// TestHTTPSourceRedactsSecrets checks that a password and a token in
// --manifest-url reach the server but nothing berth prints: pods'
// berth.io/config.origin, problems (rejected items, failed polls) and logs.
func TestHTTPSourceRedactsSecrets(t *testing.T) {
	fake := &fakeServer{status: http.StatusOK, body: podspectest.List(podspectest.Manifest("a", "img:1"), podspectest.Manifest("b", "img:1")+"  restartPolicy: Sometimes\n")}
	srv := httptest.NewServer(fake)
	raw := strings.Replace(srv.URL, "http://", "http://user:pa55word@", 1) + "/pods?token=t0ken"
	printed := strings.Replace(srv.URL, "http://", "http://user:REDACTED@", 1) + "/pods?token=REDACTED"
	var logs syncBuffer
	clk := newClock(time.Now())
	st := store.New(podspec.SourceHTTP)
	cfg := Config{NodeName: podspectest.Node, URL: raw, HTTPCheckFrequency: time.Minute, HTTPTimeout: time.Second,
		HTTPClient: srv.Client(), Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { runSource(ctx, cfg, st); close(done) }()
	defer func() { cancel(); <-done }()

	eventually(t, "the first answer", func() bool { return len(st.Pods()) == 1 && len(st.Problems()) == 1 })
	if r := fake.last(); r.URL.Query().Get("token") != "t0ken" {
		t.Errorf("the server got token %q, want the real one", r.URL.Query().Get("token"))
	}
	if got := st.Pods()[0].Annotations[podspec.AnnotationOrigin]; got != printed {
		t.Errorf("%s = %q, want %q", podspec.AnnotationOrigin, got, printed)
	}
	var shown []string
	shown = append(shown, st.Problems()[0].Origin, st.Problems()[0].Error())

	// A failed poll, then a server that is gone.
	fake.set(http.StatusInternalServerError, "", "", false)
	eventually(t, "the next poll's timer", clk.HasWaiters)
	clk.Step(time.Hour) // past any delay the schedule picks
	unreachable := func(answered bool) func() bool {
		return func() bool {
			for _, p := range st.Problems() {
				if p.Reason == ReasonUnreachable && strings.Contains(p.Message, "server answered") == answered {
					shown = append(shown, p.Origin, p.Error())
					return true
				}
			}
			return false
		}
	}
	eventually(t, "the failed poll", unreachable(true))
	srv.Close()
	eventually(t, "the next poll's timer", clk.HasWaiters)
	clk.Step(time.Hour) // past any delay the schedule picks
	eventually(t, "the refused connection", unreachable(false))
	shown = append(shown, logs.String())

	for _, s := range shown {
		if strings.Contains(s, "pa55word") || strings.Contains(s, "t0ken") {
			t.Errorf("a secret of the URL is printed: %s", s)
		}
	}
	if !strings.Contains(logs.String(), printed) {
		t.Errorf("the log does not name the URL as %s:\n%s", printed, logs.String())
	}

	// A URL berth refuses is not printed whole either.
	err := runSource(context.Background(), Config{NodeName: podspectest.Node, URL: "ftp://user:pa55word@h/pods?token=t0ken"}, store.New())
	if err == nil || strings.Contains(err.Error(), "pa55word") || strings.Contains(err.Error(), "t0ken") {
		t.Errorf("Run with a bad URL: %v, want an error without the secrets", err)
	}
}

// syncBuffer is a log sink the source's goroutine writes while the test
// reads.
type syncBuffer struct {
	mu sync.Mutex // guards b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
