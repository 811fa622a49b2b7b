//go:build e2e

package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const twoContainerPod = `apiVersion: v1
kind: Pod
metadata:
  name: duo
  labels: {app: duo, tier: edge}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: first
    image: busybox:1.36
    command: ["sh", "-c", "echo first says hi; sleep 3600"]
  - name: second
    image: busybox:1.36
    command: ["sh", "-c", "echo second says hi; sleep 3600"]
`

// TestKubectlOutputs drives what kubectl users type against a real berth:
// -l, -o name and jsonpath, --no-headers, -A's NAMESPACE column, manifest
// problems in -o json and as warnings, and logs --all-containers --prefix.
func TestKubectlOutputs(t *testing.T) {
	d := startDaemon(t, map[string]string{"duo.yaml": twoContainerPod, "ticker.yaml": tickerPod,
		"mangled.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n"})
	duo := "duo-" + nodeName
	waitFor(t, "duo Running 2/2 with both containers' first line logged", func() (bool, string) {
		out, errb, _ := berth(t, d, "pods")
		f := row(out, duo)
		logs, lerr, _ := berth(t, d, "logs", "duo", "--all-containers")
		return len(f) >= 3 && f[1] == "2/2" && f[2] == "Running" && strings.Contains(logs, "second says hi"), out + errb + logs + lerr
	})

	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"pods", "-l", "app=duo", "-o", "name"}, "pod/" + duo + "\n"},
		{[]string{"pods", "-l", "tier in (edge),app!=ticker", "-o", "jsonpath={.items[*].status.phase}"}, "Running"},
		{[]string{"pods", "duo", "-o", "jsonpath={.spec.containers[1].name}"}, "second"},
		{[]string{"logs", "duo", "--all-containers", "--prefix"}, "[pod/" + duo + "/first] first says hi\n[pod/" + duo + "/second] second says hi\n"},
	} {
		if out, errb, code := berth(t, d, tt.args...); code != 0 || out != tt.want {
			t.Errorf("berth %s: exit %d stdout %q, want %q (stderr %q)", strings.Join(tt.args, " "), code, out, tt.want, errb)
		}
	}
	// --no-headers: rows only; -A: NAMESPACE first.
	if out, _, _ := berth(t, d, "pods", "--no-headers", "-l", "app=duo"); !strings.HasPrefix(out, duo+" ") {
		t.Errorf("berth pods --no-headers: %q", out)
	}
	if out, _, _ := berth(t, d, "pods", "-A"); !strings.HasPrefix(out, "NAMESPACE ") || !strings.Contains(out, "\ndefault ") {
		t.Errorf("berth pods -A:\n%s", out)
	}
	if out, _, _ := berth(t, d, "pods"); !strings.HasPrefix(out, "NAME ") {
		t.Errorf("berth pods:\n%s", out)
	}
	if _, _, code := berth(t, d, "pods", "-l", "app in (duo"); code != 2 {
		t.Errorf("a bad selector: exit %d, want 2", code)
	}
	// The mangled manifest is a problem of -o json's list, which jq reads
	// as .problems[].error, and nothing goes to stderr.
	out, errb, code := berth(t, d, "pods", "-o", "json")
	var doc struct {
		Kind     string `json:"kind"`
		Problems []struct {
			Error string `json:"error"`
		} `json:"problems"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != 0 || errb != "" || doc.Kind != "List" ||
		len(doc.Problems) != 1 || !strings.HasPrefix(doc.Problems[0].Error, filepath.Join(d.manifests, "mangled.yaml")+":") {
		t.Errorf("berth pods -o json: %v, exit %d, stderr %q, problems %+v", err, code, errb, doc.Problems)
	}
	if !strings.HasPrefix(out, "{\n  \"apiVersion\": \"v1\",\n  \"kind\": \"List\",") {
		t.Errorf("berth pods -o json is not indented by two spaces: %.60q", out)
	}
}

// lineReader runs a long-lived berth command and hands its stdout lines
// over a channel.
type lineReader struct {
	cmd   *exec.Cmd
	lines chan string
}

func startLines(t *testing.T, d *daemon, args ...string) *lineReader {
	t.Helper()
	cmd := exec.Command(berthBin, args...)
	cmd.Env = append(os.Environ(), "BERTH_SOCKET="+d.socket)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	var mu sync.Mutex
	cmd.Stderr = lockedWriter{&mu, &errb}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &lineReader{cmd: cmd, lines: make(chan string, 1024)}
	go func() {
		defer close(r.lines)
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			r.lines <- s.Text()
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		cmd.Wait()
		if t.Failed() {
			mu.Lock()
			t.Logf("berth %s stderr:\n%s", strings.Join(args, " "), errb.String())
			mu.Unlock()
		}
	})
	return r
}

// await reads lines until one satisfies match; the lines read go to seen.
func (r *lineReader) await(t *testing.T, what string, seen *[]string, match func(f []string) bool) {
	t.Helper()
	timeout := time.After(waitTimeout)
	for {
		select {
		case l, ok := <-r.lines:
			if !ok {
				t.Fatalf("the command ended before %s; it printed:\n%s", what, strings.Join(*seen, "\n"))
			}
			*seen = append(*seen, l)
			if match(strings.Fields(l)) {
				return
			}
		case <-timeout:
			t.Fatalf("timed out waiting for %s; printed:\n%s", what, strings.Join(*seen, "\n"))
		}
	}
}

// TestPodsWatch: `berth pods -w` prints a row as each pod changes, from
// the daemon's watch: a manifest added shows an ADDED row, removed a
// DELETED one; Ctrl-C ends it with exit 0.
func TestPodsWatch(t *testing.T) {
	d := startDaemon(t, map[string]string{"ticker.yaml": tickerPod})
	waitFor(t, "ticker Running", func() (bool, string) {
		out, errb, _ := berth(t, d, "pods")
		f := row(out, "ticker-"+nodeName)
		return len(f) >= 3 && f[2] == "Running", out + errb
	})
	w := startLines(t, d, "pods", "-w", "--output-watch-events")
	var seen []string
	w.await(t, "the header", &seen, func(f []string) bool { return len(f) > 2 && f[0] == "EVENT" && f[1] == "NAME" })
	w.await(t, "ticker listed", &seen, func(f []string) bool { return len(f) > 2 && f[0] == "ADDED" && f[1] == "ticker-"+nodeName })

	added := strings.ReplaceAll(tickerPod, "name: ticker", "name: added")
	d.write(t, "added.yaml", added)
	w.await(t, "added's ADDED row", &seen, func(f []string) bool { return len(f) > 2 && f[0] == "ADDED" && f[1] == "added-"+nodeName })
	if err := os.Remove(filepath.Join(d.manifests, "added.yaml")); err != nil {
		t.Fatal(err)
	}
	w.await(t, "added's DELETED row", &seen, func(f []string) bool { return len(f) > 2 && f[0] == "DELETED" && f[1] == "added-"+nodeName })
	for i, l := range seen {
		// seen[1] is ticker's row of the list.
		if f := strings.Fields(l); len(f) > 1 && f[0] == "ADDED" && f[1] == "ticker-"+nodeName && i != 1 {
			t.Errorf("ticker listed twice:\n%s", strings.Join(seen, "\n"))
		}
	}
	w.cmd.Process.Signal(syscall.SIGINT)
	if err := w.cmd.Wait(); err != nil {
		t.Errorf("berth pods -w after Ctrl-C: %v, want exit 0", err)
	}
}

// TestEventsAfterRestart: the events of a pod outlive the daemon: after
// berth restarts, `berth events` still shows the ticker's Started, which
// the adopted container does not produce again; -o json is a v1 List.
func TestEventsAfterRestart(t *testing.T) {
	d := startDaemon(t, map[string]string{"ticker.yaml": tickerPod})
	started := func() (bool, string) {
		out, errb, code := berth(t, d, "events", "ticker")
		return code == 0 && strings.Contains(out, "Started") && strings.Contains(out, "pod/ticker-"+nodeName), out + errb
	}
	waitFor(t, "ticker's Started event", started)
	d.restart(t)
	waitFor(t, "the restarted berth to list ticker Running", func() (bool, string) {
		out, errb, _ := berth(t, d, "pods")
		f := row(out, "ticker-"+nodeName)
		return len(f) >= 3 && f[2] == "Running", out + errb
	})
	if ok, out := started(); !ok {
		t.Errorf("after a restart, berth events ticker lacks the Started event:\n%s", out)
	}
	out, errb, code := berth(t, d, "events", "-o", "json")
	var list struct {
		Kind  string `json:"kind"`
		Items []struct {
			Reason string `json:"reason"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil || code != 0 || list.Kind != "List" || len(list.Items) == 0 {
		t.Errorf("berth events -o json: %v, exit %d, stderr %q:\n%s", err, code, errb, out)
	}
}

