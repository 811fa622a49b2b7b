//go:build e2e

package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// objectsManifest is a file of ConfigMaps and a Secret beside the pod:
// "files" only mounted, "envs" only used as environment, "db" both.
func objectsManifest(greeting, mode string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata:
  name: files
data:
  greeting: %s
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: envs
data:
  MODE: %s
---
apiVersion: v1
kind: Secret
metadata:
  name: db
stringData:
  password: hunter2-e2e
`, greeting, mode)
}

const objectsPod = `apiVersion: v1
kind: Pod
metadata:
  name: cfg
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: busybox:1.36
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
    envFrom:
    - configMapRef: {name: envs}
    env:
    - name: PW
      valueFrom:
        secretKeyRef: {name: db, key: password}
    volumeMounts:
    - {name: files, mountPath: /etc/files}
    - {name: db, mountPath: /etc/db}
  volumes:
  - name: files
    configMap: {name: files}
  - name: db
    secret: {secretName: db, defaultMode: 0400}
`

// TestLocalConfigMapsAndSecrets runs a pod whose volumes and environment
// come from a ConfigMap and a Secret in another file of the manifest
// directory: the files and the variables are there, the Secret on a tmpfs
// with its mode; an edit of the mounted ConfigMap reaches the running
// container without a restart, an edit of the one used as environment
// restarts the pod with the new value; the Secret's value appears in
// neither /pods nor berth's log; a reference to a missing ConfigMap is a
// FILE:LINE error.
func TestLocalConfigMapsAndSecrets(t *testing.T) {
	b := newBerth(t, berthOptions{manifests: map[string]string{
		"objects.yaml": objectsManifest("hello", "fast"),
		"pod.yaml":     objectsPod,
	}})
	b.waitReady()
	name := podName("cfg")
	p := b.waitRunning(name)
	rt := b.waitRuntime(name, "main", p.UID)
	cid := rt.container.Id

	for cmd, want := range map[string]string{
		"cat /etc/files/greeting":                   "hello",
		"cat /etc/db/password":                      "hunter2-e2e",
		"stat -L -c %a /etc/db/password":            "400",
		"echo $MODE $PW":                            "fast hunter2-e2e",
		"readlink /etc/files/greeting":              "..data/greeting",
		"touch /etc/files/x 2>/dev/null || echo ro": "ro",
	} {
		if got := execIn(t, cid, cmd); got != want {
			t.Errorf("%s: got %q, want %q", cmd, got, want)
		}
	}
	secretDir := filepath.Join(b.root, "pods", string(p.UID), "volumes", "kubernetes.io~secret", "db")
	var fs unix.Statfs_t
	if err := unix.Statfs(secretDir, &fs); err != nil {
		t.Fatal(err)
	} else if fs.Type != unix.TMPFS_MAGIC {
		t.Errorf("the secret volume %s is not on a tmpfs (filesystem type %#x)", secretDir, fs.Type)
	}

	// The mounted ConfigMap changes in place.
	b.writeManifest("objects.yaml", objectsManifest("bye", "fast"))
	b.waitFor("the new greeting in the running container", waitTimeout, func() (bool, string) {
		got := execIn(t, cid, "cat /etc/files/greeting")
		return got == "bye", got
	})
	if cur := b.waitRunning(name); cur.UID != p.UID {
		t.Errorf("an edit of a mounted ConfigMap changed the pod's uid %s -> %s", p.UID, cur.UID)
	}
	if got := execIn(t, cid, "ls -a /etc/files | grep -c '^\\.\\.2'"); got != "1" {
		t.Errorf("%s timestamped data directories left after the swap, want 1", got)
	}

	// The one used as environment restarts the pod with its new value.
	b.writeManifest("objects.yaml", objectsManifest("bye", "slow"))
	edited := b.waitPod(name, "a new uid running", func(cur *v1.Pod) bool {
		return cur.UID != p.UID && cur.Status.Phase == v1.PodRunning
	})
	rt2 := b.waitRuntime(name, "main", edited.UID)
	if got := execIn(t, rt2.container.Id, "echo $MODE"); got != "slow" {
		t.Errorf("after the edit MODE = %q, want slow", got)
	}

	// Never shown, never logged.
	_, body, err := b.getUnix("/pods")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(body, []byte("hunter2-e2e")) {
		t.Errorf("/pods shows the Secret's value")
	}
	out, err := exec.Command(berthBin, "describe", "cfg", "--socket", b.socket).CombinedOutput()
	if err != nil {
		t.Errorf("berth describe cfg: %v\n%s", err, out)
	}
	if bytes.Contains(out, []byte("hunter2-e2e")) {
		t.Errorf("berth describe shows the Secret's value:\n%s", out)
	}
	if !bytes.Contains(out, []byte("Secret (a volume populated by a Secret)")) || !bytes.Contains(out, []byte("SecretName:")) {
		t.Errorf("berth describe does not show the secret volume:\n%s", out)
	}
	if b.logContains("hunter2-e2e") {
		t.Errorf("berth's log shows the Secret's value")
	}
	// The last good state holds the Secret, readable by root alone.
	state := filepath.Join(b.root, "manifests", "file")
	found := false
	states, _ := filepath.Glob(filepath.Join(state, "*.json"))
	for _, s := range states {
		data, err := os.ReadFile(s)
		if err != nil || !bytes.Contains(data, []byte(`"secret"`)) {
			continue
		}
		found = true
		if fi, err := os.Stat(s); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("state file %s holding a Secret: %v, want mode 0600", s, err)
		}
	}
	if fi, err := os.Stat(state); err != nil || fi.Mode().Perm() != 0o700 || !found {
		t.Errorf("state directory %s: %v, found the Secret's state: %t; want mode 0700 and the state", state, err, found)
	}

	// A missing ConfigMap: the pod is refused at the reference's line.
	b.writeManifest("missing.yaml", strings.Replace(strings.Replace(objectsPod, "name: cfg", "name: missing", 1),
		"configMap: {name: files}", "configMap: {name: nope}", 1))
	m := b.waitPod(podName("missing"), "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
	want := b.manifestPath("missing.yaml") + ":22: spec.volumes[0].configMap.name"
	if !strings.Contains(m.Status.Message, want) || !strings.Contains(m.Status.Message, `no ConfigMap of that name in namespace "default"`) {
		t.Errorf("message %q, want it to name %s and the missing ConfigMap", m.Status.Message, want)
	}
}

// execIn runs a shell command in a container and returns its trimmed
// output.
func execIn(t *testing.T, containerID, script string) string {
	t.Helper()
	ctx, cancel := criCtx()
	defer cancel()
	resp, err := bed.Runtime().ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: containerID, Cmd: []string{"sh", "-c", script}, Timeout: 10})
	if err != nil {
		return fmt.Sprintf("exec error: %v", err)
	}
	return strings.TrimSpace(string(resp.Stdout))
}

// urlList is a List for --manifest-url holding a ConfigMap and a pod that
// mounts it.
func urlList(greeting string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: ConfigMap
  metadata: {name: site}
  data: {index.html: %s}
- apiVersion: v1
  kind: Pod
  metadata: {name: urlcfg}
  spec:
    terminationGracePeriodSeconds: 2
    containers:
    - name: main
      image: busybox:1.36
      command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
      volumeMounts: [{name: site, mountPath: /www}]
    volumes:
    - {name: site, configMap: {name: site, items: [{key: index.html, path: public/index.html}]}}
`, greeting)
}

// TestURLListConfigMap: a List served by --manifest-url carries the
// ConfigMap its pod mounts; a new version of the ConfigMap at the URL
// reaches the running container.
func TestURLListConfigMap(t *testing.T) {
	src := &manifestServer{code: http.StatusOK, body: urlList("one")}
	srv := httptest.NewServer(src)
	t.Cleanup(srv.Close)
	b := newBerth(t, berthOptions{args: []string{"--manifest-url", srv.URL + "/pods", "--http-check-frequency", "1s"}})
	b.waitReady()
	name := podName("urlcfg")
	p := b.waitRunning(name)
	cid := b.waitRuntime(name, "main", p.UID).container.Id
	if got := execIn(t, cid, "cat /www/public/index.html"); got != "one" {
		t.Fatalf("index.html = %q, want one", got)
	}
	src.set(http.StatusOK, urlList("two"))
	b.waitFor("the new index.html in the running container", waitTimeout, func() (bool, string) {
		got := execIn(t, cid, "cat /www/public/index.html")
		return got == "two", got
	})
	if cur := b.waitRunning(name); cur.UID != p.UID {
		t.Errorf("the pod was restarted: uid %s -> %s", p.UID, cur.UID)
	}
}
