//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/version"
)

// apiStream is a streamed answer (a watch, a followed log) read line by
// line on its own goroutine, so a test waits on lines with a deadline.
type apiStream struct {
	t      *testing.T
	lines  chan string
	cancel context.CancelFunc
}

// openStream GETs path from c (base "http://berth" for the socket) and
// streams the answer's lines; the test fails unless it is 200.
func openStream(t *testing.T, c *http.Client, base, path string) *apiStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The harness's clients time whole requests out; a stream lasts.
	streaming := &http.Client{Transport: c.Transport}
	resp, err := streaming.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("GET %s: %v", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		cancel()
		t.Fatalf("GET %s: %s", path, resp.Status)
	}
	s := &apiStream{t: t, lines: make(chan string, 1024), cancel: cancel}
	go func() {
		defer resp.Body.Close()
		defer close(s.lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
	}()
	t.Cleanup(cancel)
	return s
}

// waitLine waits for a line for which match is true and returns it.
func (s *apiStream) waitLine(what string, match func(string) bool) string {
	s.t.Helper()
	deadline := time.After(waitTimeout)
	var last string
	for {
		select {
		case line, ok := <-s.lines:
			if !ok {
				s.t.Fatalf("stream ended waiting for %s; last line %.300s", what, last)
			}
			if match(line) {
				return line
			}
			last = line
		case <-deadline:
			s.t.Fatalf("no %s within %s; last line %.300s", what, waitTimeout, last)
		}
	}
}

// podEvent is one watch event of pods.
type podEvent struct {
	Type   string `json:"type"`
	Object v1.Pod `json:"object"`
}

// waitPodEvent waits for a watch event of type typ ("" for ADDED or
// MODIFIED) whose pod satisfies cond.
func (s *apiStream) waitPodEvent(what, typ string, cond func(*v1.Pod) bool) *v1.Pod {
	s.t.Helper()
	var ev podEvent
	s.waitLine(what, func(line string) bool {
		ev = podEvent{}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			s.t.Fatalf("watch line %.300q: %v", line, err)
		}
		return (ev.Type == typ || typ == "" && ev.Type != "DELETED") && cond(&ev.Object)
	})
	return &ev.Object
}

// TestAPIVersionServed: /version answers on the socket and on TCP (under
// the default --listen-pods=none) with the version `berth version
// --client` prints, the Go version and the platform.
func TestAPIVersionServed(t *testing.T) {
	b := newBerth(t, berthOptions{})
	b.waitReady()
	out, err := exec.Command(berthBin, "version", "--client").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, via := range []struct {
		name string
		get  func() (int, []byte, error)
	}{
		{"socket", func() (int, []byte, error) { return b.getUnix("/version") }},
		{"tcp", func() (int, []byte, error) { return getFrom(b.http, "http://"+b.addr+"/version") }},
	} {
		code, body, err := via.get()
		var info version.Info
		if err != nil || code != http.StatusOK || json.Unmarshal(body, &info) != nil {
			t.Fatalf("%s /version: %d %s %v", via.name, code, body, err)
		}
		if info.GitVersion == "" || !strings.HasPrefix(string(out), "Client Version: "+info.GitVersion+" (") || info.Platform == "" ||
			!strings.Contains(string(out), info.GoVersion) || !strings.Contains(string(out), info.Platform) {
			t.Errorf("%s /version %+v, berth version says %q", via.name, info, out)
		}
	}
}

// TestAPIWatchPods runs berth on the real runtime and watches /pods on
// the socket while a pod starts, a manifest is refused and the pod's
// manifest is removed: ADDED, MODIFIED up to Running, the refused
// manifest as a Failed pod, DELETED. A watch of one pod sees that pod
// only. Over TCP under --listen-pods=redacted the watch serves redacted
// pods.
func TestAPIWatchPods(t *testing.T) {
	b := newBerth(t, berthOptions{args: []string{"--listen-pods", "redacted"}})
	b.waitReady()
	all := openStream(t, b.unixHTTP, "http://berth", "/pods?watch=true")
	one := openStream(t, b.unixHTTP, "http://berth", "/pods/default/"+podName("watched")+"?watch=true")
	tcp := openStream(t, b.http, "http://"+b.addr, "/pods?watch=true")

	pod := sleeper("watched")
	pod.Spec.Containers[0].Env = []v1.EnvVar{{Name: "TOKEN", Value: "WATCHSECRET"}}
	b.writeManifest("watched.yaml", podManifest(pod))
	named := func(name string) func(*v1.Pod) bool {
		return func(p *v1.Pod) bool { return p.Name == podName(name) || p.Name == name }
	}
	all.waitPodEvent("ADDED of the pod", "ADDED", named("watched"))
	running := func(p *v1.Pod) bool { return p.Name == podName("watched") && podReady(p) }
	got := all.waitPodEvent("the pod Ready", "", running)
	if got.Status.Phase != v1.PodRunning || got.Kind != "Pod" {
		t.Errorf("Ready pod in phase %s, kind %q", got.Status.Phase, got.Kind)
	}
	one.waitPodEvent("one pod's watch: Ready", "", running)
	line := tcp.waitLine("TCP watch: the pod Ready", func(l string) bool {
		return strings.Contains(l, `"name":"`+podName("watched")+`"`) && strings.Contains(l, `"ready":true`)
	})
	if strings.Contains(line, "WATCHSECRET") || !strings.Contains(line, `"TOKEN"`) {
		t.Errorf("TCP watch under redacted: %.500s", line)
	}

	b.writeManifest("refused.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: refused\nspec:\n  containers:\n  - name: c\n")
	refused := all.waitPodEvent("the refused manifest", "ADDED", named("refused"))
	if refused.Status.Phase != v1.PodFailed || !strings.Contains(refused.Status.Message, "refused.yaml") {
		t.Errorf("refused manifest shown as %s %q", refused.Status.Phase, refused.Status.Message)
	}

	b.removeManifest("watched.yaml")
	gone := all.waitPodEvent("DELETED of the pod", "DELETED", named("watched"))
	if gone.UID != got.UID {
		t.Errorf("DELETED UID %s, want %s", gone.UID, got.UID)
	}
	one.waitPodEvent("one pod's watch: DELETED", "DELETED", named("watched"))
}

