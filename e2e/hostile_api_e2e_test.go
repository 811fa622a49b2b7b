//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// attackerEnv, when set (to "ADDR SOCKET PODS-API-SOCKET"), makes the test binary the
// attacker of TestHostileUserAPI instead of running tests (see TestMain).
const attackerEnv = "BERTH_E2E_ATTACKER"

// attackerConns is how many connections the attacker keeps open to the
// TCP port: the count that exhausted berth's descriptors before.
const attackerConns = 300

// TestHostileUserAPI runs berth on the real containerd and attacks its
// local API as user nobody, the way any local user can: hundreds of idle
// keep-alive connections re-opened as berth closes them, pod data and
// events over TCP, a foreign Host header, the socket, the kubelet's pods
// API socket. Each probe must be
// refused, and while the connections are held berth must stay healthy: a
// manifest dropped then starts, `berth pods` over the socket answers, and
// /healthz answers on TCP.
func TestHostileUserAPI(t *testing.T) {
	b := newBerth(t, berthOptions{noStart: true})
	// The socket's own mode must keep nobody out, not the test's private
	// directory: open the way to it (the directory stays root's and not
	// writable by others, as berth requires).
	if err := os.Chmod(b.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b.start()
	b.waitReady()
	b.writeManifest("before.yaml", podManifest(sleeper("before")))
	b.waitRunning(podName("before"))

	// nobody must be able to run the attacker: a copy of this test
	// binary outside go's private build directory.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(b.dir, "attacker")
	copyFile(t, self, bin, 0o755)
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), attackerEnv+"="+b.addr+" "+b.socket+" "+b.podsAPISocket())
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()

	// The attacker reports each probe as NAME<tab>ANSWER, then "holding" once its
	// connections are open; it keeps re-opening them until stdin closes.
	results := map[string]string{}
	sc := bufio.NewScanner(stdout)
	for sc.Scan() && sc.Text() != "holding" {
		k, v, _ := strings.Cut(sc.Text(), "\t")
		results[k] = v
		t.Logf("attacker: %s", sc.Text())
	}
	go io.Copy(io.Discard, stdout)
	for _, probe := range []struct{ name, want string }{
		{"tcp /pods", "403"},
		{"tcp /pods/default/" + podName("before"), "403"},
		{"tcp /pods/default/" + podName("before") + "/events", "403"},
		{"tcp /pods/default/" + podName("before") + "/log?follow=true", "403"},
		{"tcp /problems", "403"},
		{"tcp /pods?watch=true", "403"},
		{"tcp /pods/default/" + podName("before") + "?watch=true", "403"},
		{"tcp /events", "403"},
		{"tcp /events?watch=true", "403"},
		{"tcp /version", "200"},
		{"tcp /healthz with Host evil.example", "421"},
		{"tcp /version with Host evil.example", "421"},
		{"socket", "permission denied"},
		{"pods API socket", "permission denied"},
	} {
		if got := results[probe.name]; !strings.Contains(got, probe.want) {
			t.Errorf("attacker's %s: %q, want %q", probe.name, got, probe.want)
		}
	}
	if results["opened"] == "" {
		t.Fatalf("the attacker did not report its connections: %v", results)
	}

	// Under attack: berth's descriptors stay bounded...
	if n := openFDs(t, b); n > attackerConns {
		t.Errorf("berth holds %d descriptors with the attacker's %d connections", n, attackerConns)
	} else {
		t.Logf("berth holds %d descriptors", n)
	}
	// ...it reads its manifest directory and starts a new pod...
	b.writeManifest("during.yaml", podManifest(sleeper("during")))
	b.waitRunning(podName("during"))
	// ...root's CLI gets its answer over the socket...
	started := time.Now()
	out, err := exec.Command(berthBin, "pods", "--socket", b.socket).CombinedOutput()
	if err != nil || !strings.Contains(string(out), podName("during")) {
		t.Errorf("berth pods under attack: %v: %s", err, out)
	}
	t.Logf("berth pods answered in %s under attack", time.Since(started).Round(time.Millisecond))
	// ...and /healthz answers on the TCP port the attacker crowds.
	if code, body := b.status("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz under attack: %d %s", code, body)
	}

	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Errorf("attacker: %v", err)
	}
	b.writeManifest("after.yaml", podManifest(sleeper("after")))
	b.waitRunning(podName("after"))
	if code, body := b.status("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz after the attack: %d %s", code, body)
	}
}

// attack is the attacker process (running as nobody): it probes, reports
// each answer on stdout, opens attackerConns keep-alive connections and
// keeps them open (re-opening those berth closes) until stdin closes.
func attack(addr, socket, podsAPISocket string) int {
	probe := func(path, host string) string {
		conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			return err.Error()
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(30 * time.Second))
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, host)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		return resp.Status
	}
	pod := "before-" + nodeName
	for _, p := range []string{"/pods", "/pods/default/" + pod, "/pods/default/" + pod + "/events", "/pods/default/" + pod + "/log?follow=true", "/problems",
		"/pods?watch=true", "/pods/default/" + pod + "?watch=true", "/events", "/events?watch=true", "/version"} {
		fmt.Printf("tcp %s\t%s\n", p, probe(p, "localhost"))
	}
	fmt.Printf("tcp /healthz with Host evil.example\t%s\n", probe("/healthz", "evil.example"))
	fmt.Printf("tcp /version with Host evil.example\t%s\n", probe("/version", "evil.example"))
	for name, path := range map[string]string{"socket": socket, "pods API socket": podsAPISocket} {
		if c, err := net.Dial("unix", path); err != nil {
			fmt.Printf("%s\t%v\n", name, err)
		} else {
			c.Close()
			fmt.Printf("%s\tconnected\n", name)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	opened := 0
	for range attackerConns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				hold(ctx, addr, func() { mu.Lock(); opened++; mu.Unlock() })
				select {
				case <-ctx.Done():
				case <-time.After(time.Second):
				}
			}
		}()
	}
	// Report once the first round of connections is open.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		mu.Lock()
		n := opened
		mu.Unlock()
		if n >= attackerConns || time.Now().After(deadline) {
			fmt.Printf("opened\t%d\n", n)
			break
		}
	}
	fmt.Println("holding")
	io.Copy(io.Discard, os.Stdin)
	cancel()
	wg.Wait()
	return 0
}

// hold opens one keep-alive connection, sends one request, and leaves it
// idle until berth closes it or ctx ends.
func hold(ctx context.Context, addr string, opened func()) {
	conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	opened()
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
	r := bufio.NewReader(conn)
	if resp, err := http.ReadResponse(r, nil); err == nil {
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	// Idle: block until berth closes it.
	r.ReadByte()
}

// openFDs counts berth's open descriptors.
func openFDs(t *testing.T, b *berth) int {
	t.Helper()
	b.mu.Lock()
	pid := b.cmd.Process.Pid
	b.mu.Unlock()
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

func copyFile(t *testing.T, from, to string, mode os.FileMode) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, mode); err != nil {
		t.Fatal(err)
	}
}
