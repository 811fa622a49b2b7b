package prober

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/berth-agent/berth/internal/handlers"
)

// fakeExec answers ExecSync with a fixed outcome and records the call.
type fakeExec struct {
	res     handlers.ExecResult
	err     error
	cmd     []string
	timeout time.Duration
}

func (f *fakeExec) ExecSync(_ context.Context, _ string, cmd []string, timeout time.Duration) (handlers.ExecResult, error) {
	f.cmd, f.timeout = cmd, timeout
	return f.res, f.err
}

func TestRunExec(t *testing.T) {
	tests := []struct {
		name    string
		res     handlers.ExecResult
		err     error
		want    Result
		output  string
		wantErr bool
	}{
		{name: "exit 0", res: handlers.ExecResult{Output: []byte("fine\n")}, want: Success, output: "fine"},
		{name: "exit 1 with output", res: handlers.ExecResult{Output: []byte("cat: no such file\n"), ExitCode: 1}, want: Failure, output: "cat: no such file"},
		{name: "exit 2 without output", res: handlers.ExecResult{ExitCode: 2}, want: Failure, output: `command "check" exited with 2`},
		{name: "timeout fails", err: handlers.ErrExecTimeout, want: Failure, output: `command "check" timed out after 3s`},
		{name: "runtime error is a broken probe", err: errors.New("container not found"), want: Unknown, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ex := &fakeExec{res: tt.res, err: tt.err}
			got, out, err := runExec(context.Background(), ex, &v1.ExecAction{Command: []string{"check"}}, "c1", 3*time.Second)
			if got != tt.want || out != tt.output || (err != nil) != tt.wantErr {
				t.Errorf("= %v, %q, %v; want %v, %q, error %v", got, out, err, tt.want, tt.output, tt.wantErr)
			}
			if ex.timeout != 3*time.Second {
				t.Errorf("ExecSync timeout %v, want the probe's 3s", ex.timeout)
			}
		})
	}
}

// serverTarget is a target pointing at a test server, with the server's
// port also named "web" on the container.
func serverTarget(t *testing.T, rawURL string) (target, int) {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	c := &v1.Container{Name: "app", Ports: []v1.ContainerPort{{Name: "web", ContainerPort: int32(port)}}}
	return target{container: c, containerID: "c1", host: u.Hostname()}, port
}

