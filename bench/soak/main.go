// Command soak runs berth against a private containerd with pods that
// stress its disk garbage collection, and reports whether what berth leaves on
// disk and in memory stays flat: 20 crash-looping pods (a dead container
// every back-off) and 20 chatty pods (logs rotated all the time) for ten
// minutes by default. It prints the disk used under berth's log and root
// directories, berth's RSS and goroutine count, and the runtime's container
// count, at the start (once every pod has started) and at the end, with the
// GC counters.
//
//	make soak                      # 10 minutes
//	make soak SOAK_FLAGS='-duration 2m'
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/e2e/testbed"
)

func main() {
	var o options
	flag.StringVar(&o.berth, "berth", "bin/berth", "the berth binary")
	flag.DurationVar(&o.duration, "duration", 10*time.Minute, "how long the pods run after they all started")
	flag.IntVar(&o.crashers, "crashers", 20, "crash-looping pods")
	flag.IntVar(&o.chatty, "chatty", 20, "chatty pods")
	flag.IntVar(&o.chattyKiBps, "chatty-rate", 64, "KiB per second each chatty pod writes")
	flag.StringVar(&o.berthArgs, "berth-args", "--crashloop-backoff-max 10s --container-log-max-size 1Mi --container-log-monitor-interval 10s",
		"extra berth flags (space-separated): a short back-off and a small log size make ten minutes worth months")
	flag.DurationVar(&o.sample, "sample", 30*time.Second, "how often progress is printed")
	flag.DurationVar(&o.warmup, "warmup", time.Minute, "how long after all pods started the start figures are taken (logs fill up to their rotation size first)")
	flag.BoolVar(&o.keep, "keep", false, "keep berth's directories and log after the run")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

type options struct {
	berth                 string
	duration, sample      time.Duration
	warmup                time.Duration
	keep                  bool
	crashers, chatty      int
	chattyKiBps           int
	berthArgs             string
	dir, logs, root, addr string
}

// figures is one measurement.
type figures struct {
	at                    time.Duration
	logBytes, rootBytes   int64
	logFiles, rootFiles   int
	rssBytes              int64
	goroutines            float64
	containers, dead      int
	sandboxes             int
	gcRemoved, rotations  float64
	gcErrors, rotationErr float64
}

func run(ctx context.Context, o options) error {
	berthBin, err := filepath.Abs(o.berth)
	if err != nil {
		return err
	}
	if _, err := os.Stat(berthBin); err != nil {
		return fmt.Errorf("berth binary: %w (run make build)", err)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	bed, err := testbed.Start(testbed.Options{})
	if err != nil {
		return fmt.Errorf("start the test bed: %w", err)
	}
	defer bed.Close()
	if o.dir, err = os.MkdirTemp("", "berth-soak-"); err != nil {
		return err
	}
	if o.keep {
		defer fmt.Printf("soak: kept %s (berth.log, manifests, pods, root)\n", o.dir)
	} else {
		defer os.RemoveAll(o.dir)
	}
	o.logs, o.root = filepath.Join(o.dir, "pods"), filepath.Join(o.dir, "root")
	manifests := filepath.Join(o.dir, "manifests")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		return err
	}
	for i := range o.crashers {
		if err := writeManifest(manifests, fmt.Sprintf("crash-%02d", i), crasherManifest(i)); err != nil {
			return err
		}
	}
	for i := range o.chatty {
		if err := writeManifest(manifests, fmt.Sprintf("chatty-%02d", i), chattyManifest(i, o.chattyKiBps)); err != nil {
			return err
		}
	}
	if o.addr, err = freeAddr(); err != nil {
		return err
	}
	args := append([]string{"run",
		"--pod-manifest-path", manifests, "--container-runtime-endpoint", bed.Endpoint,
		"--root-dir", o.root, "--pod-logs-dir", o.logs, "--listen", o.addr, "--socket", "",
		"--hostname-override", "soak", "--log-level", "info",
	}, strings.Fields(o.berthArgs)...)
	logFile, err := os.Create(filepath.Join(o.dir, "berth.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(berthBin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	defer stopBerth(cmd)
	fmt.Printf("soak: berth %s, %d crash-looping and %d chatty pods (%d KiB/s each), %s; berth flags: %s\n",
		berthBin, o.crashers, o.chatty, o.chattyKiBps, o.duration, o.berthArgs)

	// Start once every pod has started a container.
	began := time.Now()
	want := o.crashers + o.chatty
	for {
		f, err := measure(ctx, o, bed, cmd.Process.Pid, 0)
		if err == nil && f.sandboxes >= want && f.containers >= want {
			break
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if time.Since(began) > 3*time.Minute {
			return fmt.Errorf("pods not all started after 3 minutes (%+v, %v); see %s", f, err, logFile.Name())
		}
		time.Sleep(time.Second)
	}
	fmt.Printf("soak: all %d pods started in %s\n", want, time.Since(began).Round(time.Millisecond))
	start := time.Now()
	f, err := measure(ctx, o, bed, cmd.Process.Pid, 0)
	if err != nil {
		return err
	}
	printRow(f, true)
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(o.warmup):
	}
	first, err := measure(ctx, o, bed, cmd.Process.Pid, time.Since(start))
	if err != nil {
		return err
	}
	printRow(first, false)
	rows := []figures{first}
	fmt.Printf("soak: warm-up over: start figures taken; running %s\n", o.duration)
	tick := time.NewTicker(o.sample)
	defer tick.Stop()
	end := time.After(o.duration)
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case <-end:
			break loop
		case <-tick.C:
			f, err := measure(ctx, o, bed, cmd.Process.Pid, time.Since(start))
			if err != nil {
				return err
			}
			rows = append(rows, f)
			printRow(f, false)
		}
		if cmd.ProcessState != nil {
			return fmt.Errorf("berth exited; see %s", logFile.Name())
		}
	}
	last, err := measure(context.Background(), o, bed, cmd.Process.Pid, time.Since(start))
	if err != nil {
		return err
	}
	rows = append(rows, last)
	report(first, last, rows)
	return warnings(logFile.Name())
}

// warnings prints how many WARN and ERROR lines berth logged besides the
// crash loops' back-off, and the last few of them.
func warnings(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var bad []string
	for _, line := range strings.Split(string(data), "\n") {
		// The crash loops' back-off is the point of the soak, not a problem.
		if strings.Contains(line, "event=BackOff") || strings.Contains(line, "CrashLoopBackOff") {
			continue
		}
		if strings.Contains(line, "level=WARN") || strings.Contains(line, "level=ERROR") {
			bad = append(bad, line)
		}
	}
	fmt.Printf("soak: berth logged %d WARN/ERROR lines\n", len(bad))
	for _, l := range bad[max(len(bad)-5, 0):] {
		fmt.Println("  ", l)
	}
	return nil
}

// crasherManifest is a pod whose container prints a line and exits 1.
func crasherManifest(i int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: crash-%02d
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox:1.36
    command: ["sh", "-c", "echo crash $(date); exit 1"]
`, i)
}

// chattyManifest is a pod whose container writes kib KiB of log lines a
// second, in bursts of 4 KiB of 128-byte lines every 1/(kib/4) s.
func chattyManifest(i, kib int) string {
	bursts := max(kib/4, 1)
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: chatty-%02d
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: app
    image: busybox:1.36
    command: ["sh", "-c", "trap 'exit 0' TERM; pad=$(printf '%%0100d' 0); i=0; while true; do j=0; while [ $j -lt 32 ]; do echo \"line $i $pad\"; i=$((i+1)); j=$((j+1)); done; usleep %d; done"]
`, i, 1_000_000/bursts)
}

