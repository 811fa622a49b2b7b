//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/e2e/testbed"
)

// nginxServer is Debian's nginx serving one directory on a loopback port,
// as a fleet's web server would serve manifests.
type nginxServer struct {
	t     *testing.T
	www   string
	url   string
	mtime time.Time // of the last file written
}

// startNginx runs nginx in the foreground on a free loopback port with
// everything (config, pid, logs, temp files) under a directory of the
// test's own; cleanup stops it.
func startNginx(t *testing.T) *nginxServer {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		bin = "/usr/sbin/nginx"
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("nginx is not installed (apt-get install nginx-light, or make testbed): %v", err)
	}
	dir := t.TempDir()
	www := filepath.Join(dir, "www")
	if err := os.Mkdir(www, 0o755); err != nil {
		t.Fatal(err)
	}
	addr := testbed.FreeAddr(t)
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;" // the workers must read the test's directory
	}
	conf := fmt.Sprintf(`daemon off;
%s
worker_processes 1;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log;
events { worker_connections 64; }
http {
  access_log %[2]s/access.log;
  client_body_temp_path %[2]s/body;
  proxy_temp_path %[2]s/proxy;
  fastcgi_temp_path %[2]s/fastcgi;
  uwsgi_temp_path %[2]s/uwsgi;
  scgi_temp_path %[2]s/scgi;
  types { application/yaml yaml; }
  server { listen %[3]s; root %[4]s; }
}
`, user, dir, addr, www)
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-e", filepath.Join(dir, "error.log"))
	out, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start nginx: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); out.Close(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	n := &nginxServer{t: t, www: www, url: "http://" + addr, mtime: time.Now().Add(-time.Hour)}
	waitCond(t, "nginx answering", waitTimeout, func() (bool, string) {
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx exited: %s", log)
		default:
		}
		resp, err := http.Get(n.url + "/")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return true, ""
	})
	return n
}

// serve replaces the file name atomically. Each version gets an mtime a
// minute after the previous one: nginx's ETag and Last-Modified come from
// mtime and size, and two edits within a second must still differ.
func (n *nginxServer) serve(name, content string) {
	n.t.Helper()
	p := filepath.Join(n.www, name)
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		n.t.Fatal(err)
	}
	n.mtime = n.mtime.Add(time.Minute)
	if err := os.Chtimes(tmp, n.mtime, n.mtime); err != nil {
		n.t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		n.t.Fatal(err)
	}
}

