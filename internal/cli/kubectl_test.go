package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-agent/berth/internal/cli/apiclient"
)

// TestPodsKubectlFlags checks -l, -o name and jsonpath, --no-headers and
// the NAMESPACE column's rule against the fake daemon.
func TestPodsKubectlFlags(t *testing.T) {
	pinClock(t)
	d := startFakeDaemon(t)
	tmpl := filepath.Join(t.TempDir(), "names.jsonpath")
	if err := os.WriteFile(tmpl, []byte(`{range .items[*]}{.metadata.name}{"\n"}{end}`), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string // exact, unless wantPrefix
		wantPrefix bool
		wantStderr string // contained
	}{
		{"name", []string{"pods", "-n", "kube-system", "-o", "name"}, 0, "pod/etcd-node1\n", false, ""},
		{"selector", []string{"pods", "-l", "app=web", "-o", "name"}, 0, "pod/web-node1\n", false, ""},
		{"set selector", []string{"pods", "--selector", "tier in (edge,db),!canary", "-o", "name"}, 0, "pod/web-node1\n", false, ""},
		{"selector matching none", []string{"pods", "-l", "app=nope", "-o", "name"}, 0, "", false, ""},
		{"jsonpath", []string{"pods", "-l", "app", "-o", "jsonpath={.items[*].status.podIP}"}, 0, "192.0.2.10", false, ""},
		{"relaxed jsonpath", []string{"pods", "-n", "kube-system", "-o", "jsonpath=.items[0].metadata.name"}, 0, "etcd-node1", false, ""},
		{"jsonpath of the problems", []string{"pods", "-n", "kube-system", "-o", "jsonpath={.problems[*].namespace}"}, 0, "kube-system", false, ""},
		{"jsonpath-file", []string{"pods", "-n", "kube-system", "-o", "jsonpath-file=" + tmpl}, 0, "etcd-node1\n", false, ""},
		{"no headers", []string{"pods", "-n", "kube-system", "--no-headers"}, 0, "etcd-node1   0/1   Terminating   0   60m   http\n", false, ""},
		{"one namespace: no NAMESPACE column", []string{"pods", "-n", "default"}, 0, "NAME ", true, ""},
		{"-A: NAMESPACE column", []string{"pods", "-n", "default", "-A"}, 0, "NAMESPACE ", true, ""},
		{"bad selector", []string{"pods", "-l", "app in (web"}, 2, "", false, `berth pods: -l "app in (web": `},
		{"names and selector", []string{"pods", "web", "-l", "app=web"}, 2, "", false, "give pod names or -l, not both"},
		{"bad template", []string{"pods", "-o", "jsonpath={.items[0"}, 2, "", false, "berth pods: -o jsonpath: parsing the template"},
		{"empty template", []string{"pods", "-o", "jsonpath="}, 2, "", false, "-o jsonpath: want a template"},
		{"missing template file", []string{"pods", "-o", "jsonpath-file=/nonexistent"}, 2, "", false, "-o jsonpath-file: open /nonexistent"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errb := runCLI(t, d, tt.args...)
			if code != tt.wantCode || !strings.Contains(errb, tt.wantStderr) {
				t.Fatalf("exit %d stderr %q, want %d and %q", code, errb, tt.wantCode, tt.wantStderr)
			}
			if tt.wantPrefix && !strings.HasPrefix(out, tt.wantStdout) || !tt.wantPrefix && out != tt.wantStdout {
				t.Errorf("stdout %q, want %q", out, tt.wantStdout)
			}
		})
	}
}