// TestLogsSince: --since and --since-time keep the lines at or after
// their time, which --timestamps shows.
func TestLogsSince(t *testing.T) {
	d := startDaemon(t, map[string]string{"ticker.yaml": tickerPod})
	stamps := func(out string) []time.Time {
		var ts []time.Time
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			s, _, _ := strings.Cut(l, " ")
			if at, err := time.Parse(time.RFC3339Nano, s); err == nil {
				ts = append(ts, at)
			}
		}
		return ts
	}
	var all []time.Time
	waitFor(t, "ticker's log to span 4 seconds", func() (bool, string) {
		out, errb, _ := berth(t, d, "logs", "ticker", "--timestamps")
		all = stamps(out)
		return len(all) > 1 && all[len(all)-1].Sub(all[0]) > 4*time.Second, out + errb
	})
	// --since-time: a whole second after the first line.
	cutoff := all[0].Truncate(time.Second).Add(2 * time.Second)
	out, errb, code := berth(t, d, "logs", "ticker", "--timestamps", "--since-time", cutoff.Format(time.RFC3339))
	got := stamps(out)
	if code != 0 || len(got) == 0 || got[0].Before(cutoff) || got[0].After(all[len(all)-1]) {
		t.Errorf("--since-time %s: exit %d, stderr %q, first line at %v (log from %v)", cutoff.Format(time.RFC3339), code, errb, got, all[0])
	}
	// --since: every line is newer than the request less the duration.
	waitFor(t, "lines of the last 2 seconds", func() (bool, string) {
		asked := time.Now()
		out, errb, code := berth(t, d, "logs", "ticker", "--timestamps", "--since", "2s")
		got := stamps(out)
		for _, at := range got {
			if at.Before(asked.Add(-2 * time.Second).Truncate(time.Second)) {
				t.Fatalf("--since 2s printed a line of %v, asked at %v:\n%s", at, asked, out)
			}
		}
		return code == 0 && len(got) > 0, out + errb
	})
	if _, errb, code := berth(t, d, "logs", "ticker", "--since", "1s", "--since-time", cutoff.Format(time.RFC3339)); code != 2 {
		t.Errorf("--since with --since-time: exit %d, stderr %q, want 2", code, errb)
	}
}

