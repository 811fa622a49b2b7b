//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestProbesAndHooks runs one berth with a pod per probe and hook case, on
// the real containerd, and checks each through /pods, its events and CRI:
// readiness driven by an httpGet probe flips both ways as a file comes and
// goes; a failing liveness exec probe restarts its container; a startup
// probe holds a liveness probe back until it passes, and one that never
// passes restarts its container; a tcpSocket probe makes a pod ready once
// its port opens; a failing postStart hook kills its container.
func TestProbesAndHooks(t *testing.T) {
	www := t.TempDir()
	manifests := map[string]string{}
	add := func(p *v1.Pod) { manifests[p.Name+".yaml"] = podManifest(p) }

	// readiness: httpd serves a hostPath directory; /ready exists or not.
	web := newPod("probe-ready", v1.Container{
		Name: "web", Image: "busybox:1.36",
		Command:      []string{"httpd", "-f", "-p", "8080", "-h", "/www"},
		Ports:        []v1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		VolumeMounts: []v1.VolumeMount{{Name: "www", MountPath: "/www"}},
		ReadinessProbe: &v1.Probe{
			ProbeHandler:  v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}},
			PeriodSeconds: 1,
		},
	})
	web.Spec.Volumes = []v1.Volume{{Name: "www", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: www}}}}
	add(web)

	// liveness: healthy for 3 s, then the probe's file is gone.
	live := newPod("probe-live", shContainer("main", "touch /tmp/healthy; sleep 3; rm /tmp/healthy; "+sleepForever))
	live.Spec.Containers[0].LivenessProbe = &v1.Probe{
		ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/healthy"}}},
		PeriodSeconds: 1, FailureThreshold: 2,
	}
	add(live)

	// startup: the app takes 5 s to start; the liveness probe would kill
	// it at once if the startup probe did not hold it back.
	slow := newPod("probe-startup", shContainer("main", "sleep 5; touch /tmp/started; "+sleepForever))
	slow.Spec.Containers[0].StartupProbe = &v1.Probe{
		ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/started"}}},
		PeriodSeconds: 1, FailureThreshold: 30,
	}
	slow.Spec.Containers[0].LivenessProbe = &v1.Probe{
		ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"cat", "/tmp/started"}}},
		PeriodSeconds: 1, FailureThreshold: 1,
	}
	add(slow)

	// startup that never passes: killed past its threshold.
	never := newPod("probe-startup-fail", shContainer("main", sleepForever))
	never.Spec.Containers[0].StartupProbe = &v1.Probe{
		ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"false"}}},
		PeriodSeconds: 1, FailureThreshold: 2,
	}
	add(never)

	// tcpSocket: the port opens after 3 s.
	tcp := newPod("probe-tcp", shContainer("main", "sleep 3; exec httpd -f -p 9000 -h /"))
	tcp.Spec.Containers[0].ReadinessProbe = &v1.Probe{
		ProbeHandler:  v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt32(9000)}},
		PeriodSeconds: 1,
	}
	add(tcp)

	// postStart that fails: the container is killed and restarted.
	post := newPod("hook-poststart", shContainer("main", sleepForever))
	post.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{
		Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo no >&2; exit 3"}},
	}}
	add(post)

	// httpGet on the host network: no host given, so the node's IP.
	hostPort := freePort(t)
	hn := newPod("probe-hostnet", shContainer("main", fmt.Sprintf("mkdir -p /tmp/w && echo ok > /tmp/w/index.html && exec httpd -f -p %d -h /tmp/w", hostPort)))
	hn.Spec.HostNetwork = true
	hn.Spec.Containers[0].ReadinessProbe = &v1.Probe{
		ProbeHandler:  v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Port: intstr.FromInt(hostPort)}},
		PeriodSeconds: 1,
	}
	add(hn)

	b := newBerth(t, berthOptions{args: fastBackoff, manifests: manifests})
	// Watch the startup pod from the start: it must be seen running but
	// not started (nor ready) before its startup probe passes.
	unstarted := make(chan string, 1)
	stopWatch := make(chan struct{})
	go func() {
		for {
			select {
			case <-stopWatch:
				return
			case <-time.After(100 * time.Millisecond):
			}
			p, err := b.apiPod(podName("probe-startup"))
			if err != nil || p == nil {
				continue
			}
			if cs := containerStatus(p, "main"); cs != nil && cs.State.Running != nil && cs.Started != nil && !*cs.Started && !cs.Ready {
				unstarted <- describePod(p)
				return
			}
		}
	}()
	defer close(stopWatch)
	b.waitReady()

	t.Run("readiness", func(t *testing.T) {
		defer b.use(t)()
		name := podName("probe-ready")
		p := b.waitPod(name, "phase Running", podRunning)
		if podReady(p) {
			t.Fatalf("pod is Ready without /ready: %s", describePod(p))
		}
		b.waitEvent(name, "Unhealthy", "Readiness probe failed: HTTP probe failed with statuscode: 404")
		if err := os.WriteFile(filepath.Join(www, "ready"), []byte("ok"), 0o644); err != nil {
			t.Fatal(err)
		}
		took := b.waitFor("pod Ready once /ready exists", waitTimeout, podCond(b, name, func(p *v1.Pod) bool {
			cs := containerStatus(p, "web")
			return podReady(p) && cs != nil && cs.Ready && condTrue(p, v1.ContainersReady)
		}))
		t.Logf("Ready %s after /ready appeared (period 1s)", took.Round(time.Millisecond))
		if err := os.Remove(filepath.Join(www, "ready")); err != nil {
			t.Fatal(err)
		}
		took = b.waitFor("pod not Ready once /ready is gone", waitTimeout, podCond(b, name, func(p *v1.Pod) bool {
			cs := containerStatus(p, "web")
			return !podReady(p) && cs != nil && !cs.Ready && cs.State.Running != nil
		}))
		t.Logf("not Ready %s after /ready went away", took.Round(time.Millisecond))
		if cs := containerStatus(b.mustPod(name), "web"); cs.RestartCount != 0 {
			t.Errorf("a readiness failure restarted the container: restartCount %d", cs.RestartCount)
		}
	})

	t.Run("liveness", func(t *testing.T) {
		defer b.use(t)()
		name := podName("probe-live")
		p := b.waitPod(name, "restartCount >= 1 with lastState terminated", func(p *v1.Pod) bool {
			cs := containerStatus(p, "main")
			return cs != nil && cs.RestartCount >= 1 && cs.LastTerminationState.Terminated != nil
		})
		term := containerStatus(p, "main").LastTerminationState.Terminated
		if !strings.Contains(term.Message, "failed liveness probe") {
			t.Errorf("lastState.terminated = %+v, want the liveness failure in its message", term)
		}
		b.waitEvent(name, "Killing", "Container main failed liveness probe, will be restarted")
		b.waitEvent(name, "Unhealthy", "Liveness probe failed:")
		checkRuntimeRestarts(t, name, 1)
	})

	t.Run("startup", func(t *testing.T) {
		defer b.use(t)()
		name := podName("probe-startup")
		select {
		case seen := <-unstarted:
			t.Logf("seen running, not started, not ready: %s", seen)
		default:
			t.Error("the container was never seen running but not started while its startup probe had not passed")
		}
		p := b.waitPod(name, "started and ready", func(p *v1.Pod) bool {
			cs := containerStatus(p, "main")
			return cs != nil && cs.Started != nil && *cs.Started && cs.Ready && podReady(p)
		})
		if cs := containerStatus(p, "main"); cs.RestartCount != 0 {
			t.Errorf("restartCount = %d: the liveness probe was not held back by the startup probe", cs.RestartCount)
		}
		if e := b.findEvent(name, "Unhealthy", "Liveness probe failed"); e != nil {
			t.Errorf("liveness probed before startup passed: %s", e.Message)
		}
	})

	t.Run("startup-fails", func(t *testing.T) {
		defer b.use(t)()
		name := podName("probe-startup-fail")
		b.waitPod(name, "restartCount >= 1", func(p *v1.Pod) bool {
			cs := containerStatus(p, "main")
			return cs != nil && cs.RestartCount >= 1
		})
		b.waitEvent(name, "Killing", "Container main failed startup probe, will be restarted")
	})

	t.Run("tcp", func(t *testing.T) {
		defer b.use(t)()
		name := podName("probe-tcp")
		b.waitEvent(name, "Unhealthy", "Readiness probe failed:")
		b.waitPod(name, "Ready once the port is open", podReady)
	})

	t.Run("hostnetwork-http", func(t *testing.T) {
		defer b.use(t)()
		p := b.waitPod(podName("probe-hostnet"), "Ready through the node's IP", podReady)
		t.Logf("host-network pod ready, probed at %s:%d", p.Status.PodIP, hostPort)
	})

	t.Run("poststart-fails", func(t *testing.T) {
		defer b.use(t)()
		name := podName("hook-poststart")
		b.waitEvent(name, "FailedPostStartHook", "PostStartHook failed: command \"sh -c echo no >&2; exit 3\" exited with 3: no")
		b.waitPod(name, "restartCount >= 1", func(p *v1.Pod) bool {
			cs := containerStatus(p, "main")
			return cs != nil && cs.RestartCount >= 1
		})
		b.waitEvent(name, "Killing", "Container main failed its postStart hook")
	})

	t.Run("metrics", func(t *testing.T) {
		defer b.use(t)()
		_, body, err := b.get("/metrics")
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			`berth_prober_probe_total{container="web",namespace="default",pod="probe-ready-e2e-node"`,
			`probe_type="readiness",result="failed"`,
			`probe_type="liveness",result="failed"`,
			`berth_prober_probe_duration_seconds_bucket{probe_type="startup"`,
		} {
			if !strings.Contains(string(body), want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
}

// TestPreStopHook removes a pod whose preStop hook writes a file into a
// hostPath and then takes 2 s, once as an exec hook and once as an httpGet
// hook (a busybox httpd CGI script, reached on the pod's IP): the file
// must be there while the container still runs, and the container must be
// gone after the hook and within the grace period. A third pod's hook
// sleeps past its 3 s grace period and is abandoned.
func TestPreStopHook(t *testing.T) {
	// The CGI script writes the file, then holds the request for 2 s.
	const cgi = `mkdir -p /www/cgi-bin && printf '#!/bin/sh\necho bye > /out/prestop\nsleep 2\necho "Content-Type: text/plain"\necho\necho ok\n' > /www/cgi-bin/stop && chmod +x /www/cgi-bin/stop && httpd -p 8080 -h /www && `
	tests := []struct {
		name    string
		script  string
		hook    v1.LifecycleHandler
		grace   int64
		min     time.Duration // the hook's own time
		noFile  bool
		wantEvt string
	}{
		{name: "exec", script: sleepForever, grace: 10, min: 2 * time.Second,
			hook: v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sh", "-c", "echo bye > /out/prestop; sleep 2"}}}},
		{name: "httpget", script: cgi + sleepForever, grace: 10, min: 2 * time.Second,
			hook: v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/cgi-bin/stop", Port: intstr.FromInt(8080)}}},
		{name: "abandoned", script: sleepForever, grace: 3, min: 3 * time.Second, noFile: true,
			// An exec hook: a sleep hook longer than the grace period is
			// invalid (the API server's rule, KEP-3960).
			hook:    v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"sleep", "60"}}},
			wantEvt: "PreStopHook failed: did not finish within the grace period of 3s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := t.TempDir()
			p := newPod("hook-prestop", shContainer("main", tt.script))
			p.Spec.TerminationGracePeriodSeconds = &tt.grace
			p.Spec.Volumes = []v1.Volume{{Name: "out", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: out}}}}
			p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "out", MountPath: "/out"}}
			p.Spec.Containers[0].Lifecycle = &v1.Lifecycle{PreStop: &tt.hook}
			if tt.hook.HTTPGet != nil {
				// Ready (so removed) only once httpd listens.
				p.Spec.Containers[0].ReadinessProbe = &v1.Probe{
					ProbeHandler:  v1.ProbeHandler{TCPSocket: &v1.TCPSocketAction{Port: intstr.FromInt(8080)}},
					PeriodSeconds: 1,
				}
			}
			b := newBerth(t, berthOptions{manifests: map[string]string{"hook-prestop.yaml": podManifest(p)}})
			b.waitReady()
			name := podName("hook-prestop")
			b.waitRunning(name)

			removed := time.Now()
			b.removeManifest("hook-prestop.yaml")
			file := filepath.Join(out, "prestop")
			if !tt.noFile {
				b.waitFor("the preStop hook's file while the container runs", waitTimeout, func() (bool, string) {
					data, err := os.ReadFile(file)
					if err != nil {
						return false, err.Error()
					}
					cs, err := containersOf(name)
					if err != nil {
						return false, err.Error()
					}
					if len(runningContainers(cs)) == 0 {
						b.t.Fatalf("the container died before the preStop hook's file %q (%q) was seen", file, data)
					}
					return strings.TrimSpace(string(data)) == "bye", fmt.Sprintf("%q", data)
				})
			}
			if tt.wantEvt != "" {
				b.waitEvent(name, "FailedPreStopHook", tt.wantEvt)
			}
			b.waitGone(name)
			took := time.Since(removed)
			t.Logf("pod gone %s after its manifest was removed (hook takes %s, grace %ds)", took.Round(time.Millisecond), tt.min, tt.grace)
			if took < tt.min {
				t.Errorf("pod gone after %s: the preStop hook was not waited for", took)
			}
			if took > time.Duration(tt.grace)*time.Second+5*time.Second {
				t.Errorf("pod gone after %s, beyond its %ds grace period", took, tt.grace)
			}
		})
	}
}