// TestRollbackBadEdit serves a pod from nginx and edits it badly twice, on
// the real runtime. A crash-looping edit is stopped and the last Ready
// version runs again, never beside it; it is not retried while the server
// serves it. An edit that never becomes Ready is on trial when berth is
// SIGKILLed; the next berth adopts it, rolls it back when its window ends,
// and a further restart keeps the good version running (adopted, not
// restarted) with the rollback still reported. A fixed edit then runs.
func TestRollbackBadEdit(t *testing.T) {
	srv := startNginx(t)
	good := sleeper("roll")
	srv.serve("pods.yaml", podManifest(good))
	// --rollback-min-ready stays well above the time berth takes to see
	// a container exit on a loaded machine: a crashing container seen
	// Ready that long would pass for good.
	b := newBerth(t, berthOptions{args: []string{
		"--manifest-url", srv.url + "/pods.yaml", "--http-check-frequency", "1s",
		"--http-rollback-after", "8s", "--rollback-min-ready", "5s", "--crashloop-backoff-initial", "1s",
	}})
	b.waitReady()
	name := podName("roll")
	goodPod := b.waitPod(name, "Running and Ready", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning && podReady(p) })
	b.waitFor("the last Ready version persisted", waitTimeout, func() (bool, string) {
		ok, err := b.rollbackStateHolds(goodPod.UID)
		return ok, fmt.Sprint(err)
	})

	// A crash loop: rolled back once a container restarted 3 times. Its
	// annotation lifts the window out of reach, so the crash loop alone
	// decides, however slow the machine.
	crash := newPod("roll", shContainer("main", "echo bad; exit 1"))
	crash.Annotations = map[string]string{"berth.io/rollback-after": "10m"}
	w := watchPod(name, 20*time.Millisecond)
	srv.serve("pods.yaml", podManifest(crash))
	bad1 := b.waitPod(name, "the crashing version running", func(p *v1.Pod) bool { return p.UID != goodPod.UID })
	back := b.waitRolledBack(name, goodPod.UID, bad1.UID, "restarted 3 times")
	first := b.waitRuntime(name, "main", goodPod.UID)
	r := w.stop()
	if r.maxReady > 1 || r.maxRunning > 1 {
		t.Errorf("the bad and the good version ran at once: %s %s", r.worst, r.worstContainers)
	}
	t.Logf("rolled back %s -> %s: %s", bad1.UID, goodPod.UID, back.Message)
	b.checkRollbackReported(name, "rolled back", goodPod.UID, bad1.UID, 1)
	time.Sleep(3 * time.Second) // three polls of the unchanged bad version
	if sbs, err := sandboxesOfUID(name, bad1.UID); err != nil || len(sbs) > 0 {
		t.Fatalf("the bad version started again though the server serves it unchanged: %d sandboxes (%v)", len(sbs), err)
	}

	// Never Ready, with berth killed while it is on trial.
	notReady := sleeper("roll")
	notReady.Spec.Containers[0].ReadinessProbe = &v1.Probe{PeriodSeconds: 1,
		ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"false"}}}}
	srv.serve("pods.yaml", podManifest(notReady))
	bad2 := b.waitPod(name, "the unready version running", func(p *v1.Pod) bool {
		return p.UID != goodPod.UID && p.UID != bad1.UID && p.Status.Phase == v1.PodRunning
	})
	b.waitRuntime(name, "main", bad2.UID)
	b.kill()
	w = watchPod(name, 20*time.Millisecond)
	b.start()
	b.waitReady()
	b.waitRolledBack(name, goodPod.UID, bad2.UID, "not Ready 8s after it started")
	second := b.waitRuntime(name, "main", goodPod.UID)
	if second.container.Id == first.container.Id {
		t.Errorf("the good version's container %s was not started anew after the second rollback", shortID(first.container.Id))
	}
	r = w.stop()
	if r.maxReady > 1 || r.maxRunning > 1 {
		t.Errorf("across the restart the bad and the good version ran at once: %s %s", r.worst, r.worstContainers)
	}

	// The rollback survives a restart: the good version is adopted as it
	// runs, the bad one stays stopped, the problem stays.
	b.kill()
	b.start()
	b.waitReady()
	b.waitFor("two housekeeping passes", waitTimeout, func() (bool, string) {
		n, err := b.housekeepingPasses()
		return n >= 2, fmt.Sprintf("%d passes (%v)", n, err)
	})
	now, ok, detail := runtimeState(name, "main", goodPod.UID)
	if !ok || now.container.Id != second.container.Id {
		t.Fatalf("after a restart the rolled-back good version does not keep running: %s", detail)
	}
	b.checkRollbackReported(name, "rolled back", goodPod.UID, bad2.UID, 0)
	out, err := exec.Command(berthBin, "describe", "roll", "--socket", b.socket).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "berth.io/LatestVersion") || !strings.Contains(string(out), string(bad2.UID)) {
		t.Errorf("berth describe does not say the pod runs a rolled-back version: %v\n%s", err, out)
	}

	// A new edit ends the rollback.
	fixed := sleeper("roll")
	fixed.Spec.Containers[0].Env = []v1.EnvVar{{Name: "VERSION", Value: "fixed"}}
	srv.serve("pods.yaml", podManifest(fixed))
	p := b.waitPod(name, "the fixed version Running", func(p *v1.Pod) bool {
		return p.UID != goodPod.UID && p.UID != bad2.UID && p.Status.Phase == v1.PodRunning
	})
	b.waitFor("the rollback problem gone", waitTimeout, func() (bool, string) {
		_, raw, err := b.getUnix("/problems")
		return err == nil && !strings.Contains(string(raw), "RolledBack"), string(raw)
	})
	if c := podCondition(p, "berth.io/LatestVersion"); c != nil {
		t.Errorf("the fixed version carries %+v", c)
	}
}