func TestRunHTTP(t *testing.T) {
	var sawUA, sawHeader, sawHost string
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t.Error("a redirect to another host was followed")
	}))
	defer other.Close()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/headers":
			sawUA, sawHeader, sawHost = r.UserAgent(), r.Header.Get("X-Probe"), r.Host
			w.Write([]byte("healthy"))
		case "/ok":
			w.Write([]byte("healthy"))
		case "/missing":
			http.NotFound(w, r)
		case "/moved":
			http.Redirect(w, r, "/ok", http.StatusFound)
		case "/away":
			// Same port, other host name: not followed.
			http.Redirect(w, r, strings.Replace(other.URL, "127.0.0.1", "localhost", 1)+"/x", http.StatusFound)
		case "/loop":
			http.Redirect(w, r, "/loop", http.StatusFound)
		case "/slow":
			// Answers only once the prober has given up on it; the bound,
			// far beyond the probe's timeout, ends the test should the
			// prober never give up.
			select {
			case <-r.Context().Done():
			case <-time.After(time.Minute):
			}
		case "/query":
			w.Write([]byte(r.URL.RawQuery))
		}
	}))
	defer srv.Close()
	tgt, port := serverTarget(t, srv.URL)
	tests := []struct {
		name   string
		action v1.HTTPGetAction
		want   Result
		output string
	}{
		{name: "200 by named port", action: v1.HTTPGetAction{Path: "/headers", Port: intstr.FromString("web"),
			HTTPHeaders: []v1.HTTPHeader{{Name: "X-Probe", Value: "yes"}, {Name: "Host", Value: "app.local"}}}, want: Success, output: "healthy"},
		{name: "404 fails", action: v1.HTTPGetAction{Path: "/missing", Port: intstr.FromInt(port)}, want: Failure, output: "HTTP probe failed with statuscode: 404"},
		{name: "same-host redirect followed", action: v1.HTTPGetAction{Path: "/moved", Port: intstr.FromInt(port)}, want: Success, output: "healthy"},
		{name: "redirect elsewhere not followed, succeeds", action: v1.HTTPGetAction{Path: "/away", Port: intstr.FromInt(port)}, want: Success},
		{name: "redirect loop fails after 10", action: v1.HTTPGetAction{Path: "/loop", Port: intstr.FromInt(port)}, want: Failure},
		{name: "path keeps its query", action: v1.HTTPGetAction{Path: "/query?a=1", Port: intstr.FromInt(port)}, want: Success, output: "a=1"},
		{name: "slower than the timeout fails", action: v1.HTTPGetAction{Path: "/slow", Port: intstr.FromInt(port)}, want: Failure},
	}
	client := newHTTPClient()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, out, err := runHTTP(context.Background(), client, &tt.action, tgt, time.Second)
			if err != nil || got != tt.want || (tt.output != "" && out != tt.output) {
				t.Errorf("= %v, %q, %v; want %v, %q", got, out, err, tt.want, tt.output)
			}
		})
	}
	if !strings.HasPrefix(sawUA, "kube-probe/") || sawHeader != "yes" || sawHost != "app.local" {
		t.Errorf("request had User-Agent %q, X-Probe %q, Host %q", sawUA, sawHeader, sawHost)
	}
	// A named port the container lacks: the probe is broken, not failed.
	if got, _, err := runHTTP(context.Background(), client, &v1.HTTPGetAction{Port: intstr.FromString("nope")}, tgt, time.Second); got != Unknown || err == nil {
		t.Errorf("unknown named port = %v, %v; want Unknown with an error", got, err)
	}
}

func TestRunTCP(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tgt, port := serverTarget(t, "tcp://"+l.Addr().String())
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if got, out, err := runTCP(context.Background(), &v1.TCPSocketAction{Port: intstr.FromString("web")}, tgt, time.Second); got != Success || err != nil {
		t.Errorf("open port = %v, %q, %v", got, out, err)
	}
	l.Close()
	if got, out, _ := runTCP(context.Background(), &v1.TCPSocketAction{Port: intstr.FromInt(port)}, tgt, time.Second); got != Failure || !strings.Contains(out, "refused") {
		t.Errorf("closed port = %v, %q; want Failure, connection refused", got, out)
	}
}

func TestRunGRPC(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
	hs.SetServingStatus("db", healthpb.HealthCheckResponse_NOT_SERVING)
	healthpb.RegisterHealthServer(srv, hs)
	go srv.Serve(l)
	defer srv.Stop()
	bare := grpc.NewServer()
	lb, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go bare.Serve(lb)
	defer bare.Stop()

	tgt, port := serverTarget(t, "tcp://"+l.Addr().String())
	_, barePort := serverTarget(t, "tcp://"+lb.Addr().String())
	svc := func(s string) *string { return &s }
	tests := []struct {
		name   string
		action v1.GRPCAction
		want   Result
		output string
	}{
		{name: "serving", action: v1.GRPCAction{Port: int32(port)}, want: Success},
		{name: "service not serving", action: v1.GRPCAction{Port: int32(port), Service: svc("db")}, want: Failure, output: `service unhealthy (responded with "NOT_SERVING")`},
		{name: "unknown service", action: v1.GRPCAction{Port: int32(port), Service: svc("nope")}, want: Failure, output: "error: health rpc probe failed"},
		{name: "no health service", action: v1.GRPCAction{Port: int32(barePort)}, want: Failure, output: "does not implement the grpc health protocol"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, out, err := runGRPC(context.Background(), &tt.action, tgt, 2*time.Second)
			if err != nil || got != tt.want || !strings.Contains(out, tt.output) {
				t.Errorf("= %v, %q, %v; want %v, %q", got, out, err, tt.want, tt.output)
			}
		})
	}
}