func writeManifest(dir, name, content string) error {
	tmp := filepath.Join(dir, "."+name+".yaml")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, name+".yaml"))
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// stopBerth stops berth (pods keep running; the bed's Close removes them).
func stopBerth(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// measure takes one set of figures.
func measure(ctx context.Context, o options, bed *testbed.Bed, pid int, at time.Duration) (figures, error) {
	f := figures{at: at}
	var err error
	if f.logBytes, f.logFiles, err = diskUsage(o.logs); err != nil {
		return f, err
	}
	if f.rootBytes, f.rootFiles, err = diskUsage(o.root); err != nil {
		return f, err
	}
	if f.rssBytes, err = rss(pid); err != nil {
		return f, err
	}
	metrics, err := scrape(ctx, "http://"+o.addr+"/metrics")
	if err != nil {
		return f, err
	}
	f.goroutines = metrics["go_goroutines"]
	f.gcRemoved = metrics[`berth_container_gc_removed_total{kind="container"}`]
	f.rotations = metrics["berth_log_rotations_total"]
	f.gcErrors = metrics["berth_gc_errors_total"]
	f.rotationErr = metrics["berth_log_rotation_errors_total"]
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	managed := map[string]string{"io.berth.managed": "true"}
	cs, err := bed.Runtime().ListContainers(cctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{LabelSelector: managed}})
	if err != nil {
		return f, err
	}
	for _, c := range cs.Containers {
		f.containers++
		if c.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			f.dead++
		}
	}
	sbs, err := bed.Runtime().ListPodSandbox(cctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: managed}})
	if err != nil {
		return f, err
	}
	f.sandboxes = len(sbs.Items)
	return f, nil
}