// TestRollbackNeverToRemovedManifest: a rollback target belongs to the
// manifest that produced it. Pod gone runs from the manifest directory and
// is persisted as its last Ready version; the URL then serves another
// version of it, which waits behind it and never becomes Ready. The
// operator removes gone.yaml: the URL's version runs, fails its trial with
// NoReadyVersion and runs on; the removed file's version never runs again
// and the rollback state keeps nothing of it, across a restart too. Each
// check waits for the trial's verdict, the moment a rollback would have
// been decided, not for time to pass.
func TestRollbackNeverToRemovedManifest(t *testing.T) {
	const emptyList = "apiVersion: v1\nkind: PodList\nitems: []\n"
	src := &manifestServer{code: http.StatusOK, body: emptyList}
	srv := httptest.NewServer(src)
	t.Cleanup(srv.Close)
	fromFile := sleeper("gone")
	// Its own trial cannot fail however slowly the machine starts it:
	// only the URL's version is judged within the 2 s windows.
	fromFile.Annotations = map[string]string{"berth.io/rollback-after": "10m"}
	b := newBerth(t, berthOptions{
		args: []string{"--manifest-url", srv.URL + "/pods", "--http-check-frequency", "1s",
			"--file-rollback-after", "2s", "--http-rollback-after", "2s", "--rollback-min-ready", "2s"},
		manifests: map[string]string{"gone.yaml": podManifest(fromFile)},
	})
	b.waitReady()
	name := podName("gone")
	filePod := b.waitPod(name, "Running and Ready", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning && podReady(p) })
	b.waitFor("the file's version persisted as the last Ready one", waitTimeout, func() (bool, string) {
		ok, err := b.rollbackStateHolds(filePod.UID)
		return ok, fmt.Sprint(err)
	})

	fromHTTP := sleeper("gone")
	fromHTTP.Spec.Containers[0].Env = []v1.EnvVar{{Name: "FROM", Value: "http"}}
	fromHTTP.Spec.Containers[0].ReadinessProbe = &v1.Probe{PeriodSeconds: 1,
		ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"false"}}}}
	src.set(http.StatusOK, podManifest(fromHTTP))
	var httpPod *v1.Pod
	b.waitFor("the URL's version waiting behind the file's", waitTimeout, func() (bool, string) {
		list, err := b.pods()
		if err != nil {
			return false, err.Error()
		}
		desc := ""
		for i := range list.Items {
			p := &list.Items[i]
			desc += describePod(p) + "; "
			if p.Name == name && p.UID != filePod.UID && p.Annotations["kubernetes.io/config.source"] == "http" && p.Status.Phase == v1.PodPending {
				httpPod = p
				return true, ""
			}
		}
		return false, desc
	})

	b.removeManifest("gone.yaml")
	b.waitRuntime(name, "main", httpPod.UID)
	b.waitFor("the removed file's version gone from the runtime", waitTimeout, func() (bool, string) {
		n, err := objectsOfUID(name, filePod.UID)
		return err == nil && n == 0, fmt.Sprintf("%d objects (%v)", n, err)
	})
	w := watchPod(name, 20*time.Millisecond)
	defer w.stop()
	var probs string
	b.waitFor("the URL's version judged", waitTimeout, func() (bool, string) {
		_, raw, err := b.getUnix("/problems")
		probs = string(raw)
		return err == nil && strings.Contains(probs, string(httpPod.UID)), probs
	})
	if !strings.Contains(probs, `"NoReadyVersion"`) || strings.Contains(probs, `"RolledBack"`) {
		t.Fatalf("/problems %s: want NoReadyVersion for %s, the removed file's version %s is no rollback target", probs, httpPod.UID, filePod.UID)
	}
	check := func(when string) {
		t.Helper()
		if ok, err := b.rollbackStateHolds(filePod.UID); ok || err != nil {
			t.Errorf("%s: the rollback state holds the removed file's version %s (%v)", when, filePod.UID, err)
		}
		if n, err := objectsOfUID(name, filePod.UID); err != nil || n > 0 {
			t.Errorf("%s: the removed file's version has %d runtime objects (%v)", when, n, err)
		}
		if _, ok, detail := runtimeState(name, "main", httpPod.UID); !ok {
			t.Errorf("%s: the URL's version does not run on: %s", when, detail)
		}
	}
	check("after the trial")

	// The next berth adopts the URL's version and gives it a new trial,
	// which fails again: with a target on disk, that would be a rollback.
	b.kill()
	b.start()
	b.waitReady()
	b.waitFor("the URL's version judged again", waitTimeout, func() (bool, string) {
		_, metrics, err := b.get("/metrics")
		return err == nil && strings.Contains(string(metrics), `berth_rollbacks_total{reason="NoReadyVersion"} 1`), fmt.Sprint(err)
	})
	check("after a restart")
	if r := w.stop(); r.readyUIDs[string(filePod.UID)] || r.err != nil {
		t.Errorf("the removed file's version %s got a ready sandbox again (%v)", filePod.UID, r.err)
	}
}