// TestPodsJSONProblems: -o json is a v1 List a jq user reads as is, with
// the manifest problems in it and nothing on stderr.
func TestPodsJSONProblems(t *testing.T) {
	d := startFakeDaemon(t)
	code, out, errb := runCLI(t, d, "pods", "-A", "-o", "json")
	if code != 0 || errb != "" {
		t.Fatalf("exit %d stderr %q", code, errb)
	}
	var doc podListDoc
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.APIVersion != "v1" || doc.Kind != "List" || len(doc.Items) != len(fixturePods()) || doc.Items[0].Kind != "Pod" {
		t.Errorf("apiVersion %q kind %q, %d items (first of kind %q)", doc.APIVersion, doc.Kind, len(doc.Items), doc.Items[0].Kind)
	}
	var errs []string
	for _, p := range doc.Problems {
		errs = append(errs, p.Error)
	}
	if len(errs) != 4 || !strings.HasPrefix(errs[1], "/etc/kubernetes/manifests/mangled.yaml:3: ") {
		t.Errorf("problems %q, want the daemon's four", errs)
	}
	if !strings.HasPrefix(out, "{\n  \"apiVersion\": \"v1\",\n") {
		t.Errorf("want two-space indentation, got %.40q", out)
	}
}

// watchRun runs a watching command in the background; result gives its
// exit code and output once the fake daemon's streams are closed.
func watchRun(t *testing.T, d *fakeDaemon, args ...string) (result func() (int, string, string)) {
	t.Helper()
	done := make(chan struct{})
	var code int
	var out, errb bytes.Buffer
	go func() {
		defer close(done)
		code = Execute("dev", append(args, "--socket", d.socket), &out, &errb)
	}()
	return func() (int, string, string) {
		<-done
		return code, out.String(), errb.String()
	}
}

func podEvent(t *testing.T, typ string, p v1.Pod) apiclient.WatchEvent {
	t.Helper()
	b, err := json.Marshal(&p)
	if err != nil {
		t.Fatal(err)
	}
	return apiclient.WatchEvent{Type: typ, Object: b}
}

// TestPodsWatch: -w lists, then prints each change the daemon streams,
// once: the ADDED events a watch opens with for pods already listed are
// not repeated; pods of other namespaces are not shown; a stream the
// daemon ends is an error.
func TestPodsWatch(t *testing.T) {
	pinClock(t)
	d := startFakeDaemon(t)
	crash := fixturePods()[1]
	crash.Status.ContainerStatuses[0].RestartCount = 6
	added := fixturePod("new", "default", "app")
	other := fixturePod("dns", "kube-system", "coredns")

	// The watch opens with what the daemon has, job changed since the
	// list: MODIFIED.
	replay := fixturePods()
	replay[6].Status.Phase = v1.PodFailed
	d.mu.Lock()
	d.podReplay = replay
	d.mu.Unlock()
	result := watchRun(t, d, "pods", "-w", "-n", "default", "--output-watch-events")
	d.podWatch <- podEvent(t, "MODIFIED", crash)
	d.podWatch <- podEvent(t, "ADDED", other)
	d.podWatch <- podEvent(t, "ADDED", added)
	d.podWatch <- podEvent(t, "DELETED", added)
	close(d.podWatch)
	code, out, errb := result()
	if code != 1 || !strings.Contains(errb, "ended the watch of /pods") {
		t.Errorf("exit %d stderr %q, want 1 and the watch's end", code, errb)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if !strings.HasPrefix(lines[0], "EVENT ") || !strings.Contains(lines[0], " NAME ") || strings.Contains(lines[0], "NAMESPACE") {
		t.Errorf("header %q", lines[0])
	}
	var changes []string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		changes = append(changes, f[0]+" "+f[1]+" "+f[4])
	}
	want := len(fixturePods()) - 1 // every pod of default, listed once
	if len(changes) != want+4 {
		t.Fatalf("rows %q, want %d listed and 4 changes", changes, want)
	}
	if got := changes[want:]; !slices.Equal(got, []string{"MODIFIED job-node1 0", "MODIFIED crash-node1 6", "ADDED new-node1 0", "DELETED new-node1 0"}) {
		t.Errorf("changes %q", got)
	}
}

