//go:build e2e

package kuberuntime

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/backoff"
	"github.com/berth-agent/berth/internal/criclient"
	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/podplan"
)

// syncE2EPod is a one-container busybox pod for the SyncPod e2e tests; it is
// stopped and removed, with its directory, when t ends.
func syncE2EPod(t *testing.T, m *Manager, name, script string) *v1.Pod {
	t.Helper()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-e2e", Namespace: "default",
			UID:    types.UID(fmt.Sprintf("%s-%d", name, time.Now().UnixNano())),
			Labels: map[string]string{"app": name},
		},
		Spec: v1.PodSpec{
			NodeName:      "e2e",
			RestartPolicy: v1.RestartPolicyAlways,
			Containers: []v1.Container{{
				Name: "app", Image: testBed.BusyboxImage, Command: []string{"sh", "-c", script},
				TerminationMessagePath: "/dev/termination-log",
			}},
			TerminationGracePeriodSeconds: new(int64(1)),
		},
	}
	t.Cleanup(func() {
		ctx := context.Background()
		st, err := m.PodStatus(ctx, pod.UID)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			return
		}
		if err := m.KillPod(ctx, pod, st, new(int64(0))); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if err := m.RemovePod(ctx, st); err != nil {
			t.Errorf("cleanup: %v", err)
		}
		if err := m.CleanupPodDir(pod.UID); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return pod
}

// syncUntil calls SyncPod the way the agent does (status, sync, requeue
// after the back-off) until ok accepts the pod's status, and returns every
// SyncPod result along with the final status.
func syncUntil(ctx context.Context, t *testing.T, m *Manager, pod *v1.Pod, what string, ok func(*podplan.PodStatus) bool) (*podplan.PodStatus, []SyncResult) {
	t.Helper()
	var results []SyncResult
	deadline := time.Now().Add(60 * time.Second)
	for {
		st, err := m.PodStatus(ctx, pod.UID)
		if err != nil {
			t.Fatal(err)
		}
		if ok(st) {
			return st, results
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached after 60s; status %+v; last results %+v", what, st, results[max(len(results)-3, 0):])
		}
		res := syncPlanned(ctx, m, pod, st)
		results = append(results, res)
		wait := 50 * time.Millisecond
		if d := res.RetryAfter(); d > 0 {
			wait = min(d, 200*time.Millisecond)
		}
		time.Sleep(wait)
	}
}

// containerRunning reports whether the named container's newest run is running.
func containerRunning(name string) func(*podplan.PodStatus) bool {
	return func(s *podplan.PodStatus) bool {
		c := s.FindContainer(name)
		return c != nil && c.State == podplan.ContainerStateRunning
	}
}