// TestAPIEventsKeptAcrossRestart: a pod's events are served by /events
// and still there after berth restarts (the pod kept running, adopted);
// an events watch shows them as ADDED. A corrupt events file is ignored
// with a warning and replaced, and berth runs on.
func TestAPIEventsKeptAcrossRestart(t *testing.T) {
	b := newBerth(t, berthOptions{})
	b.waitReady()
	b.writeManifest("ev.yaml", podManifest(sleeper("ev")))
	b.waitRunning(podName("ev"))
	filter := "/events?pod=" + url.QueryEscape("default/"+podName("ev"))
	started := func() (bool, string) {
		code, body, err := b.getUnix(filter)
		if err != nil || code != http.StatusOK {
			return false, fmt.Sprintf("%d %s %v", code, body, err)
		}
		var list v1.EventList
		if err := json.Unmarshal(body, &list); err != nil {
			return false, err.Error()
		}
		for _, e := range list.Items {
			if e.Reason == "Started" && e.InvolvedObject.Name == podName("ev") {
				return true, ""
			}
		}
		return false, string(body)
	}
	b.waitFor("a Started event", waitTimeout, started)
	b.stop()
	path := filepath.Join(b.root, "events", "events.json")
	if info, err := os.Stat(path); err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("events file: %v %v", info, err)
	}

	b.start()
	b.waitReady()
	if ok, body := started(); !ok {
		t.Fatalf("after a restart, no Started event: %s", body)
	}
	w := openStream(t, b.unixHTTP, "http://berth", "/events?watch=true")
	w.waitLine("the kept Started event in the watch", func(l string) bool {
		return strings.HasPrefix(l, `{"type":"ADDED"`) && strings.Contains(l, `"reason":"Started"`)
	})
	b.stop()

	if err := os.WriteFile(path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	b.start()
	b.waitReady()
	b.waitFor("the warning about the corrupt file", waitTimeout, func() (bool, string) {
		return b.logContains("ignoring the pod events kept by an earlier run"), ""
	})
	b.waitFor("the corrupt file replaced", waitTimeout, func() (bool, string) {
		data, err := os.ReadFile(path)
		if err != nil {
			return false, err.Error()
		}
		return json.Valid(data), string(data)
	})
	if code, _ := b.status("/healthz"); code != http.StatusOK {
		t.Errorf("berth unhealthy after a corrupt events file: %d", code)
	}
}

// TestAPILogsSince: the log endpoint leaves out the records before
// sinceTime or sinceSeconds, by the runtime's timestamps, also while
// following; both at once, or a bad value, is a 400 naming it.
func TestAPILogsSince(t *testing.T) {
	b := newBerth(t, berthOptions{})
	b.waitReady()
	// "two" is written a second after "one": its runtime timestamp is
	// later, whatever the machine's load.
	b.writeManifest("since.yaml", podManifest(newPod("since", shContainer("main", "echo one; sleep 1; echo two; "+sleepForever))))
	b.waitRunning(podName("since"))
	logPath := "/pods/default/" + podName("since") + "/log"
	var stamped []string
	b.waitFor("both lines logged", waitTimeout, func() (bool, string) {
		code, body, err := b.getUnix(logPath + "?timestamps=true")
		if err != nil || code != http.StatusOK {
			return false, fmt.Sprintf("%d %s %v", code, body, err)
		}
		stamped = strings.Split(strings.TrimSpace(string(body)), "\n")
		return len(stamped) == 2, string(body)
	})
	at, _, _ := strings.Cut(stamped[1], " ")
	tests := []struct {
		query    string
		wantCode int
		want     string
	}{
		{"sinceTime=" + url.QueryEscape(at), 200, "two\n"},
		{"sinceSeconds=3600", 200, "one\ntwo\n"},
		{"sinceSeconds=1&sinceTime=" + url.QueryEscape(at), 400, "at most one of them may be given"},
		{"sinceSeconds=0", 400, `sinceSeconds="0": want a number of seconds, 1 or more`},
		{"sinceTime=yesterday", 400, `sinceTime="yesterday": want an RFC 3339 time`},
	}
	for _, tt := range tests {
		code, body, err := b.getUnix(logPath + "?" + tt.query)
		if err != nil || code != tt.wantCode || (code == 200 && string(body) != tt.want) || !strings.Contains(string(body), tt.want) {
			t.Errorf("%s: %d %q %v, want %d %q", tt.query, code, body, err, tt.wantCode, tt.want)
		}
	}
	follow := openStream(t, b.unixHTTP, "http://berth", logPath+"?follow=true&sinceTime="+url.QueryEscape(at))
	if line := follow.waitLine("the followed log's first line", func(string) bool { return true }); line != "two" {
		t.Errorf("followed log since %s begins with %q, want two", at, line)
	}
}