// TestPodsWatchJSON: with -o json, -w prints each object on its own, as
// watch events with --output-watch-events.
func TestPodsWatchJSON(t *testing.T) {
	d := startFakeDaemon(t)
	added := fixturePod("new", "default", "app")
	result := watchRun(t, d, "pods", "-w", "-n", "kube-system", "-o", "json", "--output-watch-events")
	added.Namespace = "kube-system"
	d.podWatch <- podEvent(t, "ADDED", added)
	d.podWatch <- podEvent(t, "DELETED", added)
	close(d.podWatch)
	_, out, _ := result()
	dec := json.NewDecoder(strings.NewReader(out))
	var got []string
	for {
		var ev struct {
			Type   string `json:"type"`
			Object v1.Pod `json:"object"`
		}
		if err := dec.Decode(&ev); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("%v in %q", err, out)
		}
		got = append(got, ev.Type+" "+ev.Object.Kind+" "+ev.Object.Name)
	}
	if want := []string{"ADDED Pod etcd-node1", "ADDED Pod new-node1", "DELETED Pod new-node1"}; !slices.Equal(got, want) {
		t.Errorf("events %q, want %q", got, want)
	}
}

// TestEvents checks events' filters and formats; its table is golden
// (TestPodsGolden).
func TestEvents(t *testing.T) {
	pinClock(t)
	d := startFakeDaemon(t)
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"a pod that is gone keeps its events", []string{"events", "old-node1", "-o", "name"}, 0, "event/old-node1.1\n", ""},
		{"a namespace", []string{"events", "-n", "kube-system", "-o", "jsonpath={.items[*].reason}"}, 0, "Killing", ""},
		{"by manifest name", []string{"events", "pod/crash", "-o", "jsonpath={.items[*].reason}"}, 0, "Pulled Created Started BackOff", ""},
		{"kind of the list", []string{"events", "-A", "-o", "jsonpath={.kind} {.items[0].kind}"}, 0, "List Event", ""},
		{"none", []string{"events", "-n", "empty"}, 0, "", "No resources found in empty namespace (other namespaces hold some: berth events -A).\n"},
		{"default namespace", []string{"events", "-o", "jsonpath={.items[*].involvedObject.name}"}, 0, "old-node1 crash-node1 crash-node1 crash-node1 crash-node1", ""},
		{"one pod at most", []string{"events", "a", "b"}, 2, "", "berth events: want at most one POD"},
		{"bad format", []string{"events", "-o", "wide"}, 2, "", `berth events: -o "wide": want json, yaml, name`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errb := runCLI(t, d, tt.args...)
			if code != tt.wantCode || out != tt.wantStdout || !strings.Contains(errb, tt.wantStderr) {
				t.Errorf("exit %d stdout %q stderr %q, want %d, %q and %q", code, out, errb, tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
		})
	}
}

// TestEventsWatch: -w prints the events of the pod, then each new one the
// daemon streams, not those of other pods or those already printed.
func TestEventsWatch(t *testing.T) {
	pinClock(t)
	d := startFakeDaemon(t)
	result := watchRun(t, d, "events", "-w", "crash")
	ev := func(pod, reason string) apiclient.WatchEvent {
		e := v1.Event{ObjectMeta: metav1.ObjectMeta{Name: pod + "." + reason, Namespace: "default"},
			InvolvedObject: v1.ObjectReference{Kind: "Pod", Namespace: "default", Name: pod},
			Type:           "Warning", Reason: reason, Message: "m", Count: 1, LastTimestamp: fixAt(0)}
		b, _ := json.Marshal(&e)
		return apiclient.WatchEvent{Type: "ADDED", Object: b}
	}
	d.eventWatch <- ev("web-node1", "Unhealthy")
	d.eventWatch <- ev("crash-node1", "Killing")
	close(d.eventWatch)
	code, out, errb := result()
	if code != 1 || !strings.Contains(errb, "ended the watch of /events") {
		t.Errorf("exit %d stderr %q", code, errb)
	}
	var reasons []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n")[1:] {
		// REASON follows TYPE.
		f := strings.Fields(l)
		if i := slices.IndexFunc(f, func(s string) bool { return s == "Normal" || s == "Warning" }); i >= 0 && i+1 < len(f) {
			reasons = append(reasons, f[i+1])
		}
	}
	if want := []string{"Pulled", "Created", "Started", "BackOff", "Killing"}; !slices.Equal(reasons, want) {
		t.Errorf("reasons %q, want %q in\n%s", reasons, want, out)
	}
}