// waitLog waits until the container's CRI log file holds all of want.
func waitLog(t *testing.T, path string, want ...string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		missing := ""
		for _, w := range want {
			if !strings.Contains(string(b), w) {
				missing = w
				break
			}
		}
		if missing == "" {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("log %s lacks %q after 20s:\n%s", path, missing, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestE2ESyncPodNetworksEnvAndDownwardAPI brings up a pod-network pod and a
// host-network pod through SyncPod alone and reads env and downward API
// values back from the containers' CRI logs.
func TestE2ESyncPodNetworksEnvAndDownwardAPI(t *testing.T) {
	m := newE2EManagerWith(t, Options{HostIP: "192.0.2.10"})
	ctx := context.Background()
	_, subnet, err := net.ParseCIDR(testBed.Subnet)
	if err != nil {
		t.Fatal(err)
	}
	script := `echo "NAME=$POD_NAME NS=$POD_NS UID=$POD_UID APPLABEL=$APP IP=$POD_IP HOST=$HOST_IP MEM_MI=$MEM_MI CPU=$CPU GREETING=$GREETING"; exec sleep 3600`
	for _, hostNetwork := range []bool{false, true} {
		t.Run(fmt.Sprintf("hostNetwork=%v", hostNetwork), func(t *testing.T) {
			pod := syncE2EPod(t, m, "env", script)
			pod.Spec.HostNetwork = hostNetwork
			c := &pod.Spec.Containers[0]
			c.Env = []v1.EnvVar{
				{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
				{Name: "POD_NS", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
				{Name: "POD_UID", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.uid"}}},
				{Name: "APP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
				{Name: "POD_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
				{Name: "HOST_IP", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
				{Name: "MEM_MI", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}}},
				{Name: "CPU", ValueFrom: &v1.EnvVarSource{ResourceFieldRef: &v1.ResourceFieldSelector{Resource: "requests.cpu", Divisor: resource.MustParse("1m")}}},
				{Name: "WHO", Value: "$(POD_NAME)"},
				{Name: "GREETING", Value: "hello-$(WHO)-$$(WHO)"},
			}
			c.Resources = v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")},
				Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("96Mi")},
			}
			st, _ := syncUntil(ctx, t, m, pod, "app running", containerRunning("app"))

			sb := st.Sandboxes[0]
			wantIP := m.opts.HostIP
			if hostNetwork {
				if !sb.HostNetwork || sb.IP != "" {
					t.Errorf("host-network sandbox: hostNetwork %v, IP %q", sb.HostNetwork, sb.IP)
				}
			} else {
				if ip := net.ParseIP(sb.IP); ip == nil || !subnet.Contains(ip) {
					t.Fatalf("pod IP %q is not in the bed's subnet %s", sb.IP, testBed.Subnet)
				}
				wantIP = sb.IP
			}
			logPath := filepath.Join(m.opts.PodLogsDir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID), "app", "0.log")
			want := fmt.Sprintf("NAME=%s NS=default UID=%s APPLABEL=env IP=%s HOST=%s MEM_MI=96 CPU=250 GREETING=hello-%s-$(WHO)",
				pod.Name, pod.UID, wantIP, m.opts.HostIP, pod.Name)
			waitLog(t, logPath, want)
			if cs := st.FindContainer("app"); cs.Hash != criconfig.HashContainer(c) || cs.RestartCount != 0 {
				t.Errorf("status hash %x restart %d; want %x and 0", cs.Hash, cs.RestartCount, criconfig.HashContainer(c))
			}
		})
	}
}

// TestE2ESyncPodVolumesAndMemoryLimit shares a hostPath and an emptyDir
// between an init container, which writes, and the app container, which
// reads, and checks the app's memory limit in its cgroup.
func TestE2ESyncPodVolumesAndMemoryLimit(t *testing.T) {
	m := newE2EManager(t)
	ctx := context.Background()
	hostDir := filepath.Join(t.TempDir(), "data")
	pod := syncE2EPod(t, m, "vols",
		`cat /host/from-init /cache/from-init /mem/from-init; `+
			`echo "limit=$(cat /sys/fs/cgroup/memory.max 2>/dev/null || cat /sys/fs/cgroup/memory/memory.limit_in_bytes)"; `+
			`echo "tmpfs=$(grep ' /mem ' /proc/mounts | cut -d' ' -f3)"; exec sleep 3600`)
	dirOrCreate := v1.HostPathDirectoryOrCreate
	memLimit := resource.MustParse("16Mi")
	pod.Spec.Volumes = []v1.Volume{
		{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: hostDir, Type: &dirOrCreate}}},
		{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}},
		{Name: "mem", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumMemory, SizeLimit: &memLimit}}},
	}
	mounts := []v1.VolumeMount{{Name: "host", MountPath: "/host"}, {Name: "cache", MountPath: "/cache"}, {Name: "mem", MountPath: "/mem"}}
	pod.Spec.InitContainers = []v1.Container{{
		Name: "init", Image: testBed.BusyboxImage, VolumeMounts: mounts,
		Command: []string{"sh", "-c", "echo host-ok > /host/from-init; echo cache-ok > /cache/from-init; echo mem-ok > /mem/from-init"},
	}}
	app := &pod.Spec.Containers[0]
	app.VolumeMounts = mounts
	app.Resources.Limits = v1.ResourceList{v1.ResourceMemory: resource.MustParse("64Mi")}

	st, results := syncUntil(ctx, t, m, pod, "app running after init", containerRunning("app"))
	if init := st.FindContainer("init"); init == nil || init.State != podplan.ContainerStateExited || init.ExitCode != 0 {
		t.Fatalf("init container: %+v", init)
	}
	if results[0].Results[len(results[0].Results)-1].Action != ActionInitContainer {
		t.Errorf("first sync did not start the init container: %+v", results[0].Results)
	}
	logPath := filepath.Join(m.opts.PodLogsDir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID), "app", "0.log")
	waitLog(t, logPath, "host-ok", "cache-ok", "mem-ok", fmt.Sprintf("limit=%d", 64<<20), "tmpfs=tmpfs")
	if b, err := os.ReadFile(filepath.Join(hostDir, "from-init")); err != nil || string(b) != "host-ok\n" {
		t.Errorf("hostPath on the host: %q, %v", b, err)
	}
}

