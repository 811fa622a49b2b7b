package httpsource

import (
	"context"
	"encoding/pem"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berth-agent/berth/internal/podspec/podspectest"
	"github.com/berth-agent/berth/internal/store"
)

// caFile writes the certificate of a TLS test server as a PEM bundle: the
// private CA --manifest-url-ca names.
func caFile(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	data := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// countingServer counts requests and records whether any carried the
// secret header.
type countingServer struct {
	requests, secrets atomic.Int32
	handler           http.Handler
}

func (c *countingServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c.requests.Add(1)
	if r.Header.Get("X-Api-Key") != "" {
		c.secrets.Add(1)
	}
	c.handler.ServeHTTP(w, r)
}

func redirectTo(target string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target, http.StatusFound)
	})
}

func servePod(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, podspectest.Manifest(name, "img:1"))
	})
}

// quietTLS starts a TLS server whose handshake errors are not logged.
func quietTLS(h http.Handler) *httptest.Server {
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	return srv
}

// TestHTTPSourceRedirects checks redirects are followed within the URL's
// origin only: another host or port, or https to http, is refused before
// any request (with the custom header) reaches it.
func TestHTTPSourceRedirects(t *testing.T) {
	elsewhere := &countingServer{handler: servePod("elsewhere")}
	other := httptest.NewServer(elsewhere)
	defer other.Close()
	mux := http.NewServeMux()
	mux.Handle("/pods", servePod("same"))
	mux.Handle("/a", redirectTo("/b"))
	mux.Handle("/b", redirectTo("/pods"))
	mux.Handle("/away", redirectTo(other.URL+"/pods"))
	tlsSrv := quietTLS(mux)
	defer tlsSrv.Close()
	plain := httptest.NewServer(mux)
	defer plain.Close()
	ca := caFile(t, tlsSrv)
	tests := []struct {
		name, url, want string // want: the pod, or the problem reason
	}{
		{"same-origin chain", plain.URL + "/a", "same-node1"},
		{"same-origin chain over https", tlsSrv.URL + "/a", "same-node1"},
		{"to another port", plain.URL + "/away", ReasonRedirectRefused},
		{"https to http", tlsSrv.URL + "/away", ReasonRedirectRefused},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := Config{URL: tt.url, URLHeader: http.Header{"X-Api-Key": {"secret"}},
				HTTPCheckFrequency: time.Hour, Clock: newClock(time.Now())}
			if strings.HasPrefix(tt.url, "https") {
				cfg.URLCAFile = ca
			}
			st := watchedSource(t, cfg)
			eventually(t, tt.want, func() bool {
				for _, p := range st.Pods() {
					if p.Name == tt.want {
						return true
					}
				}
				for _, p := range st.Problems() {
					if p.Reason == tt.want {
						return strings.Contains(p.Message, "redirect") && !strings.Contains(p.Message, "/pods")
					}
				}
				return false
			})
		})
	}
	if n := elsewhere.requests.Load(); n != 0 {
		t.Errorf("the other origin got %d requests (%d with the API key)", n, elsewhere.secrets.Load())
	}
}

// TestHTTPSourceCA checks --manifest-url-ca: the private CA is trusted,
// the system's roots are not asked for it, and a bad bundle stops Run.
func TestHTTPSourceCA(t *testing.T) {
	srv := quietTLS(servePod("a"))
	defer srv.Close()
	st := watchedSource(t, Config{URL: srv.URL, URLCAFile: caFile(t, srv),
		HTTPCheckFrequency: time.Hour, Clock: newClock(time.Now())})
	if got := next(t, st); got != "ADD a-node1 img:1" {
		t.Fatalf("with the CA: %q", got)
	}

	empty := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(empty, []byte("not a certificate\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	discard := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, cfg := range []Config{
		{NodeName: "n", URL: srv.URL, URLCAFile: empty, Logger: discard},
		{NodeName: "n", URL: srv.URL, URLCAFile: filepath.Join(t.TempDir(), "missing.pem"), Logger: discard},
		{NodeName: "n", URL: "http://127.0.0.1:1/pods", URLCAFile: caFile(t, srv), Logger: discard},
	} {
		if err := runSource(context.Background(), cfg, store.New()); err == nil || !strings.Contains(err.Error(), "--manifest-url-ca") {
			t.Errorf("runSource(%s, CA %s) = %v, want an error naming --manifest-url-ca", cfg.URL, filepath.Base(cfg.URLCAFile), err)
		}
	}
}

func TestValidateHeader(t *testing.T) {
	tests := []struct {
		header http.Header
		ok     bool
	}{
		{http.Header{"X-Api-Key": {"abc"}, "Authorization": {"Bearer x y"}}, true},
		{http.Header{"X-Api-Key": {"abc\r\nX-Evil: 1"}}, false},
		{http.Header{"X-Api-Key": {"abc\n"}}, false},
		{http.Header{"X-Api-Key": {"a\x00b"}}, false},
		{http.Header{"Bad Name": {"v"}}, false},
		{http.Header{"Bad:Name": {"v"}}, false},
	}
	for _, tt := range tests {
		if err := ValidateHeader(tt.header); (err == nil) != tt.ok {
			t.Errorf("ValidateHeader(%q) = %v, want ok=%v", tt.header, err, tt.ok)
		}
		cfg := Config{NodeName: "n", URL: "http://127.0.0.1:1/pods", URLHeader: tt.header}
		if tt.ok {
			continue
		}
		if err := runSource(context.Background(), cfg, store.New()); err == nil || !strings.Contains(err.Error(), "--manifest-url-header") {
			t.Errorf("Run with header %q = %v, want an error naming --manifest-url-header", tt.header, err)
		}
	}
}
