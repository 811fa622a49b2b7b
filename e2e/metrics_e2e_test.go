//go:build e2e

package e2e

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestMetricsDaemon scrapes the real daemon's /metrics: the build info,
// the file source's last success, the pod start SLI once a pod berth
// started runs, and a crashing container's restarts as a counter.
func TestMetricsDaemon(t *testing.T) {
	began := time.Now()
	b := newBerth(t, berthOptions{manifests: map[string]string{
		"web.yaml":   podManifest(sleeper("web")),
		"crash.yaml": podManifest(newPod("crash", shContainer("app", "echo run; exit 1"))),
	}})
	b.waitReady()
	b.waitRunning(podName("web"))

	t.Run("build info", func(t *testing.T) {
		_, body, err := b.get("/metrics")
		if err != nil {
			t.Fatal(err)
		}
		want := fmt.Sprintf(`berth_build_info{goversion=%q,revision=`, runtime.Version())
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, want) && strings.Contains(line, `,version="`) && strings.HasSuffix(line, "} 1") {
				return
			}
		}
		t.Fatalf("/metrics lacks %s...,version=...} 1", want)
	})

	t.Run("file source last success", func(t *testing.T) {
		series := fmt.Sprintf(`berth_source_last_success_timestamp_seconds{origin=%q,source="file"}`, b.manifests)
		v, line := b.metric(series)
		if v < float64(began.Unix()) || v > float64(time.Now().Unix()+1) {
			t.Fatalf("%s: want a time since the test began (%d)", line, began.Unix())
		}
		if a, line := b.metric(strings.Replace(series, "last_success", "last_attempt", 1)); a < v {
			t.Fatalf("%s: before the last success %v", line, v)
		}
		if n, _ := b.metric(`berth_source_accepted_serial{origin="` + b.manifests + `",source="file"}`); n != -1 {
			t.Fatalf("an unsigned source exports an accepted serial %v", n)
		}
	})

	t.Run("pod start SLI", func(t *testing.T) {
		// The lane observes the start right after publishing the status
		// the API served.
		b.waitFor("the start SLI observed", 30*time.Second, func() (bool, string) {
			v, line := b.metric("berth_pod_start_sli_duration_seconds_count")
			return v >= 1, line
		})
		// One reading: the crashing pod's start may be observed between two.
		metric := b.scrape()
		total, line := metric("berth_pod_start_total_duration_seconds_count")
		sli, _ := metric("berth_pod_start_sli_duration_seconds_count")
		if total < sli {
			t.Fatalf("%s: fewer than the SLI's %v", line, sli)
		}
		if v, line := metric(`berth_pod_start_sli_duration_seconds_bucket{le="3600"}`); v != sli {
			t.Fatalf("%s: want the kubelet's last bucket, 3600 s, holding all %v", line, sli)
		}
	})

	t.Run("restarts total", func(t *testing.T) {
		series := fmt.Sprintf(`berth_container_restarts_total{container="app",namespace="default",pod=%q}`, podName("crash"))
		b.waitFor("a restart counted", 60*time.Second, func() (bool, string) {
			v, line := b.metric(series)
			return v >= 1, line
		})
		_, body, err := b.get("/metrics")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(body), "\n# TYPE berth_container_restarts_total counter\n") {
			t.Fatal("berth_container_restarts_total is not typed a counter")
		}
		total, _ := b.metric(series)
		old, line := b.metric(strings.Replace(series, "restarts_total", "restarts", 1))
		// Both read the same status; a restart between the two reads
		// raises the deprecated one.
		if old < total || old > total+1 {
			t.Fatalf("%s: the deprecated gauge differs from the counter's %v", line, total)
		}
		b.removeManifest("crash.yaml")
		b.waitGone(podName("crash"))
		b.waitFor("the restart series gone with the pod", 30*time.Second, func() (bool, string) {
			v, line := b.metric(series)
			return v == -1, line
		})
	})
}