// freePort is a TCP port nobody listens on, for a host-network pod.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", ":0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// podRunning reports whether the pod is in phase Running, ready or not.
func podRunning(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning }

// podCond adapts a pod predicate to waitFor.
func podCond(b *berth, name string, cond func(*v1.Pod) bool) func() (bool, string) {
	return func() (bool, string) {
		p, err := b.apiPod(name)
		if err != nil || p == nil {
			return false, fmt.Sprintf("pod %s: %v", name, err)
		}
		return cond(p), describePod(p)
	}
}

// condTrue reports whether a pod condition is True.
func condTrue(p *v1.Pod, typ v1.PodConditionType) bool {
	c := podCondition(p, typ)
	return c != nil && c.Status == v1.ConditionTrue
}

// mustPod is apiPod failing the test when the pod is missing.
func (b *berth) mustPod(name string) *v1.Pod {
	b.t.Helper()
	p, err := b.apiPod(name)
	if err != nil || p == nil {
		b.t.Fatalf("pod %s: %v", name, err)
	}
	return p
}

// podEvents fetches a pod's events from berth's API.
func (b *berth) podEvents(name string) ([]v1.Event, error) {
	code, body, err := b.get("/pods/default/" + name + "/events")
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("events of %s: %d %s", name, code, body)
	}
	var list v1.EventList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// findEvent is the newest event of the pod with reason whose message
