//go:build e2e

package e2e

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/e2e/testbed"
)

// TestGCCrashLoopKeepsAllowedDeadContainers runs a pod whose container
// exits at once, with the kubelet's default of one dead container per
// container: however often it restarts, the runtime holds at most that one
// dead container (plus one that died since the last pass) and the log
// directory as many files; `berth logs --previous` still works; and the
// pod's events say what was collected.
func TestGCCrashLoopKeepsAllowedDeadContainers(t *testing.T) {
	b := newBerth(t, berthOptions{args: append([]string{"--crashloop-backoff-max", "1s"}, fastBackoff[:2]...)})
	b.waitReady()
	pod := newPod("crasher", shContainer("app", "echo run $(date +%s%N); exit 1"))
	b.writeManifest("crasher.yaml", podManifest(pod))
	name := podName("crasher")

	maxDead, maxFiles := 0, 0
	var api *v1.Pod
	b.waitFor("crasher to restart 6 times", 2*waitTimeout, func() (bool, string) {
		cs, err := containersOf(name)
		if err != nil {
			return false, err.Error()
		}
		dead := len(cs) - len(runningContainers(cs))
		maxDead = max(maxDead, dead)
		if api, err = b.apiPod(name); err != nil || api == nil {
			return false, fmt.Sprint("not in /pods: ", err)
		}
		if files, err := os.ReadDir(filepath.Dir(b.podLogPath(api, "app", 0))); err == nil {
			maxFiles = max(maxFiles, len(files))
		}
		st := containerStatus(api, "app")
		return st != nil && st.RestartCount >= 6, fmt.Sprintf("%s; %d dead containers", describePod(api), dead)
	})
	// One dead container is allowed. A pass runs on the relist that sees
	// a run die, so another run or two may have died since the last one
	// on a busy machine (restarts come every second here); without GC
	// there would be a dead container per run, 6 or more.
	if maxDead > 3 {
		t.Errorf("up to %d dead containers at once, want at most 3 (1 allowed + up to 2 not yet collected)", maxDead)
	}
	if maxFiles > 4 {
		t.Errorf("up to %d log files at once, want at most 4", maxFiles)
	}
	// Between a pass and the next death exactly the allowed one is left.
	b.waitFor("exactly the allowed dead container", waitTimeout, func() (bool, string) {
		cs, err := containersOf(name)
		if err != nil {
			return false, err.Error()
		}
		var dead []*runtimeapi.Container
		for _, c := range cs {
			if c.State == runtimeapi.ContainerState_CONTAINER_EXITED {
				dead = append(dead, c)
			}
		}
		return len(dead) == 1, describeContainers(dead)
	})
	t.Logf("crash loop: at most %d dead containers and %d log files seen", maxDead, maxFiles)

	// The previous run's log is still there.
	b.waitFor("logs --previous", waitTimeout, func() (bool, string) {
		code, body, err := b.getUnix("/pods/default/" + name + "/log?container=app&previous=true")
		if err != nil {
			return false, err.Error()
		}
		return code == 200 && strings.HasPrefix(string(body), "run "), fmt.Sprintf("%d %s", code, body)
	})

	b.waitFor("a ContainerGC event", waitTimeout, func() (bool, string) {
		code, body, err := b.get("/pods/default/" + name + "/events")
		if err != nil {
			return false, err.Error()
		}
		return code == 200 && strings.Contains(string(body), "ContainerGC") &&
			strings.Contains(string(body), "of container app (maximum-dead-containers-per-container)"), string(body)
	})
	// berth describe shows what was collected.
	out, err := exec.Command(berthBin, "describe", "crasher", "--socket", b.socket).CombinedOutput()
	if err != nil || !regexp.MustCompile(`Normal\s+ContainerGC\s+.*Removed \d+ dead runs? of container app`).Match(out) {
		t.Errorf("berth describe crasher (%v) shows no ContainerGC event:\n%s", err, out)
	}
	b.waitFor("berth_container_gc_removed_total", waitTimeout, func() (bool, string) {
		v, detail := b.metric(`berth_container_gc_removed_total{kind="container"}`)
		return v >= 3, detail
	})

	// Each run's termination-message file goes with it.
	msgs, err := os.ReadDir(filepath.Join(b.root, "pods", string(api.UID), "containers", "app"))
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) > 3 {
		t.Errorf("%d termination-message files after %d runs, want at most 3", len(msgs), containerStatus(api, "app").RestartCount+1)
	}

	// Removing the pod removes every run and its log directory.
	b.removeManifest("crasher.yaml")
	b.waitGone(name)
	logDir := filepath.Dir(filepath.Dir(b.podLogPath(api, "app", 0)))
	b.waitFor("the log directory removed", waitTimeout, func() (bool, string) {
		_, err := os.Stat(logDir)
		return errors.Is(err, fs.ErrNotExist), fmt.Sprint(err)
	})
}