// TestLogsKubectlFlags checks the requests and output of --since,
// --since-time, --all-containers and --prefix.
func TestLogsKubectlFlags(t *testing.T) {
	d := startFakeDaemon(t)
	const q = "&follow=false&previous=false"
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantReqs   []string // in order unless sorted
		sorted     bool
		wantStdout string // sorted lines when sorted
		wantStderr string
	}{
		{"since", []string{"logs", "web", "--since", "90s"}, 0,
			[]string{"/pods/default/web-node1/log?container=httpd" + q + "&sinceSeconds=90&timestamps=false"}, false, "httpd line 1\nhttpd line 2\n", ""},
		{"since rounds up to seconds", []string{"logs", "web", "--since=1500ms", "--timestamps"}, 0,
			[]string{"/pods/default/web-node1/log?container=httpd" + q + "&sinceSeconds=2&timestamps=true"}, false, "httpd line 1\nhttpd line 2\n", ""},
		{"since-time", []string{"logs", "web", "--since-time", "2026-11-21T13:00:00+01:00"}, 0,
			[]string{"/pods/default/web-node1/log?container=httpd" + q + "&sinceTime=2026-11-21T13%3A00%3A00%2B01%3A00&timestamps=false"}, false, "httpd line 1\nhttpd line 2\n", ""},
		{"all containers in turn", []string{"logs", "init", "--all-containers"}, 0, []string{
			"/pods/default/init-node1/log?container=fetch" + q + "&timestamps=false",
			"/pods/default/init-node1/log?container=unpack" + q + "&timestamps=false",
			"/pods/default/init-node1/log?container=app" + q + "&timestamps=false",
		}, false, "fetch line 1\nfetch line 2\nunpack line 1\nunpack line 2\napp line 1\napp line 2\n", ""},
		{"prefix", []string{"logs", "sidecar", "--all-containers", "--prefix"}, 0, []string{
			"/pods/default/sidecar-node1/log?container=app" + q + "&timestamps=false",
			"/pods/default/sidecar-node1/log?container=log-shipper" + q + "&timestamps=false",
		}, false, "[pod/sidecar-node1/app] app line 1\n[pod/sidecar-node1/app] app line 2\n" +
			"[pod/sidecar-node1/log-shipper] log-shipper line 1\n[pod/sidecar-node1/log-shipper] log-shipper line 2\n", ""},
		{"all containers followed at once", []string{"logs", "sidecar", "--all-containers", "--prefix", "-f"}, 0, []string{
			"/pods/default/sidecar-node1/log?container=app&follow=true&previous=false&timestamps=false",
			"/pods/default/sidecar-node1/log?container=log-shipper&follow=true&previous=false&timestamps=false",
		}, true, "[pod/sidecar-node1/app] app line 1\n[pod/sidecar-node1/app] app line 2\n" +
			"[pod/sidecar-node1/log-shipper] log-shipper line 1\n[pod/sidecar-node1/log-shipper] log-shipper line 2\n", ""},
		{"all containers of a pod without any: the daemon says why", []string{"logs", "bad-node1", "--all-containers"}, 0,
			[]string{"/pods/default/bad-node1/log?follow=false&previous=false&timestamps=false"}, false, " line 1\n line 2\n", ""},
		{"prefix of one container", []string{"logs", "web", "--prefix"}, 0,
			[]string{"/pods/default/web-node1/log?container=httpd" + q + "&timestamps=false"}, false, "[pod/web-node1/httpd] httpd line 1\n[pod/web-node1/httpd] httpd line 2\n", ""},
		{"since and since-time", []string{"logs", "web", "--since", "1m", "--since-time", "2026-11-21T12:00:00Z"}, 2, nil, false, "", "at most one of --since-time or --since"},
		{"negative since", []string{"logs", "web", "--since=-1m"}, 2, nil, false, "", "--since -1m0s: want a duration greater than 0"},
		{"bad since-time", []string{"logs", "web", "--since-time", "yesterday"}, 2, nil, false, "", `--since-time "yesterday": want an RFC 3339 time`},
		{"all containers and -c", []string{"logs", "web", "--all-containers", "-c", "httpd"}, 2, nil, false, "", "--all-containers and -c httpd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(d.logRequests())
			code, out, errb := runCLI(t, d, tt.args...)
			if code != tt.wantCode || !strings.Contains(errb, tt.wantStderr) {
				t.Fatalf("exit %d stderr %q, want %d and %q", code, errb, tt.wantCode, tt.wantStderr)
			}
			reqs := d.logRequests()[before:]
			if tt.sorted {
				slices.Sort(reqs)
				lines := strings.SplitAfter(out, "\n")
				slices.Sort(lines)
				out = strings.Join(lines, "")
			}
			if !slices.Equal(reqs, tt.wantReqs) {
				t.Errorf("requests %q, want %q", reqs, tt.wantReqs)
			}
			if out != tt.wantStdout {
				t.Errorf("stdout %q, want %q", out, tt.wantStdout)
			}
		})
	}
}