// diskUsage is the space the files under dir take on disk (allocated
// blocks, as du counts) and how many files there are.
func diskUsage(dir string) (int64, int, error) {
	var total int64
	var files int
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed while walking
			}
			return err
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			total += st.Blocks * 512
		}
		if !d.IsDir() {
			files++
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, nil
	}
	return total, files, err
}

// rss is the process's resident set size from /proc.
func rss(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, errors.New("no VmRSS")
}

// scrape reads the unlabelled and labelled samples of a Prometheus text
// page by their series text.
func scrape(ctx context.Context, url string) (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out, sc.Err()
}

func printRow(f figures, header bool) {
	if header {
		fmt.Printf("%8s %10s %6s %10s %6s %9s %5s %6s %5s %9s %9s\n", "t", "logs", "files", "root", "files", "rss", "gor", "ctrs", "dead", "gc-rm", "rotations")
	}
	fmt.Printf("%8s %10s %6d %10s %6d %9s %5.0f %6d %5d %9.0f %9.0f\n", f.at.Round(time.Second), size(f.logBytes), f.logFiles,
		size(f.rootBytes), f.rootFiles, size(f.rssBytes), f.goroutines, f.containers, f.dead, f.gcRemoved, f.rotations)
}

// report prints the start and end figures side by side, and the largest
// value seen of the ones that should stay flat.
func report(first, last figures, rows []figures) {
	peak := first
	for _, r := range rows {
		peak.logBytes = max(peak.logBytes, r.logBytes)
		peak.rootBytes = max(peak.rootBytes, r.rootBytes)
		peak.rssBytes = max(peak.rssBytes, r.rssBytes)
		peak.goroutines = max(peak.goroutines, r.goroutines)
		peak.dead = max(peak.dead, r.dead)
	}
	fmt.Printf("\nsoak: %s after all pods started\n", last.at.Round(time.Second))
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "figure\tstart\tend\tpeak\t")
	fmt.Fprintf(w, "disk under the log dir\t%s\t%s\t%s\t\n", size(first.logBytes), size(last.logBytes), size(peak.logBytes))
	fmt.Fprintf(w, "disk under the root dir\t%s\t%s\t%s\t\n", size(first.rootBytes), size(last.rootBytes), size(peak.rootBytes))
	fmt.Fprintf(w, "berth RSS\t%s\t%s\t%s\t\n", size(first.rssBytes), size(last.rssBytes), size(peak.rssBytes))
	fmt.Fprintf(w, "berth goroutines\t%.0f\t%.0f\t%.0f\t\n", first.goroutines, last.goroutines, peak.goroutines)
	fmt.Fprintf(w, "dead containers in the runtime\t%d\t%d\t%d\t\n", first.dead, last.dead, peak.dead)
	fmt.Fprintf(w, "containers removed by GC\t%.0f\t%.0f\t\t\n", first.gcRemoved, last.gcRemoved)
	fmt.Fprintf(w, "log rotations\t%.0f\t%.0f\t\t\n", first.rotations, last.rotations)
	fmt.Fprintf(w, "GC / rotation errors\t%.0f / %.0f\t%.0f / %.0f\t\t\n", first.gcErrors, first.rotationErr, last.gcErrors, last.rotationErr)
	w.Flush()
}

func size(b int64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.2fGiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(b)/(1<<20))
	default:
		return fmt.Sprintf("%.0fKiB", float64(b)/(1<<10))
	}
}