// contains msg, or nil.
func (b *berth) findEvent(name, reason, msg string) *v1.Event {
	b.t.Helper()
	events, err := b.podEvents(name)
	if err != nil {
		b.t.Fatal(err)
	}
	for i := len(events) - 1; i >= 0; i-- {
		if events[i].Reason == reason && strings.Contains(events[i].Message, msg) {
			return &events[i]
		}
	}
	return nil
}

// waitEvent waits for an event of the pod with reason whose message
// contains msg.
func (b *berth) waitEvent(name, reason, msg string) {
	b.t.Helper()
	b.waitFor(fmt.Sprintf("event %s %q of %s", reason, msg, name), waitTimeout, func() (bool, string) {
		events, err := b.podEvents(name)
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range events {
			if e.Reason == reason && strings.Contains(e.Message, msg) {
				return true, ""
			}
			seen = append(seen, e.Reason+": "+e.Message)
		}
		return false, strings.Join(seen, " | ")
	})
}

// TestProbeLoad measures what exec readiness probes cost: N busybox pods
// (BERTH_E2E_PROBE_LOAD, e.g. 100; skipped when unset) idle for a window
// (BERTH_E2E_PROBE_WINDOW, default 60s), first without probes, then each
// with an exec readiness probe every 10 s. It reports, per phase, the CPU
// of berth, of the bed's containerd and of its shims (percent of one
// core), berth's RSS, and berth's ExecSync calls per second. Figures are
// logged, not asserted: this is the probe figure of `make bench`.
func TestProbeLoad(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("BERTH_E2E_PROBE_LOAD"))
	if n <= 0 {
		t.Skip("set BERTH_E2E_PROBE_LOAD=100 to measure probe load")
	}
	window := time.Minute
	if w, err := time.ParseDuration(os.Getenv("BERTH_E2E_PROBE_WINDOW")); err == nil {
		window = w
	}
	for _, withProbe := range []bool{false, true} {
		manifests := probeLoadManifests(n, withProbe)
		b := newBerth(t, berthOptions{manifests: manifests, args: []string{"--log-level", "info"}})
		b.waitReady()
		b.waitFor(fmt.Sprintf("%d pods Ready", n), 5*time.Minute, func() (bool, string) {
			list, err := b.pods()
			if err != nil {
				return false, err.Error()
			}
			ready := 0
			for i := range list.Items {
				if podReady(&list.Items[i]) {
					ready++
				}
			}
			return ready == n, fmt.Sprintf("%d of %d ready", ready, n)
		})
		// Let start-up work (first probes, GC, relists) settle.
		time.Sleep(15 * time.Second)
		c := measureProbeLoad(t, b, window)
		t.Logf("%d pods, exec readiness probe every 10s: %v; over %s: berth CPU %.2f%%, containerd %.2f%%, shims %.2f%% of one core; berth RSS %.1f MiB; ExecSync %.2f/s",
			n, withProbe, window, c.berth, c.containerd, c.shims, c.rssMiB, c.execPerSec)
		b.stop()
		cleanRuntime(t, "between phases")
	}
}