// TestVersion: the client's version and the daemon's; an unreachable
// daemon is exit 1 after the client's, unless --client.
func TestVersion(t *testing.T) {
	d := startFakeDaemon(t)
	missing := filepath.Join(t.TempDir(), "missing.sock")
	client := "Client Version: dev (" + runtime.Version() + ", " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr string
	}{
		{"both", []string{"version", "--socket", d.socket}, 0, client + "Server Version: v0.9.0 (go1.26.0, linux/amd64)\n", ""},
		{"client only", []string{"version", "--client", "--socket", missing}, 0, client, ""},
		{"no daemon", []string{"version", "--socket", missing}, 1, client, "berth version: the daemon's version: berth daemon not reachable at " + missing},
		{"json", []string{"version", "--socket", d.socket, "-o", "json"}, 0, "{\n  \"clientVersion\": {\n    \"major\": \"\",", ""},
		{"yaml", []string{"version", "--client", "-o", "yaml"}, 0, "clientVersion:\n", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := Execute("dev", tt.args, &out, &errb)
			if code != tt.wantCode || !strings.HasPrefix(out.String(), tt.wantStdout) || !strings.Contains(errb.String(), tt.wantStderr) {
				t.Errorf("exit %d stdout %q stderr %q, want %d, %q and %q", code, out.String(), errb.String(), tt.wantCode, tt.wantStdout, tt.wantStderr)
			}
		})
	}
	var doc versionDoc
	_, out, _ := runCLI(t, d, "version", "-o", "json")
	if err := json.Unmarshal([]byte(out), &doc); err != nil || doc.ServerVersion == nil || doc.ServerVersion.GitCommit != "0123abc" || doc.ClientVersion.GitVersion != "dev" {
		t.Errorf("version -o json: %v, %q", err, out)
	}
}

// TestWatchOfAnOlderDaemon: a daemon that answers ?watch=true with its
// list, as one without watches does, is told apart from a broken stream,
// and a path it does not serve from a pod it did not find.
func TestWatchOfAnOlderDaemon(t *testing.T) {
	socket := filepath.Join(t.TempDir(), "old.sock")
	l, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/pods":
			w.Write([]byte(`{"kind":"PodList","apiVersion":"v1","metadata":{},"items":[]}` + "\n"))
		case "/problems":
			w.Write([]byte(`{"items":[]}`))
		default:
			http.NotFound(w, r)
		}
	})}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"pods", "-w"}, "berth pods: the daemon at " + socket + " does not serve a watch of /pods: it is older than this berth\n"},
		{[]string{"events"}, "berth events: the daemon at " + socket + " does not serve /events: it is older than this berth\n"},
		{[]string{"version"}, "berth version: the daemon's version: the daemon at " + socket + " does not serve /version: it is older than this berth\n"},
	} {
		var out, errb bytes.Buffer
		if code := Execute("dev", append(tt.args, "--socket", socket), &out, &errb); code != 1 || errb.String() != tt.want {
			t.Errorf("berth %s: exit %d stderr %q, want 1 and %q", strings.Join(tt.args, " "), code, errb.String(), tt.want)
		}
	}
}