// TestE2ESyncPodCrashLoopBackoff restarts a container that exits at once
// through repeated SyncPod calls, with a 1s initial back-off: the restart
// count grows and each restart waits the doubled back-off after the exit.
func TestE2ESyncPodCrashLoopBackoff(t *testing.T) {
	m := newE2EManager(t)
	m.crashBackoff = backoff.New(m.clock, time.Second, 8*time.Second)
	ctx := context.Background()
	pod := syncE2EPod(t, m, "crash", "echo run; exit 3")

	start := time.Now()
	st, results := syncUntil(ctx, t, m, pod, "fourth run exited", func(s *podplan.PodStatus) bool {
		c := s.FindContainer("app")
		return c != nil && c.RestartCount == 3 && c.State == podplan.ContainerStateExited
	})
	elapsed := time.Since(start)

	runs := map[int]*podplan.ContainerStatus{}
	for _, c := range st.Containers {
		if c.Name == "app" {
			runs[c.RestartCount] = c
		}
	}
	for i := range 4 {
		if runs[i] == nil || runs[i].ExitCode != 3 {
			t.Fatalf("run %d: %+v, want exited 3", i, runs[i])
		}
	}
	// Runs 2 and 3 wait 1s and 2s after the exit before them.
	for i, want := range map[int]time.Duration{2: time.Second, 3: 2 * time.Second} {
		gap := runs[i].StartedAt.Sub(runs[i-1].FinishedAt)
		if gap < want-100*time.Millisecond || gap > want+2*time.Second {
			t.Errorf("run %d started %v after run %d exited, want about %v", i, gap, i-1, want)
		}
	}
	// Run 1 starts without a back-off: no sync backs off before the
	// second start. Its delay after the exit is the runtime's and this
	// loop's, seconds on a loaded machine, so it is not timed.
	backoffs, starts := 0, 0
	for _, r := range results {
		if w := r.Waiting("app"); w != nil && w.Reason == ReasonCrashLoopBackOff {
			backoffs++
			if starts < 2 {
				t.Errorf("a back-off after %d start(s): the first restart must not wait", starts)
			}
			if r.RetryAfter() <= 0 || r.RetryAfter() > 2*time.Second {
				t.Errorf("back-off result with retry after %v", r.RetryAfter())
			}
		}
		for _, a := range r.Results {
			if a.Action == ActionStartContainer && a.Target == "app" && a.Err == nil {
				starts++
			}
		}
	}
	if backoffs == 0 {
		t.Errorf("no CrashLoopBackOff result in %d syncs", len(results))
	}
	t.Logf("4 runs in %v with %d syncs (%d in back-off)", elapsed, len(results), backoffs)
}

// TestE2ESyncPodRunAsNonRootRefused asks for runAsNonRoot with the busybox
// image, which runs as root: the container is not created and the reason is
// a CreateContainerConfigError saying why.
func TestE2ESyncPodRunAsNonRootRefused(t *testing.T) {
	m := newE2EManager(t)
	ctx := context.Background()
	pod := syncE2EPod(t, m, "nonroot", "exec sleep 3600")
	pod.Spec.Containers[0].SecurityContext = &v1.SecurityContext{RunAsNonRoot: new(true)}
	res := syncPlanned(ctx, m, pod, nil)
	w := res.Waiting("app")
	if w == nil || w.Reason != ReasonCreateContainerConfigError {
		t.Fatalf("waiting = %v, want CreateContainerConfigError", w)
	}
	want := fmt.Sprintf(`container "app" has runAsNonRoot and image %q will run as root`, testBed.BusyboxImage)
	if !strings.Contains(w.Message, want) {
		t.Errorf("message = %q, want it to contain %q", w.Message, want)
	}
	st, err := m.PodStatus(ctx, pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Containers) != 0 {
		t.Errorf("containers created: %+v", st.Containers)
	}
	// With a non-root user the same pod runs.
	pod.Spec.Containers[0].SecurityContext.RunAsUser = new(int64(65534))
	syncUntil(ctx, t, m, pod, "app running as 65534", containerRunning("app"))
}