// TestVersionShowsDaemon: berth version prints the daemon's version
// beside its own; --client needs no daemon; no daemon is exit 1.
func TestVersionShowsDaemon(t *testing.T) {
	d := startDaemon(t, nil)
	waitFor(t, "the daemon's socket", func() (bool, string) {
		_, errb, code := berth(t, d, "pods")
		return code == 0, errb
	})
	out, errb, code := berth(t, d, "version")
	client, server, _ := strings.Cut(out, "\n")
	if code != 0 || !strings.HasPrefix(client, "Client Version: ") || strings.TrimSpace(server) != "Server Version: "+strings.TrimPrefix(client, "Client Version: ") {
		t.Errorf("berth version: exit %d, stderr %q:\n%s", code, errb, out)
	}
	out, _, _ = berth(t, d, "version", "-o", "json")
	var doc struct {
		Client struct{ GitVersion, Platform string }  `json:"clientVersion"`
		Server *struct{ GitVersion, Platform string } `json:"serverVersion"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.Server == nil || doc.Server.GitVersion != doc.Client.GitVersion || doc.Server.Platform == "" {
		t.Errorf("berth version -o json: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	missing := filepath.Join(t.TempDir(), "missing.sock")
	if err := exec.CommandContext(ctx, berthBin, "version", "--client", "--socket", missing).Run(); err != nil {
		t.Errorf("berth version --client without a daemon: %v", err)
	}
	if err := exec.CommandContext(ctx, berthBin, "version", "--socket", missing).Run(); err == nil {
		t.Errorf("berth version without a daemon: exit 0, want 1")
	}
}
