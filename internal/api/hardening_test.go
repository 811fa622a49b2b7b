package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// rawGet sends a GET over conn with the given Host and reads the answer.
func rawGet(t *testing.T, conn net.Conn, path, host string) (int, string) {
	t.Helper()
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host)
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestAPITCPExposure: what the TCP port, open to every local user, serves
// under each --listen-pods; the socket serves everything whatever it says.
func TestAPITCPExposure(t *testing.T) {
	paths := []string{"/pods", "/pods/default/web-node1", "/pods/default/web-node1/events", "/problems", "/events"}
	tests := []struct {
		exposure Exposure
		want     map[string]int // TCP status per path
	}{
		{"", map[string]int{"/pods": 403, "/pods/default/web-node1": 403, "/pods/default/web-node1/events": 403, "/problems": 403, "/events": 403}},
		{ExposeNone, map[string]int{"/pods": 403, "/pods/default/web-node1": 403, "/pods/default/web-node1/events": 403, "/problems": 403, "/events": 403}},
		{ExposeRedacted, map[string]int{"/pods": 200, "/pods/default/web-node1": 200, "/pods/default/web-node1/events": 403, "/problems": 403, "/events": 403}},
		{ExposeFull, map[string]int{"/pods": 200, "/pods/default/web-node1": 200, "/pods/default/web-node1/events": 200, "/problems": 200, "/events": 200}},
	}
	for _, tt := range tests {
		t.Run(string(tt.exposure), func(t *testing.T) {
			b := newAPIBed(t, func(api *Server) { api.exposure = tt.exposure })
			pod, st := webPod()
			b.pods.status.Set(pod, st)
			for _, p := range paths {
				code, body := b.get(t, p, true)
				if code != tt.want[p] {
					t.Errorf("TCP %s: %d %.200s, want %d", p, code, body, tt.want[p])
				}
				if code == 403 && !strings.Contains(body, "unix socket only") {
					t.Errorf("TCP %s: 403 without saying where to go: %s", p, body)
				}
				if code, body := b.get(t, p, false); code != 200 {
					t.Errorf("socket %s: %d %.200s", p, code, body)
				}
			}
			for _, p := range []string{"/healthz", "/readyz", "/metrics", "/version"} {
				if code, _ := b.get(t, p, true); code == http.StatusForbidden {
					t.Errorf("TCP %s refused", p)
				}
			}
		})
	}
}

// secretPod carries a secret in every place --listen-pods=redacted hides.
func secretPod() (*v1.Pod, v1.PodStatus) {
	pod, st := webPod()
	pod.Annotations = map[string]string{"kubernetes.io/config.hash": "uid-web", "berth.io/config.origin": "https://u:SECRET@x/pods", "note": "SECRET"}
	probe := &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/h?token=SECRET&v=SECRET", HTTPHeaders: []v1.HTTPHeader{{Name: "Authorization", Value: "SECRET"}}}}}
	pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "DB_PASSWORD", Value: "SECRET"}}
	pod.Spec.Containers[0].Command = []string{"sh", "-c", "login --password SECRET"}
	pod.Spec.Containers[0].Args = []string{"--token=SECRET"}
	pod.Spec.Containers[0].LivenessProbe = probe
	pod.Spec.Containers[0].ReadinessProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"check", "SECRET"}}}}
	pod.Spec.Containers[0].StartupProbe = &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/started?SECRET"}}}
	pod.Spec.Containers[0].Lifecycle = &v1.Lifecycle{
		PreStop:   &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"SECRET"}}},
		PostStart: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/hook?token=SECRET"}},
	}
	pod.Spec.InitContainers = []v1.Container{{Name: "init", Env: []v1.EnvVar{{Name: "K", Value: "SECRET"}}}}
	st.ContainerStatuses[0].LastTerminationState.Terminated.Message = "panic: SECRET"
	st.Message = "SECRET"
	return pod, st
}

func TestAPIRedacted(t *testing.T) {
	b := newAPIBed(t, func(api *Server) { api.exposure = ExposeRedacted })
	pod, st := secretPod()
	b.pods.status.Set(pod, st)
	for _, p := range []string{"/pods", "/pods/default/web-node1"} {
		code, body := b.get(t, p, true)
		if code != 200 || strings.Contains(body, "SECRET") {
			t.Errorf("TCP %s: %d, shows a secret: %s", p, code, body)
		}
		if !strings.Contains(body, `"DB_PASSWORD"`) || !strings.Contains(body, "busybox:1.36") || !strings.Contains(body, `"uid-web"`) ||
			!strings.Contains(body, `"/h?token=`) {
			t.Errorf("TCP %s: lost what a monitoring agent needs: %s", p, body)
		}
		if _, body := b.get(t, p, false); !strings.Contains(body, "SECRET") {
			t.Errorf("socket %s: redacted too", p)
		}
	}
	if !strings.Contains(fmt.Sprint(pod.Spec.Containers[0].Env), "SECRET") {
		t.Error("redaction wrote into the shared pod")
	}
}

