//go:build e2e

package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// problemsOf lists berth's current manifest problems (from the socket) as
// "REASON base-of-origin" lines.
func (b *berth) problemsOf() ([]string, error) {
	code, body, err := b.getUnix("/problems")
	if err != nil || code != 200 {
		return nil, fmt.Errorf("/problems: %d %v %.200s", code, err, body)
	}
	var list struct {
		Items []struct{ Reason, Origin, Message string }
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, err
	}
	var out []string
	for _, p := range list.Items {
		out = append(out, p.Reason+" "+filepath.Base(p.Origin))
	}
	return out, nil
}

// waitProblem waits until /problems has reason for the file named base.
func (b *berth) waitProblem(reason, base string) {
	b.t.Helper()
	b.waitFor(reason+" for "+base, waitTimeout, func() (bool, string) {
		ps, err := b.problemsOf()
		if err != nil {
			return false, err.Error()
		}
		for _, p := range ps {
			if p == reason+" "+base {
				return true, ""
			}
		}
		return false, strings.Join(ps, "; ")
	})
}

// vmKB reads a VmXXX line of /proc/PID/status, in kB.
func vmKB(t *testing.T, pid int, field string) int {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// privilegedPod is what an attacker drops: privileged, host PID, the
// host's / mounted.
func privilegedPod(name string) *v1.Pod {
	p := sleeper(name)
	yes := true
	p.Spec.HostPID = true
	p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: &yes}
	p.Spec.Volumes = []v1.Volume{{Name: "host", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/"}}}}
	p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "host", MountPath: "/host"}}
	return p
}

// TestHostileManifests plays a local attacker and a careless operator
// against a running berth on the real runtime: a FIFO named like a
// manifest (present at start and added later), `nobody` dropping a
// privileged hostPath pod into a world-writable manifest directory, and a
// file of 100,000 documents. Each is refused with a problem and berth
// keeps starting and stopping the other pods, with bounded memory.
func TestHostileManifests(t *testing.T) {
	b := newBerth(t, berthOptions{noStart: true, manifests: map[string]string{"good.yaml": podManifest(sleeper("good"))}})
	if err := syscall.Mkfifo(b.manifestPath("x.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.start()
	b.waitReady()
	b.waitRuntime(podName("good"), "main", "")
	b.waitProblem("NotRegularFile", "x.yaml")

	t.Run("FIFO added at runtime", func(t *testing.T) {
		defer b.use(t)()
		if err := syscall.Mkfifo(b.manifestPath("y.yaml"), 0o644); err != nil {
			t.Fatal(err)
		}
		b.writeManifest("after.yaml", podManifest(sleeper("after")))
		b.waitRuntime(podName("after"), "main", "")
		b.waitProblem("NotRegularFile", "y.yaml")
		b.removeManifest("after.yaml")
		b.waitGone(podName("after"))
	})

	t.Run("nobody drops a privileged pod into a 0777 directory", func(t *testing.T) {
		defer b.use(t)()
		// nobody must reach the directory: its parent stays root's and
		// not writable by others.
		if err := os.Chmod(b.dir, 0o711); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(b.manifests, 0o777); err != nil {
			t.Fatal(err)
		}
		b.waitProblem("ManifestPermissions", filepath.Base(b.manifests))
		cmd := exec.Command("/bin/sh", "-c", `cat > "$1"`, "sh", b.manifestPath("evil.yaml"))
		cmd.Stdin = strings.NewReader(podManifest(privilegedPod("evil")))
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("writing as nobody: %v: %s", err, out)
		}
		// The operator fixes the directory; the file stays nobody's.
		if err := os.Chmod(b.manifests, 0o755); err != nil {
			t.Fatal(err)
		}
		b.waitProblem("ManifestPermissions", "evil.yaml")
		// A pod dropped after it starts: evil.yaml was read before.
		b.writeManifest("marker.yaml", podManifest(sleeper("marker")))
		b.waitRuntime(podName("marker"), "main", "")
		if sbs, err := sandboxesOf(podName("evil")); err != nil || len(sbs) != 0 {
			t.Errorf("the refused pod has %d sandboxes (%v)", len(sbs), err)
		}
		if cs, err := containersOf(podName("evil")); err != nil || len(cs) != 0 {
			t.Errorf("the refused pod has %d containers (%v)", len(cs), err)
		}
		if _, ok, detail := runtimeState(podName("good"), "main", ""); !ok {
			t.Errorf("good stopped meanwhile: %s", detail)
		}
		b.removeManifest("evil.yaml")
		b.removeManifest("marker.yaml")
		b.waitGone(podName("marker"))
	})

	t.Run("100,000 documents", func(t *testing.T) {
		defer b.use(t)()
		var sb strings.Builder
		for i := range 100_000 {
			fmt.Fprintf(&sb, "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p%d}\nspec: {containers: [{name: c, image: i}]}\n", i)
		}
		b.mu.Lock()
		pid := b.cmd.Process.Pid
		b.mu.Unlock()
		before := vmKB(t, pid, "VmRSS")
		b.writeManifest("many.yaml", sb.String())
		b.waitProblem("TooManyDocuments", "many.yaml")
		b.writeManifest("other.yaml", podManifest(sleeper("other")))
		b.waitRuntime(podName("other"), "main", "")
		// Peak RSS over berth's whole life: decoding them all took it
		// to 940 MB; refusing them costs about the file's 9.6 MB.
		peak := vmKB(t, pid, "VmHWM")
		t.Logf("berth RSS before %d MiB, peak %d MiB", before/1024, peak/1024)
		if peak > before+100*1024 {
			t.Errorf("berth's peak RSS %d MiB grew by more than 100 MiB from %d MiB", peak/1024, before/1024)
		}
		if _, ok, detail := runtimeState(podName("good"), "main", ""); !ok {
			t.Errorf("good stopped meanwhile: %s", detail)
		}
	})
}
