//go:build e2e

package cli

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berth-agent/berth/internal/doctor"
)

// doctorReport runs `berth doctor -o json` with args and returns its
// parsed report by check, and its exit status, which must be
// doctor.Worst's.
func doctorReport(t *testing.T, args ...string) map[string]doctor.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, berthBin, append([]string{"doctor", "-o", "json"}, args...)...)
	out, err := cmd.Output()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("berth doctor: %v", err)
	}
	var report doctor.Report
	if err := json.Unmarshal(out, &report); err != nil {
		t.Fatalf("berth doctor -o json: %v\n%s", err, out)
	}
	byCheck := map[string]doctor.Result{}
	for _, r := range report.Checks {
		byCheck[r.Check] = r
		t.Logf("%-4s %-14s %s", r.Status, r.Check, r.Message)
	}
	if want := doctor.Worst(report.Checks); code != want || report.Status != doctor.WorstStatus(report.Checks) {
		t.Errorf("exit %d, status %s; want exit %d and the worst status", code, report.Status, want)
	}
	return byCheck
}

// wantCheck fails unless check came out status with every part in its
// message.
func wantCheck(t *testing.T, byCheck map[string]doctor.Result, check string, status doctor.Status, parts ...string) {
	t.Helper()
	r, ok := byCheck[check]
	if !ok {
		t.Errorf("no %s line", check)
		return
	}
	if r.Status != status {
		t.Errorf("%s: %s %q (fix %q), want %s", check, r.Status, r.Message, r.Fix, status)
	}
	for _, p := range parts {
		if !strings.Contains(r.Message, p) {
			t.Errorf("%s: %q lacks %q", check, r.Message, p)
		}
	}
}

// TestDoctor runs `berth doctor --run` with berth run's settings from a
// --config file on the bed's containerd: before berth runs, the runtime,
// CNI, pause image, manifest directory and pod network are OK, its socket
// is a WARN (berth not running); once berth runs with those settings, the
// socket is OK and that berth is the one doctor checks, not another agent
// on the directory.
func TestDoctor(t *testing.T) {
	dir, err := os.MkdirTemp("", "berth-doctor-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	manifests := filepath.Join(dir, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(dir, "run", "berth.sock")
	cfg := filepath.Join(dir, "berth.yaml")
	config := "staticPodPath: " + manifests + "\ncontainerRuntimeEndpoint: " + bed.Endpoint + "\nrootDir: " + filepath.Join(dir, "root") +
		"\npodLogsDir: " + filepath.Join(dir, "pods") + "\nsocket: " + socket + "\n"
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}

	args := []string{"--run", "--config", cfg}
	if bed.ContainerdAtLeast(2, 0) {
		// containerd 2 does not report its sandbox image: name it.
		args = append(args, "--pause-image", bed.PauseImage)
	}
	before := doctorReport(t, args...)
	wantCheck(t, before, "runtime", doctor.OK, "at "+bed.Endpoint+" is ready")
	wantCheck(t, before, "cni", doctor.OK, `network "berth-testbed-`)
	wantCheck(t, before, "pause-image", doctor.OK, bed.PauseImage+" is present")
	wantCheck(t, before, "manifest-dir", doctor.OK, manifests)
	wantCheck(t, before, "other-agents", doctor.OK, "no kubelet or other berth runs static pods from "+manifests)
	wantCheck(t, before, "socket", doctor.Warn, "no socket at "+socket)
	wantCheck(t, before, "pod-network", doctor.OK, "on the pod network", "and was removed")

	// startDaemon's own directories, given after --config, win over it,
	// as flags do: this berth runs with the config file's manifests and
	// socket.
	d := startDaemon(t, nil, "--config", cfg, "--pod-manifest-path", manifests, "--socket", socket)
	d.socket = socket
	waitFor(t, "berth to answer on "+socket, func() (bool, string) {
		out, errb, code := berth(t, d, "pods")
		return code == 0, out + errb
	})
	after := doctorReport(t, "--config", cfg)
	pid := strconv.Itoa(d.cmd.Process.Pid)
	wantCheck(t, after, "other-agents", doctor.OK, "berth (PID "+pid+"), the one serving the socket, runs the static pods of "+manifests)
	wantCheck(t, after, "socket", doctor.OK, "socket "+socket+" is root's")
	if _, ok := after["pod-network"]; ok {
		t.Errorf("a pod-network line without --run")
	}
}