// probeLoadManifests are n sleepers, each with an exec readiness probe
// (`true` every 10 s) when withProbe.
func probeLoadManifests(n int, withProbe bool) map[string]string {
	out := map[string]string{}
	for i := range n {
		p := sleeper(fmt.Sprintf("load-%03d", i))
		if withProbe {
			p.Spec.Containers[0].ReadinessProbe = &v1.Probe{
				ProbeHandler:  v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"true"}}},
				PeriodSeconds: 10,
			}
		}
		out[p.Name+".yaml"] = podManifest(p)
	}
	return out
}

// loadCost is one measured window.
type loadCost struct {
	berth, containerd, shims float64 // percent of one core
	rssMiB                   float64
	execPerSec               float64
}

// measureProbeLoad samples CPU ticks of berth, the bed's containerd and
// shims over window, and berth's ExecSync count from /metrics around it.
func measureProbeLoad(t *testing.T, b *berth, window time.Duration) loadCost {
	t.Helper()
	b.mu.Lock()
	pid := b.cmd.Process.Pid
	b.mu.Unlock()
	ctrd := procsWith("containerd", filepath.Join(bed.Dir, "containerd.toml"))
	shims := procsWith("containerd-shim", bed.Socket)
	if len(ctrd) != 1 {
		t.Fatalf("found containerd pids %v of the bed, want one", ctrd)
	}
	execBefore := metricValue(t, b, `berth_runtime_operations_total{operation_type="exec_sync"}`)
	b0, c0, s0 := procTicks(pid), procTicks(ctrd[0]), sumTicks(shims)
	started := time.Now()
	time.Sleep(window)
	b1, c1, s1 := procTicks(pid), procTicks(ctrd[0]), sumTicks(shims)
	took := time.Since(started).Seconds()
	execAfter := metricValue(t, b, `berth_runtime_operations_total{operation_type="exec_sync"}`)
	pct := func(d float64) float64 { return d / 100 / took * 100 } // USER_HZ is 100
	return loadCost{
		berth: pct(b1 - b0), containerd: pct(c1 - c0), shims: pct(s1 - s0),
		rssMiB:     procRSSMiB(pid),
		execPerSec: (execAfter - execBefore) / took,
	}
}

