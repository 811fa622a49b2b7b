//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/berth-agent/berth/e2e/testbed"
	"github.com/berth-agent/berth/internal/statusreport"
)

// TestFleetStatusNginx runs berth as one device of a fleet against a real
// nginx (Debian's): the pods come from a per-group URL, and berth PUTs its
// status report to nginx's WebDAV (--status-url with {node}). The report
// nginx stores follows the pod to Running and ready, names the manifest
// version (nginx's ETag), shows the problem while the URL fails (the pod
// keeps running, the polls back off), and follows a new version of the
// list within seconds; nginx's access log shows the polls stayed
// conditional (304s), came no faster than the Cache-Control max-age nginx
// sends (3 s, with a poll period of 1 s), and every PUT was accepted.
func TestFleetStatusNginx(t *testing.T) {
	n, err := testbed.StartNginx(t.TempDir(), testbed.NginxOptions{
		ServerDirectives: `location /groups/ { add_header Cache-Control "max-age=3"; }`,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Stop(); err != nil {
			t.Error(err)
		}
	})
	const group = "/groups/edge/pods.yaml"
	if err := n.Publish(group, []byte(podManifest(sleeper("fleet")))); err != nil {
		t.Fatal(err)
	}
	b := newBerth(t, berthOptions{args: []string{
		"--manifest-url", n.URL + group, "--http-check-frequency", "1s", "--http-check-backoff-max", "8s",
		"--status-url", n.URL + "/status/{node}.json", "--status-period", "10s",
	}})
	name := podName("fleet")
	b.waitRunning(name)

	stored := filepath.Join(n.Root, "status", nodeName+".json")
	// report waits until the report nginx stores satisfies cond.
	report := func(what string, cond func(statusreport.Report) bool) statusreport.Report {
		t.Helper()
		var rep statusreport.Report
		took := b.waitFor("the stored status report: "+what, 30*time.Second, func() (bool, string) {
			data, err := os.ReadFile(stored)
			if err != nil {
				return false, err.Error()
			}
			rep = statusreport.Report{}
			if err := json.Unmarshal(data, &rep); err != nil {
				return false, fmt.Sprintf("%s: %v", data, err)
			}
			return cond(rep), string(data)
		})
		t.Logf("status report %s after %s", what, took.Round(time.Millisecond))
		return rep
	}
	etag := func() string {
		t.Helper()
		resp, err := http.Head(n.URL + group)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get("ETag")
	}

	v1 := etag()
	rep := report("pod running and ready", func(r statusreport.Report) bool {
		return r.Ready && len(r.Pods) == 1 && r.Pods[0].Name == name && r.Pods[0].Phase == "Running" &&
			r.Pods[0].Ready == "1/1" && r.ManifestVersions["http"] == v1
	})
	if rep.Node != nodeName || rep.Time.IsZero() || rep.BerthVersion == "" {
		t.Errorf("report %+v", rep)
	}

	// The group's URL fails (404): berth backs off, the wait doubling from
	// the period up to --http-check-backoff-max, keeps the pod running,
	// and reports the problem.
	if err := os.Remove(filepath.Join(n.Root, filepath.FromSlash(group))); err != nil {
		t.Fatal(err)
	}
	var failed []time.Time
	b.waitFor("four failed polls", 60*time.Second, func() (bool, string) {
		log, err := n.AccessLog()
		if err != nil {
			t.Fatal(err)
		}
		failed = failed[:0]
		for _, e := range log {
			if e.URI == group && e.Status == http.StatusNotFound {
				failed = append(failed, e.At)
			}
		}
		return len(failed) >= 4, fmt.Sprintf("%d failed polls", len(failed))
	})
	g1, g2, g3 := failed[1].Sub(failed[0]), failed[2].Sub(failed[1]), failed[3].Sub(failed[2])
	t.Logf("waits after the 1st, 2nd and 3rd failed poll: %s, %s, %s", g1.Round(time.Millisecond), g2.Round(time.Millisecond), g3.Round(time.Millisecond))
	// Between 2 and 4 s, then between 4 and 8 s; nginx logs a request when
	// it answered it, which may shorten what it logs by a little.
	if g2 < 1500*time.Millisecond || g3 < 3500*time.Millisecond {
		t.Errorf("no back-off: waits %s and %s after the 2nd and 3rd failure, want 2-4 s and 4-8 s", g2, g3)
	}
	report("a failing URL, the pod still running", func(r statusreport.Report) bool {
		return len(r.Pods) == 1 && r.Pods[0].Phase == "Running" && len(r.Problems) == 1 && r.Problems[0].Reason == "Unreachable"
	})

	// A new version of the group's list: no pods.
	if err := n.Publish(group, []byte("apiVersion: v1\nkind: PodList\nitems: []\n")); err != nil {
		t.Fatal(err)
	}
	v2 := etag()
	report("new version applied", func(r statusreport.Report) bool {
		return len(r.Pods) == 0 && r.ManifestVersions["http"] == v2 && v2 != v1
	})

	// nginx logs a request once it answered it, a moment after the report
	// was stored.
	var polls, notModified, puts int
	var gap time.Duration // shortest between two polls, as nginx logged them
	b.waitFor("nginx to log conditional polls and the PUTs", 10*time.Second, func() (bool, string) {
		log, err := n.AccessLog()
		if err != nil {
			t.Fatal(err)
		}
		polls, notModified, puts = 0, 0, 0
		var last time.Time // of the previous poll, if it was answered
		gap = time.Hour
		for _, e := range log {
			if e.URI == group && e.Method == http.MethodGet {
				answered := e.Status == http.StatusOK || e.Status == http.StatusNotModified
				if !last.IsZero() && answered {
					gap = min(gap, e.At.Sub(last))
				}
				last = time.Time{}
				if answered {
					last = e.At
				}
			}
			switch {
			case e.URI == group && e.Status == http.StatusNotModified:
				notModified++
				polls++
			case e.URI == group && e.Method == http.MethodGet:
				polls++
			case e.Method == http.MethodPut:
				puts++
				if e.Status != http.StatusCreated && e.Status != http.StatusNoContent {
					t.Fatalf("nginx answered a status PUT with %d", e.Status)
				}
			}
		}
		return notModified > 0 && puts >= 2, fmt.Sprintf("%d polls with %d 304s, %d PUTs", polls, notModified, puts)
	})
	t.Logf("nginx saw %d polls (%d answered 304, %s apart at least) and %d status PUTs", polls, notModified, gap.Round(time.Millisecond), puts)
	// A poll waits out max-age (3 s, plus jitter); nginx logs a request
	// when it has answered it, so a slow answer may shorten the gap it
	// logs by a little, never to the 1 s period.
	if gap < 2*time.Second {
		t.Errorf("two polls %s apart: max-age=3 was not honoured", gap)
	}
	b.waitFor("berth to count the reports nginx stored", 10*time.Second, func() (bool, string) {
		v, detail := b.metric(`berth_status_reports_total{result="ok"}`)
		return v >= float64(puts), detail
	})
}
