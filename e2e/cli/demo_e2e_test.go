//go:build e2e

package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestDemo runs what `make demo` runs (examples/demo.sh) with a bed
// directory of its own: the examples' web server must come up on the host
// network, and Ctrl-C (SIGINT to the script's process group, as a terminal
// sends it) must stop berth and take the bed down.
func TestDemo(t *testing.T) {
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		t.Skip("no network namespaces")
	}
	bedDir, err := os.MkdirTemp("", "berth-demo-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(bedDir)
	cmd := exec.Command("sh", "examples/demo.sh")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "TESTBED_DIR="+bedDir, "BERTH="+berthBin, "BERTH_LISTEN="+freeAddr(t))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var out bytes.Buffer
	w := lockedWriter{mu: &sync.Mutex{}, w: &out}
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if t.Failed() {
			w.mu.Lock()
			t.Logf("demo output:\n%s", out.String())
			w.mu.Unlock()
		}
	}()
	interrupt := func() { syscall.Kill(-cmd.Process.Pid, syscall.SIGINT) }

	d := &daemon{socket: filepath.Join(bedDir, "berth", "berth.sock")}
	host, _ := os.Hostname()
	web := "web-host-" + strings.ToLower(host)
	deadline := time.Now().Add(4 * time.Minute)
	for {
		select {
		case err := <-exited:
			t.Fatalf("demo exited early: %v", err)
		default:
		}
		stdout, _, _ := berth(t, d, "pods")
		if f := row(stdout, web); len(f) > 2 && f[1] == "1/1" && f[2] == "Running" {
			break
		}
		if time.Now().After(deadline) {
			interrupt()
			t.Fatalf("%s not Running within 4m; berth pods:\n%s", web, stdout)
		}
		time.Sleep(time.Second)
	}
	interrupt()
	select {
	case <-exited:
	case <-time.After(2 * time.Minute):
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatal("demo did not stop within 2m of Ctrl-C")
	}
	if _, err := os.Stat(filepath.Join(bedDir, "bed.json")); !os.IsNotExist(err) {
		t.Errorf("the test bed is still there after Ctrl-C: %v", err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !strings.Contains(out.String(), "taking the test bed down") {
		t.Errorf("demo did not take the bed down")
	}
}