// procsWith lists the pids whose command line has both name and arg.
func procsWith(name, arg string) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		s := string(cmd)
		if strings.Contains(s, name) && strings.Contains(s, arg) {
			out = append(out, pid)
		}
	}
	return out
}

// procTicks is the CPU time of pid and of its reaped children, in clock
// ticks: a shim's runc exec processes count towards the shim.
func procTicks(pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command (which may hold spaces) start after ")".
	f := strings.Fields(string(data)[strings.LastIndexByte(string(data), ')')+2:])
	var sum float64
	for _, i := range []int{11, 12, 13, 14} { // utime, stime, and of reaped children (runc exec)
		v, _ := strconv.ParseFloat(f[i], 64)
		sum += v
	}
	return sum
}

func sumTicks(pids []int) float64 {
	var t float64
	for _, p := range pids {
		t += procTicks(p)
	}
	return t
}

// procRSSMiB is VmRSS of pid.
func procRSSMiB(pid int) float64 {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "VmRSS:") {
			kb, _ := strconv.ParseFloat(strings.Fields(l)[1], 64)
			return kb / 1024
		}
	}
	return 0
}

// metricValue is the value of one series of berth's /metrics, 0 if absent.
func metricValue(t *testing.T, b *berth, series string) float64 {
	t.Helper()
	_, body, err := b.get("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, series+" ") {
			v, _ := strconv.ParseFloat(strings.TrimPrefix(l, series+" "), 64)
			return v
		}
	}
	return 0
}