// TestGCRotatesChattyLogs runs a container that writes about 200 KiB/s
// with a 64 KiB size limit: its log is rotated into gzipped files, never
// more than --container-log-max-files of them, the current file is still
// written after every rotation, and `berth logs` reads it.
func TestGCRotatesChattyLogs(t *testing.T) {
	b := newBerth(t, berthOptions{args: []string{
		"--container-log-max-size", "64Ki", "--container-log-max-files", "4", "--container-log-monitor-interval", "1s",
	}})
	b.waitReady()
	// 100 lines of ~200 bytes every 0.1 s.
	script := `pad=$(printf '%0180d' 0); i=0; while true; do j=0; while [ $j -lt 100 ]; do echo "line $i $pad"; i=$((i+1)); j=$((j+1)); done; usleep 100000; done`
	pod := newPod("chatty", shContainer("app", script))
	b.writeManifest("chatty.yaml", podManifest(pod))
	name := podName("chatty")
	api := b.waitRunning(name)
	dir := filepath.Dir(b.podLogPath(api, "app", 0))
	current := filepath.Join(dir, "0.log")
	// A compression in progress shows as .gz.tmp, removed or renamed
	// when done.
	rotated := regexp.MustCompile(`^0\.log\.\d{8}-\d{6}(\.gz)?(\.tmp)?$`)

	maxFiles := 0
	var gz []string
	b.waitFor("two compressed rotations", 2*waitTimeout, func() (bool, string) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return false, err.Error()
		}
		var names []string
		gz = gz[:0]
		files := 0
		for _, e := range entries {
			names = append(names, e.Name())
			if !strings.HasSuffix(e.Name(), ".tmp") {
				files++
			}
			if e.Name() != "0.log" && !rotated.MatchString(e.Name()) {
				t.Errorf("unexpected file %s in the log directory", e.Name())
			}
			if strings.HasSuffix(e.Name(), ".gz") {
				gz = append(gz, e.Name())
			}
		}
		maxFiles = max(maxFiles, files)
		return len(gz) >= 2, strings.Join(names, " ")
	})
	if maxFiles > 4 {
		t.Errorf("up to %d files in the log directory, want at most 4", maxFiles)
	}
	// A compressed rotation is a whole CRI log.
	lines := gunzipLines(t, filepath.Join(dir, gz[len(gz)-1]))
	if len(lines) < 100 || !strings.Contains(lines[len(lines)-1], " stdout F line ") {
		t.Errorf("compressed rotation has %d lines, last %q", len(lines), lines[len(lines)-1:])
	}
	// The current file is still written, and berth logs reads its end.
	last := func() (int, string) {
		code, body, err := b.getUnix("/pods/default/" + name + "/log?tailLines=1")
		if err != nil || code != 200 {
			return -1, fmt.Sprintf("%d %s %v", code, body, err)
		}
		f := strings.Fields(string(body))
		if len(f) < 2 || f[0] != "line" {
			return -1, string(body)
		}
		n, _ := strconv.Atoi(f[1])
		return n, string(body)
	}
	first := -1
	b.waitFor("berth logs to read the current file", waitTimeout, func() (bool, string) {
		n, detail := last()
		first = n
		return n >= 0, detail
	})
	b.waitFor("the current log to advance", waitTimeout, func() (bool, string) {
		n, detail := last()
		return n > first+1000, detail
	})
	if fi, err := os.Stat(current); err != nil || fi.Size() == 0 {
		t.Errorf("current log: %v", err)
	}
	b.waitFor("berth_log_rotations_total", waitTimeout, func() (bool, string) {
		v, detail := b.metric("berth_log_rotations_total")
		return v >= 2, detail
	})
	t.Logf("chatty: %d compressed rotations, at most %d files", len(gz), maxFiles)
}

