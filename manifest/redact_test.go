package manifest

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestRedactURL(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"https://manifests.example/pods.yaml", "https://manifests.example/pods.yaml"},
		{"https://user:pa55word@manifests.example/pods", "https://user:REDACTED@manifests.example/pods"},
		{"https://ghp_t0ken@manifests.example/pods", "https://REDACTED@manifests.example/pods"},
		{"https://user:@manifests.example/pods", "https://user:REDACTED@manifests.example/pods"},
		{"http://10.0.0.1:8000/pods?token=t0ken", "http://10.0.0.1:8000/pods?token=REDACTED"},
		{"http://h/pods?b=2&a=1&a=3&empty=&flag", "http://h/pods?b=REDACTED&a=REDACTED&a=REDACTED&empty=REDACTED&REDACTED"},
		{"http://h/pods?", "http://h/pods?"},
		{"http://h/p%20ods?x=%41", "http://h/p%20ods?x=REDACTED"},
		{"http://u:pa55word@h/pods?sig=a%3Db#frag", "http://u:REDACTED@h/pods?sig=REDACTED#frag"},
		{"", ""},
		// url.Parse refuses these; the text is redacted all the same.
		{"http://u:pa55word@h/%zz?token=t0ken", "http://REDACTED@h/%zz?REDACTED"},
		{"http://u:pa55word@[::1/pods", "http://REDACTED@[::1/pods"},
		{"http://h/\x7f?token=t0ken", "http://h/\x7f?REDACTED"},
	} {
		if got := RedactURL(tt.in); got != tt.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzRedactURL checks that whatever RedactURL prints, read back as a URL,
// holds no password, no lone user name and no query value but REDACTED.
func FuzzRedactURL(f *testing.F) {
	for _, s := range []string{"https://user:pa55word@h/p?token=t0ken&a", "http://t0ken@h:80/", "http://h/%zz?x=1", "://@?", "a@b?c=d#e"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		out := RedactURL(raw)
		u, err := url.Parse(out)
		if err != nil {
			return
		}
		if u.User != nil {
			if p, ok := u.User.Password(); ok && p != redacted {
				t.Fatalf("RedactURL(%q) = %q keeps the password %q", raw, out, p)
			}
			if _, ok := u.User.Password(); !ok && u.User.Username() != "" && u.User.Username() != redacted {
				t.Fatalf("RedactURL(%q) = %q keeps the lone user name %q", raw, out, u.User.Username())
			}
		}
		for _, part := range strings.Split(u.RawQuery, "&") {
			if _, v, ok := strings.Cut(part, "="); ok && v != redacted || !ok && part != "" && part != redacted {
				t.Fatalf("RedactURL(%q) = %q keeps the query part %q", raw, out, part)
			}
		}
	})
}

// TestHTTPOriginKeepsUID pins the UID of a URL pod to what berth computed
// before RedactURL: a new berth must not restart every URL pod.
func TestHTTPOriginKeepsUID(t *testing.T) {
	u, err := url.Parse("https://user:pa55word@manifests.example/pods?token=t0ken")
	if err != nil {
		t.Fatal(err)
	}
	res := Parse([]byte(podManifest("a", "img:1")), httpOrigin(u), testNode)
	if len(res.Pods) != 1 {
		t.Fatalf("parse: %+v", res)
	}
	p := res.Pods[0]
	if p.UID != "d816f50a11a329aed1fa75f2e3c6a2a6" {
		t.Errorf("UID = %s, want d816f50a11a329aed1fa75f2e3c6a2a6 (the UID earlier berths gave this pod)", p.UID)
	}
	if got, want := p.Annotations[AnnotationOrigin], "https://user:REDACTED@manifests.example/pods?token=REDACTED"; got != want {
		t.Errorf("%s = %q, want %q", AnnotationOrigin, got, want)
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

// TestHTTPSourceRedactsSecrets checks that a password and a token in
// --manifest-url reach the server but nothing berth prints: pods'
// berth.io/config.origin, problems (rejected items, failed polls) and logs.
func TestHTTPSourceRedactsSecrets(t *testing.T) {
	fake := &fakeServer{status: http.StatusOK, body: podList(podManifest("a", "img:1"), podManifest("b", "img:1")+"  restartPolicy: Sometimes\n")}
	srv := httptest.NewServer(fake)
	raw := strings.Replace(srv.URL, "http://", "http://user:pa55word@", 1) + "/pods?token=t0ken"
	printed := strings.Replace(srv.URL, "http://", "http://user:REDACTED@", 1) + "/pods?token=REDACTED"
	var logs syncBuffer
	clk := clocktesting.NewFakeClock(time.Now())
	store := NewStore(SourceHTTP)
	cfg := SourceConfig{NodeName: testNode, URL: raw, HTTPCheckFrequency: time.Minute, HTTPTimeout: time.Second,
		HTTPClient: srv.Client(), Clock: clk, Logger: slog.New(slog.NewTextHandler(&logs, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { Run(ctx, cfg, store); close(done) }()
	defer func() { cancel(); <-done }()

	eventually(t, "the first answer", func() bool { return len(store.Pods()) == 1 && len(store.Problems()) == 1 })
	if r := fake.last(); r.URL.Query().Get("token") != "t0ken" {
		t.Errorf("the server got token %q, want the real one", r.URL.Query().Get("token"))
	}
	if got := store.Pods()[0].Annotations[AnnotationOrigin]; got != printed {
		t.Errorf("%s = %q, want %q", AnnotationOrigin, got, printed)
	}
	var shown []string
	shown = append(shown, store.Problems()[0].Origin, store.Problems()[0].Error())

	// A failed poll, then a server that is gone.
	fake.set(http.StatusInternalServerError, "", "", false)
	eventually(t, "the next poll's timer", clk.HasWaiters)
	clk.Step(time.Hour) // past any delay the schedule picks
	unreachable := func(answered bool) func() bool {
		return func() bool {
			for _, p := range store.Problems() {
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
	err := Run(context.Background(), SourceConfig{NodeName: testNode, URL: "ftp://user:pa55word@h/pods?token=t0ken"}, NewStore())
	if err == nil || strings.Contains(err.Error(), "pa55word") || strings.Contains(err.Error(), "t0ken") {
		t.Errorf("Run with a bad URL: %v, want an error without the secrets", err)
	}
}
