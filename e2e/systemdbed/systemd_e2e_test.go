//go:build e2e

package systemdbed

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/e2e/testbed"
)

// The tests of this file run in order on one booted machine: each leaves
// berth installed and running with the pods of manifests() unless it says
// otherwise, and the .deb's life (remove, purge) comes last.

var (
	bed *Bed
	// debs are berth's package, copied into the machine's /root: debV1 the
	// previous version's (packaging/release.sh with the fixed version
	// v0.0.0), debV2 the released one (make release), which an upgrade
	// from debV1 installs. releasedVersion is debV2's version.
	debV1, debV2    = "/root/berth-previous.deb", "/root/berth-released.deb"
	releasedVersion string
	// releaseDir is the release, with SHA256SUMS signed by a throwaway
	// key whose allowed signers file is releaseSigners (TestInstallPage).
	releaseDir, releaseSigners string
)

const manifestDir = "/etc/kubernetes/manifests"

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if err := Prerequisites(); err != nil {
		fmt.Fprintln(os.Stderr, "systemdbed: skipping every test:", err)
		return m.Run() // each test skips
	}
	started := time.Now()
	tmp, err := newOwnedDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "systemdbed:", err)
		return 1
	}
	defer os.RemoveAll(tmp)
	// Building and packaging berth and booting the machine take about as
	// long: do both at once.
	type built struct {
		debs []string
		err  error
	}
	debsDone := make(chan built, 1)
	go func() {
		debs, err := buildDebs(tmp)
		debsDone <- built{debs, err}
	}()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	bed, err = Start(logf)
	d := <-debsDone
	if err != nil {
		fmt.Fprintln(os.Stderr, "systemdbed: start:", err)
		return 1
	}
	defer func() {
		if err := bed.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "systemdbed: close:", err)
		}
	}()
	if d.err != nil {
		fmt.Fprintln(os.Stderr, "systemdbed:", d.err)
		bed.Close()
		return 1
	}
	for i, deb := range d.debs {
		data, err := os.ReadFile(deb)
		if err == nil {
			err = bed.WriteFile([]string{debV1, debV2}[i], data, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "systemdbed:", err)
			return 1
		}
	}
	fmt.Fprintf(os.Stderr, "systemdbed: machine up in %s (rootfs, berth, two .debs, boot, images)\n", time.Since(started).Round(time.Millisecond))
	return m.Run()
}

// buildDebs returns the previous version's package and the released
// amd64 one. The release is $BERTH_RELEASE_DIR's (make test runs make
// release first) or, without it, one packaging/release.sh builds here for
// the host's architecture; it is copied to dir and its SHA256SUMS signed
// with a throwaway key, as the install page verifies it. The previous
// version is built by release.sh from the same tree with the version
// v0.0.0, older than any release.
func buildDebs(dir string) ([]string, error) {
	goarch := runtime.GOARCH
	debArch := map[string]string{"amd64": "amd64", "arm64": "arm64", "arm": "armhf"}[goarch]
	releaseDir = filepath.Join(dir, "release")
	if err := os.MkdirAll(releaseDir, 0o755); err != nil {
		return nil, err
	}
	releaseSh := func(out string, env ...string) error {
		cmd := exec.Command("sh", "packaging/release.sh", out)
		cmd.Dir = "../.."
		cmd.Env = append(os.Environ(), append([]string{"RELEASE_ARCHES=" + goarch}, env...)...)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("release.sh %v: %w\n%s", env, err, b)
		}
		return nil
	}
	if from := os.Getenv("BERTH_RELEASE_DIR"); from != "" {
		debs, _ := filepath.Glob(filepath.Join(from, "berth_*_"+debArch+".deb"))
		if len(debs) != 1 {
			return nil, fmt.Errorf("BERTH_RELEASE_DIR=%s holds %d berth_*_%s.deb, want one (make release)", from, len(debs), debArch)
		}
		sums, err := os.ReadFile(filepath.Join(from, "SHA256SUMS"))
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(releaseDir, "SHA256SUMS"), sums, 0o644); err != nil {
			return nil, err
		}
		deb, err := os.ReadFile(debs[0])
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(releaseDir, filepath.Base(debs[0])), deb, 0o644); err != nil {
			return nil, err
		}
	} else if err := releaseSh(releaseDir); err != nil {
		return nil, err
	}
	key := filepath.Join(dir, "release-key")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ssh-keygen: %w\n%s", err, out)
	}
	sign := exec.Command("ssh-keygen", "-q", "-Y", "sign", "-f", key, "-n", "berth-release", "SHA256SUMS")
	sign.Dir = releaseDir
	if out, err := sign.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("sign SHA256SUMS: %w\n%s", err, out)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		return nil, err
	}
	f := strings.Fields(string(pub))
	releaseSigners = filepath.Join(dir, "berth-release-signers")
	if err := os.WriteFile(releaseSigners, []byte("berth-release namespaces=\"berth-release\" "+f[0]+" "+f[1]+"\n"), 0o644); err != nil {
		return nil, err
	}
	released, _ := filepath.Glob(filepath.Join(releaseDir, "berth_*_"+debArch+".deb"))
	if len(released) != 1 {
		return nil, fmt.Errorf("the release holds %d berth_*_%s.deb, want one", len(released), debArch)
	}
	v, err := exec.Command("dpkg-deb", "-f", released[0], "Version").Output()
	if err != nil {
		return nil, fmt.Errorf("dpkg-deb -f %s: %w", released[0], err)
	}
	releasedVersion = strings.TrimSpace(string(v))
	previous := filepath.Join(dir, "previous")
	if err := releaseSh(previous, "VERSION=v0.0.0"); err != nil {
		return nil, err
	}
	return []string{filepath.Join(previous, "berth_0.0.0_"+debArch+".deb"), released[0]}, nil
}