// rollbackStateHolds reports whether a file of the rollback state holds
// uid, as a last Ready version or a rollback.
func (b *berth) rollbackStateHolds(uid types.UID) (bool, error) {
	dir := filepath.Join(b.root, "rollback")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return false, err
		}
		if strings.Contains(string(data), string(uid)) {
			return true, nil
		}
	}
	return false, nil
}

// waitRolledBack waits until name runs the good version with the
// berth.io/LatestVersion condition naming the bad one and saying why.
func (b *berth) waitRolledBack(name string, good, bad types.UID, why string) v1.PodCondition {
	b.t.Helper()
	var cond v1.PodCondition
	b.waitPod(name, "the good version back, rolled back from "+string(bad), func(p *v1.Pod) bool {
		c := podCondition(p, "berth.io/LatestVersion")
		if p.UID != good || p.Status.Phase != v1.PodRunning || c == nil {
			return false
		}
		cond = *c
		return c.Status == v1.ConditionFalse && c.Reason == "RolledBack" && strings.Contains(c.Message, string(bad)) && strings.Contains(c.Message, why)
	})
	return cond
}

// checkRollbackReported checks /problems, the metrics and `berth pods`
// name both versions; rollbacks is the berth_rollbacks_total expected
// since this berth started.
func (b *berth) checkRollbackReported(name, what string, good, bad types.UID, rollbacks int) {
	b.t.Helper()
	_, raw, err := b.getUnix("/problems")
	if body := string(raw); err != nil || !strings.Contains(body, `"RolledBack"`) || !strings.Contains(body, string(good)) || !strings.Contains(body, string(bad)) {
		b.t.Errorf("/problems does not report the rollback of %s to %s: %v %s", bad, good, err, body)
	}
	_, metrics, err := b.get("/metrics")
	if m := string(metrics); err != nil || !strings.Contains(m, `berth_manifest_problems{reason="RolledBack",source="http"} 1`) ||
		(rollbacks > 0 && !strings.Contains(m, fmt.Sprintf(`berth_rollbacks_total{reason="RolledBack"} %d`, rollbacks))) {
		b.t.Errorf("metrics do not count the rollback: %v", err)
	}
	out, err := exec.Command(berthBin, "pods", "--socket", b.socket).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "RolledBack") || !strings.Contains(string(out), string(bad)) || !strings.Contains(string(out), string(good)) {
		b.t.Errorf("berth pods does not show the pod %s %s: %v\n%s", name, what, err, out)
	}
}

// sandboxesOfUID lists the sandboxes of name that belong to uid.
func sandboxesOfUID(name string, uid types.UID) ([]string, error) {
	sbs, err := sandboxesOf(name)
	var ids []string
	for _, s := range sbs {
		if s.Metadata.Uid == string(uid) {
			ids = append(ids, s.Id)
		}
	}
	return ids, err
}