// TestRunRefusesAnotherAgent: `berth run` exits 1, before it makes its
// socket, when a kubelet runs the static pods of its manifest directory,
// with a message naming the kubelet's PID, the directory and the fix; a
// second `berth run` beside a running one is refused the same way; once
// the kubelet is gone, berth starts and runs the directory's pod.
func TestRunRefusesAnotherAgent(t *testing.T) {
	dir, err := os.MkdirTemp("", "berth-refuse-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	manifests := filepath.Join(dir, "manifests")
	if err := os.Mkdir(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	// sh named kubelet waits on its stdin; --pod-manifest-path DIR are
	// its $0 and $1, which only its command line shows.
	kubelet := exec.Command("/bin/sh", "-c", "read _; exit 0", "--pod-manifest-path", manifests)
	kubelet.Args[0] = "kubelet"
	stdin, err := kubelet.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := kubelet.Start(); err != nil {
		t.Fatal(err)
	}
	stopKubelet := func() {
		stdin.Close()
		if err := kubelet.Wait(); err != nil {
			t.Errorf("the fake kubelet: %v", err)
		}
	}
	kubeletRunning := true
	t.Cleanup(func() {
		if kubeletRunning {
			stopKubelet()
		}
	})

	socket := filepath.Join(dir, "berth.sock")
	code, log := runRefused(t, "--pod-manifest-path", manifests, "--container-runtime-endpoint", bed.Endpoint,
		"--root-dir", filepath.Join(dir, "root"), "--pod-logs-dir", filepath.Join(dir, "pods"), "--listen", "", "--socket", socket)
	want := "kubelet (PID " + strconv.Itoa(kubelet.Process.Pid) + ") runs the static pods of " + manifests
	if code != 1 || !strings.Contains(log, want) || !strings.Contains(log, "stop the kubelet or point one of them elsewhere") {
		t.Errorf("berth run beside a kubelet on its directory: exit %d, want 1 and %q with the fix:\n%s", code, want, log)
	}
	if _, err := os.Lstat(socket); err == nil {
		t.Errorf("the refused berth made its socket %s", socket)
	}

	stopKubelet()
	kubeletRunning = false
	d := startDaemon(t, nil, "--pod-manifest-path", manifests)
	t.Cleanup(func() { os.Remove(filepath.Join(manifests, "ticker.yaml")) })
	if err := os.WriteFile(filepath.Join(manifests, "ticker.yaml"), []byte(tickerPod), 0o644); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "ticker Running once the kubelet is gone", func() (bool, string) {
		out, errb, _ := berth(t, d, "pods")
		f := row(out, "ticker-"+nodeName)
		return len(f) >= 3 && f[2] == "Running", out + errb
	})

	code, log = runRefused(t, "--pod-manifest-path", manifests, "--container-runtime-endpoint", bed.Endpoint,
		"--root-dir", filepath.Join(dir, "root2"), "--pod-logs-dir", filepath.Join(dir, "pods2"), "--listen", "", "--socket", filepath.Join(dir, "second.sock"))
	want = "berth (PID " + strconv.Itoa(d.cmd.Process.Pid) + ") runs the static pods of " + manifests
	if code != 1 || !strings.Contains(log, want) || !strings.Contains(log, "stop the other berth or point one of them elsewhere") {
		t.Errorf("a second berth run on the directory: exit %d, want 1 and %q with the fix:\n%s", code, want, log)
	}
}

// runRefused runs `berth run` with args, which must exit by itself, and
// returns its exit status and log.
func runRefused(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, berthBin, append([]string{"run"}, args...)...).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatalf("berth run: %v\n%s", err, out)
	}
	return 0, string(out)
}