// needBed skips t when the machine cannot run a bed (TestMain said why).
func needBed(t *testing.T) {
	t.Helper()
	if bed == nil {
		t.Skip(Prerequisites())
	}
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := bed.Exec("journalctl", "-u", "berth", "-u", "containerd", "--no-pager", "-n", "60", "-o", "short-monotonic")
			t.Logf("journal of berth and containerd:\n%s", out)
		}
	})
}

// sh runs a shell script in the machine and fails t on error.
func sh(t *testing.T, script string) string {
	t.Helper()
	out, err := bed.Exec("sh", "-c", script)
	if err != nil {
		t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return strings.TrimSpace(out)
}

// show returns `systemctl show berth` properties.
func show(t *testing.T, props ...string) map[string]string {
	t.Helper()
	out := sh(t, "systemctl show berth -p "+strings.Join(props, ","))
	m := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(line, "=")
		m[k] = v
	}
	return m
}

// waitFor polls cond until it holds or timeout passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last: %s", what, timeout, detail)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sleeper is a pod of one busybox container that sleeps.
func sleeper(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  containers:
  - name: main
    image: docker.io/library/busybox:1.36
    command: [sh, -c, "trap 'exit 0' TERM; sleep 100000 & wait"]
`, name)
}

// writeManifest drops a manifest into the machine's manifest directory
// (root's, 0644, as the strict default wants).
func writeManifest(t *testing.T, name, content string) {
	t.Helper()
	if err := bed.WriteFile(filepath.Join(manifestDir, name+".yaml"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func removeManifest(t *testing.T, name string) {
	t.Helper()
	if err := os.Remove(filepath.Join(bed.Root, manifestDir, name+".yaml")); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
}

// basePods are the pods every test expects to find running.
var basePods = []string{"alpha", "beta"}

// running maps "pod/container" to the ID and restart count of each running
// berth-managed container of the machine's runtime.
func running(t *testing.T) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := bed.Runtime().ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
		LabelSelector: map[string]string{"io.berth.managed": "true"},
	}})
	if err != nil {
		t.Fatalf("list the machine's containers: %v", err)
	}
	m := map[string]string{}
	for _, c := range resp.Containers {
		key := c.Labels["io.kubernetes.pod.name"] + "/" + c.Labels["io.kubernetes.container.name"]
		m[key] = c.Id[:12] + " restarts=" + c.Annotations["io.kubernetes.container.restartCount"]
	}
	return m
}

func describe(m map[string]string) string {
	var parts []string
	for k, v := range m {
		parts = append(parts, k+": "+v)
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// waitRunning waits until the pods' main containers run and returns the
// runtime's running containers.
func waitRunning(t *testing.T, pods ...string) map[string]string {
	t.Helper()
	var m map[string]string
	waitFor(t, "pods "+strings.Join(pods, ", ")+" running", 90*time.Second, func() (bool, string) {
		m = running(t)
		for _, p := range pods {
			if _, ok := m[p+"-"+Machine+"/main"]; !ok {
				return false, describe(m)
			}
		}
		return true, ""
	})
	return m
}

// samePods fails t unless the runtime still runs exactly the containers
// of before, with the same restart counts.
func samePods(t *testing.T, before map[string]string, when string) {
	t.Helper()
	after := running(t)
	if describe(after) != describe(before) {
		t.Errorf("%s the pods' containers changed:\nbefore: %s\nafter:  %s", when, describe(before), describe(after))
	}
}

// ensureInstalled installs berth (v1) with the base pods' manifests when
// it is not, and waits until it runs them.
func ensureInstalled(t *testing.T) map[string]string {
	t.Helper()
	for _, p := range basePods {
		if _, err := os.Stat(filepath.Join(bed.Root, manifestDir, p+".yaml")); err != nil {
			writeManifest(t, p, sleeper(p))
		}
	}
	if out, _ := bed.Exec("dpkg-query", "-W", "-f=${Status}", "berth"); !strings.Contains(out, "install ok installed") {
		sh(t, "apt-get install -y -q "+debV1)
	}
	if s := show(t, "ActiveState"); s["ActiveState"] != "active" {
		sh(t, "systemctl start berth")
	}
	pods := waitRunning(t, basePods...)
	waitStatus(t, fmt.Sprintf("%d pods running, 0 pending, 0 failed", len(pods)))
	return pods
}

// waitStatus waits until berth's StatusText is want.
func waitStatus(t *testing.T, want string) {
	t.Helper()
	waitFor(t, "StatusText="+want, 60*time.Second, func() (bool, string) {
		s := show(t, "StatusText")["StatusText"]
		return s == want, s
	})
}

// berthPods is `berth pods` in the machine (over berth's socket).
func berthPods(t *testing.T) string {
	t.Helper()
	return sh(t, "berth pods")
}

// TestInstallEnablesAndStarts: `apt-get install ./berth.deb` on a machine
// with manifests enables berth, starts it, and returns once berth is
// ready: every manifest's pod is known to it right away.
func TestInstallEnablesAndStarts(t *testing.T) {
	needBed(t)
	for _, p := range basePods {
		writeManifest(t, p, sleeper(p))
	}
	out := sh(t, "apt-get install -y -q "+debV1)
	t.Logf("apt-get install:\n%s", tail(out, 4))
	pods := berthPods(t)
	for _, p := range basePods {
		if !strings.Contains(pods, p+"-"+Machine) {
			t.Errorf("right after the install, `berth pods` lacks %s: install returned before berth was ready:\n%s", p, pods)
		}
	}
	if got := sh(t, "systemctl is-enabled berth"); got != "enabled" {
		t.Errorf("is-enabled: %s, want enabled", got)
	}
	s := show(t, "ActiveState", "SubState", "NRestarts", "UnitFileState")
	if s["ActiveState"] != "active" || s["SubState"] != "running" || s["NRestarts"] != "0" {
		t.Errorf("after install: %v, want active/running, 0 restarts", s)
	}
	waitRunning(t, basePods...)
	waitStatus(t, "2 pods running, 0 pending, 0 failed")
}

// TestStartWaitsForReady: `systemctl start berth` returns only after
// READY=1, which berth sends once every source delivered and every pod was
// handed to a worker; StatusText shows the pod summary and follows
// changes.
func TestStartWaitsForReady(t *testing.T) {
	needBed(t)
	ensureInstalled(t)
	sh(t, "systemctl stop berth")
	writeManifest(t, "gamma", sleeper("gamma"))
	t.Cleanup(func() { removeManifest(t, "gamma") })
	started := time.Now()
	sh(t, "systemctl start berth")
	took := time.Since(started)
	// Right after start returned: berth knows every pod, and said so.
	pods := berthPods(t)
	for _, p := range append(basePods, "gamma") {
		if !strings.Contains(pods, p+"-"+Machine) {
			t.Errorf("right after `systemctl start` returned, `berth pods` lacks %s:\n%s", p, pods)
		}
	}
	s := show(t, "ActiveState", "SubState", "StatusText")
	if s["ActiveState"] != "active" || s["SubState"] != "running" || !regexp.MustCompile(`^\d+ pods running, \d+ pending, \d+ failed`).MatchString(s["StatusText"]) {
		t.Errorf("right after start: %v, want active/running and a pod summary", s)
	}
	journal := sh(t, "journalctl -u berth --no-pager -o cat -n 30")
	if i, j := strings.LastIndex(journal, "berth is ready"), strings.LastIndex(journal, "Started berth.service"); i < 0 || j < i {
		t.Errorf("the journal does not show berth ready before systemd's Started:\n%s", journal)
	}
	t.Logf("systemctl start took %s; StatusText then: %q", took.Round(time.Millisecond), s["StatusText"])
	waitRunning(t, "gamma")
	waitStatus(t, "3 pods running, 0 pending, 0 failed")
	removeManifest(t, "gamma")
	waitStatus(t, "2 pods running, 0 pending, 0 failed")
	writeManifest(t, "broken", "apiVersion: v1\nkind: Pod\nmetadata: {name: broken}\nspec: {containers: []}\n")
	t.Cleanup(func() { removeManifest(t, "broken") })
	waitStatus(t, "2 pods running, 0 pending, 0 failed, 1 manifest problems")
	removeManifest(t, "broken")
	waitStatus(t, "2 pods running, 0 pending, 0 failed")
}

// TestStopRestartKeepPods: stopping and restarting berth leaves every pod
// running, same containers, no restart; the new berth adopts them.
func TestStopRestartKeepPods(t *testing.T) {
	needBed(t)
	before := ensureInstalled(t)
	sh(t, "systemctl stop berth")
	if s := show(t, "ActiveState"); s["ActiveState"] != "inactive" {
		t.Errorf("after stop: %v", s)
	}
	time.Sleep(2 * time.Second)
	samePods(t, before, "with berth stopped,")
	sh(t, "systemctl start berth")
	sh(t, "systemctl restart berth")
	waitStatus(t, "2 pods running, 0 pending, 0 failed")
	time.Sleep(3 * time.Second) // a relist and housekeeping of the new berth
	samePods(t, before, "after stop, start and restart,")
	if j := sh(t, "journalctl -u berth --no-pager -o cat -n 40"); strings.Contains(j, "Created container") && strings.LastIndex(j, "Created container") > strings.LastIndex(j, "starting berth") {
		t.Errorf("the restarted berth created containers:\n%s", j)
	}
}

// withDropIn installs a drop-in for berth.service for the test's length.
func withDropIn(t *testing.T, name, content string) {
	t.Helper()
	path := "/etc/systemd/system/berth.service.d/" + name
	if err := bed.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	sh(t, "systemctl daemon-reload && systemctl restart berth")
	t.Cleanup(func() {
		os.Remove(filepath.Join(bed.Root, path))
		sh(t, "systemctl daemon-reload && systemctl restart berth")
	})
}

// mainPID is berth's MainPID (0 when not running).
func mainPID(t *testing.T) int {
	t.Helper()
	pid, _ := strconv.Atoi(show(t, "MainPID")["MainPID"])
	return pid
}

// waitRestarted waits until berth runs again under a new PID with one
// more restart counted.
func waitRestarted(t *testing.T, oldPID, oldRestarts int, timeout time.Duration) {
	t.Helper()
	waitFor(t, "berth restarted by systemd", timeout, func() (bool, string) {
		s := show(t, "ActiveState", "SubState", "NRestarts", "MainPID")
		n, _ := strconv.Atoi(s["NRestarts"])
		return s["ActiveState"] == "active" && s["SubState"] == "running" && s["MainPID"] != strconv.Itoa(oldPID) && n == oldRestarts+1, fmt.Sprint(s)
	})
}

// TestWatchdog: a wedged berth (SIGSTOP: no more WATCHDOG=1) is killed by
// systemd after WatchdogSec and restarted; NRestarts counts it, the pods
// are untouched. The test shortens WatchdogSec from the unit's 30s to 5s
// with a drop-in.
func TestWatchdog(t *testing.T) {
	needBed(t)
	ensureInstalled(t)
	withDropIn(t, "50-test-watchdog.conf", "[Service]\nWatchdogSec=5s\n")
	before := waitRunning(t, basePods...)
	waitStatus(t, "2 pods running, 0 pending, 0 failed")
	pid := mainPID(t)
	restarts, _ := strconv.Atoi(show(t, "NRestarts")["NRestarts"])
	stopped := time.Now()
	sh(t, fmt.Sprintf("kill -STOP %d", pid))
	waitRestarted(t, pid, restarts, 90*time.Second)
	t.Logf("wedged berth replaced %s after SIGSTOP", time.Since(stopped).Round(time.Millisecond))
	// berth's goroutine dump (the Go runtime's answer to WatchdogSignal's
	// SIGABRT) follows: grep, not the last lines.
	if j := sh(t, "journalctl -u berth --no-pager -o cat | grep -E 'Watchdog timeout|SIGABRT' | head -3"); !strings.Contains(j, "Watchdog timeout") {
		t.Errorf("the journal does not show systemd's watchdog timeout: %q", j)
	} else {
		t.Logf("journal: %s", j)
	}
	waitStatus(t, "2 pods running, 0 pending, 0 failed")
	time.Sleep(3 * time.Second)
	samePods(t, before, "after the watchdog restart,")
}

// TestCrash: a SIGKILLed berth is brought back by Restart=always; the pods
// are untouched.
func TestCrash(t *testing.T) {
	needBed(t)
	before := ensureInstalled(t)
	pid := mainPID(t)
	restarts, _ := strconv.Atoi(show(t, "NRestarts")["NRestarts"])
	sh(t, fmt.Sprintf("kill -KILL %d", pid))
	waitRestarted(t, pid, restarts, 60*time.Second)
	waitStatus(t, "2 pods running, 0 pending, 0 failed")
	time.Sleep(3 * time.Second)
	samePods(t, before, "after the crash,")
}

// unitCapabilities is berth.service's CapabilityBoundingSet as a mask:
// CHOWN(0) DAC_OVERRIDE(1) DAC_READ_SEARCH(2) FOWNER(3) FSETID(4)
// NET_BIND_SERVICE(10) SYS_ADMIN(21).
const unitCapabilities = "000000000020041f"

// TestHardening: every hardening directive of the unit is in effect on the
// running berth, and berth still does its work under them: an emptyDir of
// medium Memory is a tmpfs the runtime mounts into the container (so
// berth shares PID 1's mount namespace), hostPath type checks create and
// refuse, the socket serves the CLI. It also reports systemd-analyze
// security's exposure score.
func TestHardening(t *testing.T) {
	needBed(t)
	ensureInstalled(t)
	pid := mainPID(t)
	status := sh(t, fmt.Sprintf("cat /proc/%d/status", pid))
	for _, want := range []string{"CapEff:\t" + unitCapabilities, "CapBnd:\t" + unitCapabilities, "CapAmb:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !strings.Contains(status, want+"\n") {
			t.Errorf("/proc/%d/status lacks %q:\n%s", pid, want, status)
		}
	}
	if mnt, init := sh(t, fmt.Sprintf("readlink /proc/%d/ns/mnt", pid)), sh(t, "readlink /proc/1/ns/mnt"); mnt != init {
		t.Errorf("berth has a mount namespace of its own (%s, PID 1's %s): its emptyDir tmpfs would be hidden from containerd", mnt, init)
	}
	props := show(t, "NoNewPrivileges", "RestrictNamespaces", "ProtectClock", "MemoryDenyWriteExecute", "RestrictSUIDSGID",
		"LockPersonality", "RestrictRealtime", "SystemCallArchitectures", "RestrictAddressFamilies", "SystemCallErrorNumber", "OOMScoreAdjust", "KillMode", "LimitNOFILE")
	for k, want := range map[string]string{"NoNewPrivileges": "yes", "ProtectClock": "yes", "MemoryDenyWriteExecute": "yes", "RestrictSUIDSGID": "yes",
		"LockPersonality": "yes", "RestrictRealtime": "yes", "SystemCallArchitectures": "native", "RestrictAddressFamilies": "AF_INET AF_INET6 AF_NETLINK AF_UNIX",
		"OOMScoreAdjust": "-999", "KillMode": "process", "LimitNOFILE": "65536"} {
		if props[k] != want {
			t.Errorf("systemctl show: %s=%q, want %q", k, props[k], want)
		}
	}
	// A negative oom_score_adj takes CAP_SYS_RESOURCE, which some hosts
	// (these test machines among them) withhold from everything.
	adj := sh(t, fmt.Sprintf("cat /proc/%d/oom_score_adj", pid))
	bnd := regexp.MustCompile(`CapBnd:\s+([0-9a-f]+)`).FindStringSubmatch(sh(t, "cat /proc/1/status"))
	if mask, _ := strconv.ParseUint(bnd[1], 16, 64); mask&(1<<24) == 0 {
		t.Logf("the machine lacks CAP_SYS_RESOURCE: OOMScoreAdjust=-999 cannot apply (oom_score_adj %s)", adj)
	} else if adj != "-999" {
		t.Errorf("berth's oom_score_adj is %s, want -999", adj)
	}
	score := sh(t, "systemd-analyze security berth.service --no-pager | tail -1")
	t.Logf("systemd-analyze security: %s", score)
	if m := regexp.MustCompile(`exposure level for berth.service: ([0-9.]+)`).FindStringSubmatch(score); m == nil {
		t.Errorf("no score in %q", score)
	} else if v, _ := strconv.ParseFloat(m[1], 64); v > 4.6 {
		t.Errorf("exposure %s: more than the 4.6 the unit reached", m[1])
	}

	// The socket: root's directory, 0755; the socket 0660; the CLI works.
	if got := sh(t, "stat -c '%U %a' /run/berth /run/berth/berth.sock"); got != "root 755\nroot 660" {
		t.Errorf("socket directory and socket: %q, want root 755 and root 660", got)
	}

	// emptyDir medium Memory and hostPath DirectoryOrCreate under the
	// hardening; hostPath Directory on a missing path refused.
	writeManifest(t, "volumes", `apiVersion: v1
kind: Pod
metadata: {name: volumes}
spec:
  volumes:
  - {name: cache, emptyDir: {medium: Memory}}
  - {name: made, hostPath: {path: /srv/berth-made, type: DirectoryOrCreate}}
  containers:
  - name: main
    image: docker.io/library/busybox:1.36
    command: [sh, -c, "trap 'exit 0' TERM; sleep 100000 & wait"]
    volumeMounts:
    - {name: cache, mountPath: /cache}
    - {name: made, mountPath: /made}
`)
	writeManifest(t, "missing", `apiVersion: v1
kind: Pod
metadata: {name: missing}
spec:
  volumes:
  - {name: gone, hostPath: {path: /srv/berth-missing, type: Directory}}
  containers:
  - name: main
    image: docker.io/library/busybox:1.36
    command: [sleep, "100000"]
    volumeMounts:
    - {name: gone, mountPath: /gone}
`)
	t.Cleanup(func() {
		removeManifest(t, "volumes")
		removeManifest(t, "missing")
		waitStatus(t, "2 pods running, 0 pending, 0 failed")
		// The pod's end unmounts its tmpfs (umount2 under the filter).
		waitFor(t, "the emptyDir tmpfs unmounted", 30*time.Second, func() (bool, string) {
			out, _ := bed.Exec("grep", "/var/lib/berth/", "/proc/1/mounts")
			return strings.TrimSpace(out) == "", out
		})
	})
	waitRunning(t, "volumes")
	if out, _ := bed.Exec("grep", "/var/lib/berth/", "/proc/1/mounts"); !strings.HasPrefix(out, "tmpfs ") {
		t.Errorf("PID 1's mount table lacks the emptyDir's tmpfs berth mounted: %q", out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := bed.Runtime().ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.name": "volumes-" + Machine}}})
	if err != nil || len(resp.Containers) == 0 {
		t.Fatalf("the volumes pod's container: %v", err)
	}
	ex, err := bed.Runtime().ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: resp.Containers[0].Id, Cmd: []string{"grep", " /cache ", "/proc/mounts"}, Timeout: 10})
	if err != nil || !strings.HasPrefix(string(ex.GetStdout()), "tmpfs /cache tmpfs") {
		t.Errorf("in the container, /cache is not a tmpfs: %v %q %q", err, ex.GetStdout(), ex.GetStderr())
	}
	if fi, err := os.Stat(filepath.Join(bed.Root, "srv/berth-made")); err != nil || !fi.IsDir() {
		t.Errorf("hostPath DirectoryOrCreate did not create /srv/berth-made: %v", err)
	}
	waitFor(t, "the missing hostPath reported", 30*time.Second, func() (bool, string) {
		j := sh(t, "journalctl -u berth --no-pager -o cat -n 200")
		// Logged once, as the pod's Failed event (the worker does not log
		// a failure that became an event again). Under the journal the
		// message is the entry's MESSAGE as written, not quoted as the
		// text format quotes it.
		return strings.Contains(j, `hostPath "/srv/berth-missing" for volume "gone": does not exist`), tail(j, 5)
	})
	if pods := berthPods(t); !strings.Contains(pods, "missing-"+Machine) {
		t.Errorf("`berth pods` (over the socket) lacks the refused pod:\n%s", pods)
	}

	// Log rotation and image GC under the hardening, set in berth.yaml:
	// log files renamed and gzipped past a small size limit; an image
	// nothing uses removed by the image pass berth runs once its sources
	// are ready, while the pods' busybox and the sandbox image stay.
	const victim = "docker.io/library/berth-gc-victim:1"
	archive, err := testbed.ScratchImageArchive(t.TempDir(), victim)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(archive)
	if err != nil {
		t.Fatal(err)
	}
	if err := bed.WriteFile("/root/victim.tar", data, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := bed.Exec("ctr", "-n", "k8s.io", "images", "import", "/root/victim.tar"); err != nil {
		t.Fatalf("import %s: %v\n%s", victim, err, out)
	}
	conf := filepath.Join(bed.Root, "etc/berth/berth.yaml")
	orig, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	small := strings.NewReplacer("#containerLogMaxSize: 10Mi", "containerLogMaxSize: 16Ki",
		"#containerLogMonitorInterval: 10s", "containerLogMonitorInterval: 1s",
		"#imageGCHighThresholdPercent: 85", "imageGCHighThresholdPercent: 1",
		"#imageGCLowThresholdPercent: 80", "imageGCLowThresholdPercent: 0",
		"#imageMinimumGCAge: 2m0s", "imageMinimumGCAge: 0s").Replace(string(orig))
	if err := bed.WriteFile("/etc/berth/berth.yaml", []byte(small), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		removeManifest(t, "chatty")
		if err := bed.WriteFile("/etc/berth/berth.yaml", orig, 0o600); err != nil {
			t.Error(err)
		}
		sh(t, "systemctl restart berth")
	})
	sh(t, "systemctl restart berth")
	writeManifest(t, "chatty", `apiVersion: v1
kind: Pod
metadata: {name: chatty}
spec:
  containers:
  - name: main
    image: docker.io/library/busybox:1.36
    command: [sh, -c, "trap 'exit 0' TERM; while :; do echo 0123456789012345678901234567890123456789; usleep 1000; done"]
`)
	waitFor(t, "a rotated, gzipped log of the chatty pod", 60*time.Second, func() (bool, string) {
		out, _ := bed.Exec("sh", "-c", "ls /var/log/pods/default_chatty-"+Machine+"_*/main/")
		return strings.Contains(out, ".gz"), out
	})
	waitFor(t, "the unused image collected", 60*time.Second, func() (bool, string) {
		j := sh(t, "journalctl -u berth --no-pager -o cat -n 300")
		return strings.Contains(j, "image garbage collected") && strings.Contains(j, victim), tail(j, 5)
	})
	images := sh(t, "ctr -n k8s.io images ls -q")
	if strings.Contains(images, victim) {
		t.Errorf("%s still listed after berth logged its removal:\n%s", victim, images)
	}
	for _, ref := range []string{testbed.BusyboxRef, testbed.PauseRef} {
		if !strings.Contains(images, ref) {
			t.Errorf("image GC removed %s, which pods use:\n%s", ref, images)
		}
	}
}

// TestReboot: the machine is rebooted with berth's pods running and
// /var/lib/containerd persistent. Every process dies at a reboot, the
// pods' too, so what must hold is: containerd.service is up before berth
// starts (After=/Wants=), berth never finds the runtime missing, and it
// brings the same pods (same UIDs) back, replacing the dead sandboxes.
func TestReboot(t *testing.T) {
	needBed(t)
	before := ensureInstalled(t)
	// A pod an earlier test removed may still be stopping: wait until
	// the runtime holds the two baseline pods alone.
	var uids string
	waitFor(t, "only the two baseline pods' sandboxes ready", 60*time.Second, func() (bool, string) {
		uids = podUIDs(t)
		return len(strings.Fields(uids)) == 2, uids
	})
	// systemd-shutdown's final SIGTERM does not end the test bed's pause
	// containers (a plain `sleep`, PID 1 of its namespace, has no handler,
	// unlike the real pause), so it would wait its 90s before SIGKILL:
	// after the units are stopped, the bed cuts the power.
	clean, err := bed.Reboot(5 * time.Second)
	if err != nil {
		t.Fatalf("reboot: %v", err)
	}
	t.Logf("shutdown complete within 5s: %v (otherwise the power was cut)", clean)
	after := waitRunning(t, basePods...)
	waitStatus(t, "2 pods running, 0 pending, 0 failed")
	if got := sh(t, "systemctl is-enabled berth; systemctl is-active berth"); got != "enabled\nactive" {
		t.Errorf("after boot: %q", got)
	}
	cd := sh(t, "systemctl show containerd -p ActiveEnterTimestampMonotonic --value")
	bs := sh(t, "systemctl show berth -p ExecMainStartTimestampMonotonic --value")
	cdT, _ := strconv.ParseUint(cd, 10, 64)
	bsT, _ := strconv.ParseUint(bs, 10, 64)
	if cdT == 0 || bsT == 0 || bsT < cdT {
		t.Errorf("berth started at %s µs, containerd was active at %s µs: berth did not wait for containerd", bs, cd)
	}
	// containerd 1.6 tells systemd it is ready before its CRI plugin has
	// finished starting: a berth started right after may be told "server
	// is not initialized yet" and retries. Anything else (no socket, a
	// refused connection) would mean berth started before containerd.
	for _, line := range strings.Split(sh(t, "journalctl -b -u berth --no-pager -o cat"), "\n") {
		if (strings.Contains(line, "container runtime not usable") || strings.Contains(line, "container runtime unreachable")) &&
			!strings.Contains(line, "server is not initialized yet") {
			t.Errorf("berth found the runtime missing at boot: %s", line)
		}
	}
	if got := podUIDs(t); got != uids {
		t.Errorf("pod UIDs after the reboot: %s, before: %s", got, uids)
	}
	t.Logf("containers before the reboot: %s; after: %s", describe(before), describe(after))
}

// podUIDs lists the UIDs of the ready berth sandboxes.
func podUIDs(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := bed.Runtime().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: map[string]string{"io.berth.managed": "true"}}})
	if err != nil {
		t.Fatal(err)
	}
	var uids []string
	for _, s := range resp.Items {
		uids = append(uids, s.Metadata.Name+"="+s.Metadata.Uid)
	}
	sort.Strings(uids)
	return strings.Join(uids, " ")
}

// TestDebLife: an upgrade keeps the admin's edited config (a conffile),
// restarts berth and touches no pod; `apt-get remove` stops berth and
// leaves pods, manifests and config; `apt-get purge` removes berth's
// config and state, stops no pod (it says so) and keeps the pods'
// volumes while they may run.
func TestDebLife(t *testing.T) {
	needBed(t)
	before := ensureInstalled(t)
	conf := filepath.Join(bed.Root, "etc/berth/berth.yaml")
	data, err := os.ReadFile(conf)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), "#logLevel: info", "logLevel: debug", 1)
	if edited == string(data) {
		t.Fatal("no #logLevel line to edit in berth.yaml")
	}
	if err := bed.WriteFile("/etc/berth/berth.yaml", []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	// /etc/default/berth's flags reach berth's command line.
	defaults := "BERTH_EXTRA_ARGS=\"--max-pods=50\"\n"
	if err := bed.WriteFile("/etc/default/berth", []byte(defaults), 0o644); err != nil {
		t.Fatal(err)
	}
	sh(t, "systemctl restart berth")
	waitStatus(t, "2 pods running, 0 pending, 0 failed")
	pid := mainPID(t)
	if cmdline := sh(t, fmt.Sprintf("tr '\\0' ' ' </proc/%d/cmdline", pid)); !strings.Contains(cmdline, "--max-pods=50") {
		t.Errorf("berth runs as %q: BERTH_EXTRA_ARGS of /etc/default/berth not passed", cmdline)
	}

	out := sh(t, "apt-get install -y -q "+debV2)
	t.Logf("upgrade:\n%s", tail(out, 4))
	if v := sh(t, "dpkg-query -W -f='${Version}' berth"); v != releasedVersion {
		t.Errorf("installed version %s after the upgrade, want %s", v, releasedVersion)
	}
	if got, _ := os.ReadFile(conf); string(got) != edited {
		t.Errorf("the upgrade replaced the edited berth.yaml")
	}
	if got, _ := os.ReadFile(filepath.Join(bed.Root, "etc/default/berth")); string(got) != defaults {
		t.Errorf("the upgrade replaced the edited /etc/default/berth: %q", got)
	}
	if s := show(t, "ActiveState", "MainPID"); s["ActiveState"] != "active" || s["MainPID"] == strconv.Itoa(pid) {
		t.Errorf("after the upgrade: %v; berth was PID %d before: not restarted", s, pid)
	}
	waitStatus(t, "2 pods running, 0 pending, 0 failed")
	time.Sleep(3 * time.Second)
	samePods(t, before, "after the upgrade,")

	// An admin who disabled and stopped berth keeps it so through an
	// upgrade (here a reinstall, which runs the same postinst).
	sh(t, "systemctl disable --now berth")
	out = sh(t, "apt-get install -y -q --reinstall "+debV2)
	t.Logf("reinstall of a disabled berth:\n%s", tail(out, 4))
	if got := sh(t, "systemctl is-enabled berth || true"); got != "disabled" {
		t.Errorf("is-enabled after upgrading a disabled berth: %s, want disabled", got)
	}
	if s := show(t, "ActiveState"); s["ActiveState"] != "inactive" {
		t.Errorf("after upgrading a stopped, disabled berth: %v, want it still stopped", s)
	}
	samePods(t, before, "with berth disabled,")
	sh(t, "systemctl enable --now berth")
	waitStatus(t, "2 pods running, 0 pending, 0 failed")
	if got := sh(t, "stat -c %G /run/berth/berth.sock"); got != "berth" {
		t.Errorf("the API socket's group is %s, want berth", got)
	}

	out = sh(t, "apt-get remove -y -q berth")
	t.Logf("remove:\n%s", tail(out, 4))
	if s := show(t, "ActiveState", "LoadState"); s["ActiveState"] != "inactive" || s["LoadState"] != "masked" {
		t.Errorf("after remove: %v, want berth stopped and masked", s)
	}
	for _, keep := range []string{"etc/berth/berth.yaml", manifestDir + "/alpha.yaml", manifestDir + "/beta.yaml"} {
		if _, err := os.Stat(filepath.Join(bed.Root, keep)); err != nil {
			t.Errorf("remove took /%s: %v", keep, err)
		}
	}
	time.Sleep(2 * time.Second)
	samePods(t, before, "after remove,")

	out = sh(t, "apt-get purge -y -q berth 2>&1")
	t.Logf("purge:\n%s", tail(out, 6))
	if !strings.Contains(out, "purge stops none") {
		t.Errorf("purge does not say what becomes of the running pods:\n%s", out)
	}
	for _, gone := range []string{"etc/berth", "usr/bin/berth", "usr/lib/systemd/system/berth.service", "etc/systemd/system/multi-user.target.wants/berth.service",
		"etc/systemd/system/berth.service"} {
		if _, err := os.Lstat(filepath.Join(bed.Root, gone)); err == nil {
			t.Errorf("purge left /%s", gone)
		}
	}
	if left := sh(t, "ls -A /var/lib/berth"); left != "pods" {
		t.Errorf("purge left in /var/lib/berth: %q, want only the running pods' directories", left)
	}
	for _, keep := range []string{manifestDir + "/alpha.yaml", "var/log/pods"} {
		if _, err := os.Stat(filepath.Join(bed.Root, keep)); err != nil {
			t.Errorf("purge took /%s: %v", keep, err)
		}
	}
	samePods(t, before, "after purge,")

	// A reinstall after the purge is a first install again: enabled,
	// started, and the running pods are berth's again.
	out = sh(t, "apt-get install -y -q "+debV2)
	t.Logf("reinstall:\n%s", tail(out, 4))
	if got := sh(t, "systemctl is-enabled berth"); got != "enabled" {
		t.Errorf("is-enabled after reinstalling: %s, want enabled", got)
	}
	if got := sh(t, "stat -c %a /etc/berth/berth.yaml"); got != "600" {
		t.Errorf("/etc/berth/berth.yaml is mode %s, want 600", got)
	}
	waitStatus(t, "2 pods running, 0 pending, 0 failed")

	// Installing again after a remove (not a purge) unmasks berth, which
	// was enabled, and starts it.
	sh(t, "apt-get remove -y -q berth")
	out = sh(t, "apt-get install -y -q "+debV2)
	t.Logf("install after remove:\n%s", tail(out, 4))
	if s := show(t, "ActiveState", "UnitFileState"); s["ActiveState"] != "active" || s["UnitFileState"] != "enabled" {
		t.Errorf("after installing over a removed berth: %v, want active and enabled", s)
	}
	waitStatus(t, "2 pods running, 0 pending, 0 failed")
}