// TestGCRemovedPodLeavesNothing removes a pod whose containers crashed
// (dead containers, rotated-size logs, an emptyDir): once it is gone,
// neither the runtime nor the log or root directories hold anything of it.
// A leftover pod directory of a pod that no longer exists, made while berth
// was down, is removed at start.
func TestGCRemovedPodLeavesNothing(t *testing.T) {
	b := newBerth(t, berthOptions{noStart: true, args: fastBackoff})
	leftover := filepath.Join(b.root, "pods", "0123-leftover")
	leftoverLogs := filepath.Join(b.logs, "default_old-"+nodeName+"_0123-leftover", "app")
	for _, d := range []string{filepath.Join(leftover, "volumes", "kubernetes.io~empty-dir", "data"), leftoverLogs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(leftoverLogs, "0.log"), []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.start()
	b.waitReady()
	b.waitFor("the leftover pod directories removed", waitTimeout, func() (bool, string) {
		_, err1 := os.Stat(leftover)
		_, err2 := os.Stat(filepath.Dir(leftoverLogs))
		return errors.Is(err1, fs.ErrNotExist) && errors.Is(err2, fs.ErrNotExist), fmt.Sprint(err1, err2)
	})

	pod := newPod("doomed",
		shContainer("main", "echo hi > /data/x; "+sleepForever),
		shContainer("crash", "echo crash; exit 2"))
	pod.Spec.Volumes = []v1.Volume{{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}
	b.writeManifest("doomed.yaml", podManifest(pod))
	name := podName("doomed")
	var api *v1.Pod
	b.waitFor("doomed to crash twice", waitTimeout, func() (bool, string) {
		var err error
		if api, err = b.apiPod(name); err != nil || api == nil {
			return false, fmt.Sprint(err)
		}
		st := containerStatus(api, "crash")
		return st != nil && st.RestartCount >= 2, describePod(api)
	})
	logDir := filepath.Dir(filepath.Dir(b.podLogPath(api, "main", 0)))
	podDir := filepath.Join(b.root, "pods", string(api.UID))
	for _, d := range []string{logDir, podDir} {
		if _, err := os.Stat(d); err != nil {
			t.Fatalf("before removal: %v", err)
		}
	}

	b.removeManifest("doomed.yaml")
	b.waitGone(name)
	b.waitFor("the pod's directories removed", waitTimeout, func() (bool, string) {
		var left []string
		for _, d := range []string{logDir, podDir} {
			if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
				left = append(left, d)
			}
		}
		return len(left) == 0, strings.Join(left, " ")
	})
	// Nothing of any pod is left under the log and root directories.
	for _, d := range []string{b.logs, filepath.Join(b.root, "pods")} {
		entries, err := os.ReadDir(d)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if len(names) > 0 {
			t.Errorf("%s still holds %v", d, names)
		}
	}
}

// metric reads one sample of berth's /metrics by its exact series text
// (name and labels), -1 when absent.
func (b *berth) metric(series string) (float64, string) {
	return b.scrape()(series)
}

// scrape reads /metrics once and returns a lookup of series in that one
// reading, as metric does, for values that must be compared with each
// other: two readings may fall on either side of an observation.
func (b *berth) scrape() func(series string) (float64, string) {
	code, body, err := b.get("/metrics")
	return func(series string) (float64, string) {
		if err != nil || code != 200 {
			return -1, fmt.Sprintf("%d %v", code, err)
		}
		for _, line := range strings.Split(string(body), "\n") {
			if v, ok := strings.CutPrefix(line, series+" "); ok {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					return -1, line
				}
				return f, line
			}
		}
		return -1, series + " absent"
	}
}

// gunzipLines reads a gzipped file's lines.
func gunzipLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(strings.Split(string(data), "\n"), func(s string) bool { return s == "" })
}