// TestE2ESyncPodStartupFigures measures, for 20 single-container pods with
// the image present, the CRI calls one SyncPod makes to bring a new pod up
// and the time from SyncPod's start to its return (the container was started
// when it returns), and logs the median and worst. Only the call count is
// asserted; the times are figures for the report.
func TestE2ESyncPodStartupFigures(t *testing.T) {
	bedRuntime, bedImages := dialTestBed(t)
	reg := prometheus.NewRegistry()
	rs, is := criclient.Instrument(bedRuntime, bedImages, reg)
	m := NewManager(rs, is, Options{NodeName: "e2e", RootDir: t.TempDir(), PodLogsDir: t.TempDir()})
	ctx := context.Background()
	const pods = 20
	var took []time.Duration
	for i := range pods {
		pod := syncE2EPod(t, m, fmt.Sprintf("figure%d", i), "exec sleep 3600")
		before := totalOps(t, reg)
		start := time.Now()
		res := syncPlanned(ctx, m, pod, nil)
		took = append(took, time.Since(start))
		if err := res.Error(); err != nil {
			t.Fatal(err)
		}
		if calls := totalOps(t, reg) - before; calls != 5 {
			t.Errorf("pod %d: %v CRI calls, want 5 (RunPodSandbox, PodSandboxStatus, ImageStatus, CreateContainer, StartContainer)", i, calls)
		}
	}
	var total, inCRI time.Duration
	for _, d := range took {
		total += d
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "berth_runtime_operations_duration_seconds" {
			continue
		}
		for _, mm := range mf.Metric {
			h := mm.GetHistogram()
			mean := time.Duration(h.GetSampleSum() / float64(h.GetSampleCount()) * float64(time.Second))
			inCRI += time.Duration(h.GetSampleSum() * float64(time.Second))
			t.Logf("  %v: %d calls, mean %v", mm.GetLabel()[0].GetValue(), h.GetSampleCount(), mean.Round(time.Millisecond))
		}
	}
	slices.Sort(took)
	t.Logf("SyncPod of a new single-container pod, %d pods: median %v, fastest %v, slowest %v; berth's own share %v per pod",
		pods, took[pods/2].Round(time.Millisecond), took[0].Round(time.Millisecond), took[pods-1].Round(time.Millisecond),
		((total - inCRI) / pods).Round(100*time.Microsecond))
}

// TestE2ESyncPodSidecar runs a sidecar (an init container with restartPolicy
// Always) that the next init container and the app rely on while it runs,
// then stops it: SyncPod restarts the sidecar and leaves the app alone.
//
// The sidecar replaces its beat file by a rename, so a reader sees a whole
// beat or none (a plain "echo > beat" truncates first, and a cat between
// the truncation and the write reads nothing); the readers wait until
// they see the beat, however long that takes, and syncUntil bounds the
// wait.
func TestE2ESyncPodSidecar(t *testing.T) {
	m := newE2EManager(t)
	ctx := context.Background()
	waitBeat := `until [ "$(cat /shared/beat 2>/dev/null)" = alive ]; do sleep 0.1; done; `
	pod := syncE2EPod(t, m, "sidecar", waitBeat+`echo "app sees $(cat /shared/beat)"; exec sleep 3600`)
	always := v1.ContainerRestartPolicyAlways
	shared := []v1.VolumeMount{{Name: "shared", MountPath: "/shared"}}
	pod.Spec.Volumes = []v1.Volume{{Name: "shared", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	pod.Spec.InitContainers = []v1.Container{
		{Name: "beat", Image: testBed.BusyboxImage, RestartPolicy: &always, VolumeMounts: shared,
			Command: []string{"sh", "-c", `trap "exit 0" TERM; while true; do echo alive > /shared/.beat && mv /shared/.beat /shared/beat; sleep 0.1; done`}},
		{Name: "check", Image: testBed.BusyboxImage, VolumeMounts: shared,
			Command: []string{"sh", "-c", waitBeat + `test -s /shared/beat`}},
	}
	pod.Spec.Containers[0].VolumeMounts = shared
	st, _ := syncUntil(ctx, t, m, pod, "app running beside the sidecar", func(s *podplan.PodStatus) bool {
		return containerRunning("app")(s) && containerRunning("beat")(s)
	})
	if c := st.FindContainer("check"); c == nil || c.State != podplan.ContainerStateExited || c.ExitCode != 0 {
		t.Fatalf("init container check: %+v", c)
	}
	waitLog(t, filepath.Join(m.opts.PodLogsDir, pod.Namespace+"_"+pod.Name+"_"+string(pod.UID), "app", "0.log"), "app sees alive")

	app := st.FindContainer("app")
	if err := m.KillContainer(ctx, pod, st.FindContainer("beat"), "test", "stop the sidecar", new(int64(1))); err != nil {
		t.Fatal(err)
	}
	st, _ = syncUntil(ctx, t, m, pod, "sidecar restarted", func(s *podplan.PodStatus) bool {
		c := s.FindContainer("beat")
		return c != nil && c.RestartCount == 1 && c.State == podplan.ContainerStateRunning
	})
	if got := st.FindContainer("app"); got.ID != app.ID || got.State != podplan.ContainerStateRunning {
		t.Errorf("app container changed with the sidecar's restart: %+v", got)
	}
}