// TestRedactHTTPPath: a probe's path stays, the values of its query and a
// fragment go.
func TestRedactHTTPPath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"/healthz", "/healthz"},
		{"/healthz?token=SECRET", "/healthz?token=<redacted>"},
		{"/h?a=SECRET&b=SECRET", "/h?a=<redacted>&b=<redacted>"},
		{"/h?SECRET", "/h?<redacted>"},
		{"/h?a=SECRET&&b", "/h?a=<redacted>&&<redacted>"},
		{"/h?", "/h?"},
		{"/h?a=SECRET#SECRET", "/h?a=<redacted>#<redacted>"},
		{"/h#SECRET?a=b", "/h#<redacted>"},
		{"?token=SECRET", "?token=<redacted>"},
	}
	for _, tt := range tests {
		if got := redactHTTPPath(tt.in); got != tt.want {
			t.Errorf("redactHTTPPath(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestAPIHostHeader(t *testing.T) {
	b := newAPIBed(t, func(api *Server) { api.exposure = ExposeFull })
	_, port, _ := net.SplitHostPort(b.tcp)
	tests := []struct {
		host string
		want int
	}{
		{"127.0.0.1:" + port, 200},
		{"localhost:" + port, 200},
		{"LOCALHOST", 200},
		{"127.1.2.3:" + port, 200},
		{"[::1]:" + port, 200},
		{"evil.example:" + port, http.StatusMisdirectedRequest},
		{"localhost.evil.example", http.StatusMisdirectedRequest},
		{"10.1.2.3:" + port, http.StatusMisdirectedRequest},
	}
	for _, tt := range tests {
		for _, p := range []string{"/pods", "/healthz"} {
			conn, err := net.Dial("tcp", b.tcp)
			if err != nil {
				t.Fatal(err)
			}
			code, body := rawGet(t, conn, p, tt.host)
			conn.Close()
			if p == "/healthz" && tt.want == 200 {
				continue // its status is the health's, not the Host's
			}
			if code != tt.want {
				t.Errorf("Host %q %s: %d %s, want %d", tt.host, p, code, body, tt.want)
			}
		}
	}
	// The socket is beyond a browser's reach; clients name it anything.
	conn, err := net.Dial("unix", b.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if code, body := rawGet(t, conn, "/pods", "berth"); code != 200 {
		t.Errorf("socket with Host berth: %d %s", code, body)
	}
}

// TestAPIIdleConnectionsCannotHoldTheTCPPort: a user opening many
// connections and leaving them idle gets the oldest closed under him, so
// the number berth holds stays at the cap and a newcomer is served.
func TestAPIIdleConnectionsCannotHoldTheTCPPort(t *testing.T) {
	const max = 4
	b := newAPIBed(t, func(api *Server) { api.maxConns = max })
	var conns []net.Conn
	for range 5 * max {
		conn, err := net.Dial("tcp", b.tcp)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if code, _ := rawGet(t, conn, "/readyz", "localhost"); code == 0 {
			t.Fatal("no answer")
		}
		conns = append(conns, conn)
	}
	// Each newcomer evicted an idle one: all but max were closed by
	// berth, which the kernel already tells (EOF without waiting); the
	// deadline only ends the reads of the survivors.
	closed := 0
	for _, conn := range conns {
		conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		if _, err := conn.Read(make([]byte, 1)); errors.Is(err, io.EOF) {
			closed++
		}
	}
	if closed < len(conns)-max {
		t.Errorf("berth closed %d of %d idle connections, want at least %d (cap %d)", closed, len(conns), len(conns)-max, max)
	}
	if code, body := b.get(t, "/readyz", true); code == 0 {
		t.Errorf("newcomer: %d %s", code, body)
	}
	for _, l := range b.api.listeners {
		if n := l.(*limitListener).open(); n > max {
			t.Errorf("%s holds %d connections, cap %d", l.Addr(), n, max)
		}
	}
}

// TestAPIBusyTCPPortLeavesTheSocket: with every TCP slot serving a request,
// a newcomer on TCP is closed at once (not left hanging), and the socket,
// which has slots of its own, still answers root's CLI.
func TestAPIBusyTCPPortLeavesTheSocket(t *testing.T) {
	const max = 3
	// active hears of every connection the server starts serving a
	// request on, after the listener has counted it.
	active := make(chan struct{}, max)
	b := newAPIBed(t, func(api *Server) {
		api.maxConns, api.exposure = max, ExposeFull
		track := api.srv.ConnState
		api.srv.ConnState = func(c net.Conn, s http.ConnState) {
			track(c, s)
			if s == http.StateActive {
				active <- struct{}{}
			}
		}
	})
	// Hold the /pods builders, so /pods requests stay in flight.
	for range cap(b.api.podsBuilds) {
		b.api.podsBuilds <- struct{}{}
	}
	for range max {
		conn, err := net.Dial("tcp", b.tcp)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		fmt.Fprintf(conn, "GET /pods HTTP/1.1\r\nHost: localhost\r\n\r\n")
	}
	// Wait until the server has started serving all of them.
	for range max {
		select {
		case <-active:
		case <-time.After(10 * time.Second):
			t.Fatal("the /pods requests never became active")
		}
	}
	if !b.tcpActive(max) {
		t.Fatalf("the TCP listener does not count the %d requests active", max)
	}
	conn, err := net.Dial("tcp", b.tcp)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("TCP newcomer at the cap: read = %v, want the connection closed at once", err)
	}
	if code, body := b.get(t, "/healthz", false); code == 0 {
		t.Errorf("socket while TCP is full: %d %s", code, body)
	}
	for range cap(b.api.podsBuilds) {
		<-b.api.podsBuilds
	}
}

// tcpActive reports whether the TCP listener has n connections serving a
// request.
func (b *apiBed) tcpActive(n int) bool {
	l := b.api.listeners[0].(*limitListener)
	l.mu.Lock()
	defer l.mu.Unlock()
	active := 0
	for c := range l.conns {
		if c.state == http.StateActive {
			active++
		}
	}
	return active == n
}

func TestAPILogStreamCap(t *testing.T) {
	b := newAPIBed(t, func(api *Server) { api.logStreams = make(chan struct{}, 2) })
	pod, st := webPod()
	b.pods.status.Set(pod, st)
	b.writeLog(t, pod, "web", "2.log", "2026-11-21T12:00:00Z stdout F hello\n")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range 2 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://berth/pods/default/web-node1/log?follow=true", nil)
		resp, err := b.unix.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		line, err := bufio.NewReader(resp.Body).ReadString('\n')
		if resp.StatusCode != 200 || line != "hello\n" {
			t.Fatalf("stream %d: %d %q %v", i, resp.StatusCode, line, err)
		}
	}
	code, body := b.get(t, "/pods/default/web-node1/log", false)
	if code != http.StatusTooManyRequests || !strings.Contains(body, "too many container logs") {
		t.Errorf("third stream: %d %q, want 429", code, body)
	}
}

// TestAPILogFollowOutlivesTimeouts: the server's read and write timeouts
// bound ordinary requests; a log stream must outlast them.
func TestAPILogFollowOutlivesTimeouts(t *testing.T) {
	const timeout = 200 * time.Millisecond
	b := newAPIBed(t, func(api *Server) {
		api.srv.ReadHeaderTimeout, api.srv.ReadTimeout, api.srv.WriteTimeout = timeout, timeout, timeout
		api.writeGrace = 10 * time.Second
	})
	pod, st := webPod()
	b.pods.status.Set(pod, st)
	path := b.writeLog(t, pod, "web", "2.log", "2026-11-21T12:00:00Z stdout F one\n")
	resp, err := b.unix.Get("http://berth/pods/default/web-node1/log?follow=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	if line, err := r.ReadString('\n'); line != "one\n" {
		t.Fatalf("first line %q %v", line, err)
	}
	// Both deadlines pass while the container is quiet: a connection
	// opened after the stream's request, stalled inside its header, is
	// closed by the server once its own read deadline has passed.
	stalled, err := net.Dial("unix", b.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer stalled.Close()
	fmt.Fprintf(stalled, "GET /healthz HTTP/1.1\r\n")
	stalled.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, stalled); err != nil {
		t.Fatalf("the server did not close a stalled connection at its read timeout: %v", err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("2026-11-21T12:00:01Z stdout F two\n")
	f.Close()
	if line, err := r.ReadString('\n'); line != "two\n" {
		t.Fatalf("line after the timeouts: %q %v (the stream was cut)", line, err)
	}
}

func TestListenUnixDirectory(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, dir string)
		wantErr string
	}{
		{"created when missing", func(t *testing.T, dir string) {}, ""},
		{"existing, berth's, 0755", func(t *testing.T, dir string) { mkdir(t, dir, 0o755) }, ""},
		{"world-writable", func(t *testing.T, dir string) { mkdir(t, dir, 0o777) }, "not writable by group or others"},
		{"group-writable", func(t *testing.T, dir string) { mkdir(t, dir, 0o775) }, "not writable by group or others"},
		{"a symlink to berth's directory", func(t *testing.T, dir string) {
			mkdir(t, dir+".real", 0o755)
			if err := os.Symlink(dir+".real", dir); err != nil {
				t.Fatal(err)
			}
		}, "not a directory"},
		{"another user's", func(t *testing.T, dir string) {
			if os.Geteuid() != 0 {
				t.Skip("needs root to give the directory away")
			}
			mkdir(t, dir, 0o755)
			if err := os.Chown(dir, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, "owned by uid 65534"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "run", "berth")
			tt.prepare(t, dir)
			socket := filepath.Join(dir, "berth.sock")
			l, err := listenUnix(socket, 0)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("listenUnix: %v, want an error with %q", err, tt.wantErr)
				}
				if _, err := os.Lstat(socket); !os.IsNotExist(err) {
					t.Errorf("a socket was created in the refused directory: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			info, err := os.Lstat(socket)
			if err != nil || info.Mode().Type() != os.ModeSocket || info.Mode().Perm() != socketMode {
				t.Errorf("socket: %v %v, want a socket of mode %o", info.Mode(), err, socketMode)
			}
			if d, _ := os.Stat(dir); d.Mode().Perm()&0o022 != 0 {
				t.Errorf("directory mode %v", d.Mode())
			}
			entries, _ := os.ReadDir(dir)
			if len(entries) != 1 {
				t.Errorf("directory holds %v, want the socket only", entries)
			}
			if c, err := net.Dial("unix", socket); err != nil {
				t.Errorf("dial: %v", err)
			} else {
				c.Close()
			}
		})
	}
}

// TestListenUnixReplacesASymlink: whatever sits at the socket's path (a
// stale socket, a symlink to a file elsewhere) is replaced, never followed.
func TestListenUnixReplacesASymlink(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	mkdir(t, dir, 0o755)
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "berth.sock")
	if err := os.Symlink(victim, socket); err != nil {
		t.Fatal(err)
	}
	l, err := listenUnix(socket, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if info, _ := os.Stat(victim); info.Mode().Perm() != 0o600 {
		t.Errorf("the symlink's target got mode %v", info.Mode())
	}
	if info, _ := os.Lstat(socket); info.Mode().Type() != os.ModeSocket {
		t.Errorf("socket path is %v, want the socket", info.Mode())
	}
}

func mkdir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

// TestAPIPodsStreamsValidJSON: the streamed list decodes as the PodList
// it replaces, empty or not.
func TestAPIPodsStreamsValidJSON(t *testing.T) {
	b := newAPIBed(t)
	for n := range 3 {
		_, body := b.get(t, "/pods", false)
		var list v1.PodList
		if err := json.Unmarshal([]byte(body), &list); err != nil {
			t.Fatalf("%d pods: %v: %s", n, err, body)
		}
		if len(list.Items) != n+1 { // the rejected bad-node1, plus n
			t.Errorf("%d items, want %d", len(list.Items), n+1)
		}
		pod, st := webPod()
		pod.Name = fmt.Sprintf("web%d-node1", n)
		pod.UID = types.UID("uid-" + pod.Name)
		b.pods.status.Set(pod, st)
	}
}

// TestAPIHealthzPort: the kubelet's healthz port answers /healthz as the
// API does, nothing else, refuses foreign Host names and is capped as the
// TCP address.
func TestAPIHealthzPort(t *testing.T) {
	const max = 2
	b := newAPIBed(t, func(api *Server) {
		api.maxConns = max
		if err := api.ListenHealthz("127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
	})
	addr := b.api.healthL.Addr().String()
	get := func(path, host string) (int, string) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		return rawGet(t, conn, path, host)
	}
	if code, body := get("/healthz", "127.0.0.1"); code != http.StatusServiceUnavailable || !strings.Contains(body, "sync loop has not started") {
		t.Errorf("unhealthy: %d %s", code, body)
	}
	b.pods.setHealth(nil, nil)
	if code, body := get("/healthz", "127.0.0.1"); code != http.StatusOK || body != "ok" {
		t.Errorf("healthy: %d %s", code, body)
	}
	for _, p := range []string{"/readyz", "/pods", "/metrics", "/version"} {
		if code, _ := get(p, "localhost"); code != http.StatusNotFound {
			t.Errorf("%s on the healthz port: %d, want 404", p, code)
		}
	}
	if code, _ := get("/healthz", "evil.example"); code != http.StatusMisdirectedRequest {
		t.Errorf("foreign Host: %d, want %d", code, http.StatusMisdirectedRequest)
	}
	if _, ok := b.api.healthL.(*limitListener); !ok {
		t.Errorf("healthz listener %T is not capped", b.api.healthL)
	}
}