// TestGCIdleMakesNoRuntimeCalls: with a running pod whose log stays under
// the limit, housekeeping (GC passes every relist change and every 2 s, log
// checks every second here) adds no runtime call to the relist's lists: it
// works from the relist snapshot and stats log files.
func TestGCIdleMakesNoRuntimeCalls(t *testing.T) {
	b := newBerth(t, berthOptions{
		args:      []string{"--container-log-monitor-interval", "1s"},
		manifests: map[string]string{"idle.yaml": podManifest(sleeper("idle"))},
	})
	b.waitReady()
	b.waitRunning(podName("idle"))
	ops := func() map[string]float64 {
		code, body, err := b.get("/metrics")
		if err != nil || code != 200 {
			t.Fatalf("metrics: %d %v", code, err)
		}
		out := map[string]float64{}
		for _, line := range strings.Split(string(body), "\n") {
			rest, ok := strings.CutPrefix(line, `berth_runtime_operations_total{operation_type="`)
			if !ok {
				continue
			}
			op, val, _ := strings.Cut(rest, `"} `)
			out[op], _ = strconv.ParseFloat(val, 64)
		}
		return out
	}
	// Let the start settle: the pod's own status reads and the first
	// passes.
	time.Sleep(3 * time.Second)
	before := ops()
	time.Sleep(6 * time.Second)
	after := ops()
	for op, n := range after {
		if n == before[op] {
			continue
		}
		switch op {
		case "list_containers", "list_podsandbox":
		default:
			t.Errorf("idle housekeeping called %s %v times in 6 s", op, n-before[op])
		}
	}
	t.Logf("runtime operations over 6 s of idle: %v", diffOps(before, after))
}

func diffOps(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for op, n := range after {
		if d := n - before[op]; d > 0 {
			out[op] = d
		}
	}
	return out
}

// TestGCRemovesUnusedImages: with the image filesystem above the high
// threshold, berth's first image pass comes once every source is ready,
// not a period (5 minutes) later, and removes an image nothing uses while
// it keeps the image of a running pod, adopted across a restart of berth,
// and the sandbox image. The removal is logged and counted in /metrics.
func TestGCRemovesUnusedImages(t *testing.T) {
	const victim = "docker.io/library/berth-gc-victim:1"
	b := newBerth(t, berthOptions{})
	b.waitReady()
	b.writeManifest("keeper.yaml", podManifest(newPod("keeper", shContainer("app", "trap 'exit 0' TERM; sleep 100000 & wait"))))
	b.waitRunning(podName("keeper"))
	b.collectImagesNow(t, victim)
	if !b.logContains(`msg="image garbage collected"`) || !b.logContains(victim) {
		t.Error("berth's log does not name the collected image")
	}
	for _, ref := range []string{testbed.BusyboxRef, testbed.PauseRef} {
		if imageExists(t, ref) == "" {
			t.Errorf("image GC removed %s, which a running pod uses", ref)
		}
	}
	if cs, err := containersOf(podName("keeper")); err != nil || len(runningContainers(cs)) != 1 {
		t.Errorf("the keeper pod's container after the pass: %v %v", cs, err)
	}
}

// collectImagesNow imports victim, an image nothing uses, and restarts b
// with image GC thresholds that make every image a candidate at once (no
// minimum age) and any use of the disk too much, so that only images in
// use or kept survive; it returns once victim is removed.
func (b *berth) collectImagesNow(t *testing.T, victim string) {
	t.Helper()
	archive, err := testbed.ScratchImageArchive(t.TempDir(), victim)
	if err != nil {
		t.Fatal(err)
	}
	if err := bed.ImportImage(archive, victim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = bed.Ctr("images", "rm", victim) })
	b.stop()
	b.args = append(b.args, "--image-gc-high-threshold", "1", "--image-gc-low-threshold", "0", "--minimum-image-gc-age", "0s")
	b.start()
	b.waitReady()
	b.waitFor("the unused image removed", waitTimeout, func() (bool, string) {
		n, _ := b.metric("berth_image_gc_removed_total")
		return imageExists(t, victim) == "" && n >= 1, fmt.Sprintf("%g images removed", n)
	})
}

// imageExists returns the ID CRI gives ref, or "" if it has no such image.
func imageExists(t *testing.T, ref string) string {
	t.Helper()
	ctx, cancel := criCtx()
	defer cancel()
	resp, err := bed.Images().ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
	if err != nil {
		t.Fatalf("image status of %s: %v", ref, err)
	}
	return resp.GetImage().GetId()
}
