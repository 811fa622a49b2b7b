//go:build e2e

package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// secretValue is the secret text of the broken Secrets below.
const secretValue = "S3cr3t-e2e-value"

// TestSecretValuesNeverQuoted puts Secrets that do not decode next to a
// good pod: a password starting with "*" (an alias to an unknown anchor),
// a tagged value that does not resolve, data that is not base64. Each is
// a DecodeError in /problems naming its file and line, and neither
// /problems, nor berth's log, nor `berth validate` quotes the value.
func TestSecretValuesNeverQuoted(t *testing.T) {
	head := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\n" // lines 1-4
	files := []struct {
		name string
		body string // line 5 and on
		line int
	}{
		{"alias", "stringData:\n  password: *" + secretValue + "\n", 6},
		{"tagged", "stringData:\n  password: !!int " + secretValue + "\n", 1},
		{"base64", "data:\n  password: " + secretValue + "!\n", 6},
	}
	manifests := map[string]string{"good.yaml": podManifest(sleeper("good"))}
	for _, f := range files {
		manifests[f.name+".yaml"] = fmt.Sprintf(head, f.name) + f.body
	}
	b := newBerth(t, berthOptions{manifests: manifests})
	b.waitReady()
	b.waitRunning(podName("good"))
	for _, f := range files {
		b.waitProblem("DecodeError", f.name+".yaml")
	}

	code, body, err := b.getUnix("/problems")
	if err != nil || code != 200 {
		t.Fatalf("/problems: %d %v", code, err)
	}
	if strings.Contains(string(body), secretValue) {
		t.Errorf("/problems quotes the Secret's value:\n%s", body)
	}
	var list struct {
		Items []struct{ Origin, Error string }
	}
	if err := json.Unmarshal(body, &list); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		want := fmt.Sprintf("%s:%d: ", b.manifestPath(f.name+".yaml"), f.line)
		found := false
		for _, p := range list.Items {
			found = found || strings.HasPrefix(p.Error, want)
		}
		if !found {
			t.Errorf("/problems has no problem starting %q: %+v", want, list.Items)
		}
	}
	if log, _ := os.ReadFile(b.logFile); !strings.Contains(string(log), "manifest rejected") || strings.Contains(string(log), secretValue) {
		t.Errorf("berth's log has no rejection, or quotes the Secret's value")
	}

	out, err := exec.Command(berthBin, "validate", "--node-name", nodeName, b.manifests).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Errorf("berth validate: %v, want exit 1:\n%s", err, out)
	}
	if strings.Contains(string(out), secretValue) {
		t.Errorf("berth validate quotes the Secret's value:\n%s", out)
	}
	for _, f := range files {
		if want := fmt.Sprintf("%s:%d: ", b.manifestPath(f.name+".yaml"), f.line); !strings.Contains(string(out), want) {
			t.Errorf("berth validate does not name %s:\n%s", want, out)
		}
	}
}

// secretAndPod is a manifest holding a Secret and a pod taking its value
// as environment.
func secretAndPod(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: %[1]s
stringData:
  password: hunter2-e2e
---
apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: busybox:1.36
    command: ["sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"]
    env:
    - name: PW
      valueFrom:
        secretKeyRef: {name: %[1]s, key: password}
`, name)
}

// writeManifestMode writes a manifest with the given mode, atomically as
// writeManifest does: berth never sees it with another mode.
func (b *berth) writeManifestMode(name, content string, mode os.FileMode) {
	b.t.Helper()
	tmp := filepath.Join(b.manifests, ".tmp-"+name)
	if err := os.WriteFile(tmp, []byte(content), mode); err != nil {
		b.t.Fatal(err)
	}
	if err := os.Chmod(tmp, mode); err != nil { // past the umask
		b.t.Fatal(err)
	}
	if err := os.Rename(tmp, b.manifestPath(name)); err != nil {
		b.t.Fatal(err)
	}
}

// TestSecretManifestPermissions: a manifest holding a Secret that every
// local user may read (0644). Under --manifest-permissions=warn, which
// reads it as berth did before the rule, its pod runs and the log says
// so. After a restart under strict (the default), as after an upgrade,
// the file is refused with a problem naming it and the fix, and its pod
// keeps running from the last good version (same UID, same container, not
// removed as an orphan); a new such file starts nothing. chmod 600 brings
// both back.
func TestSecretManifestPermissions(t *testing.T) {
	b := newBerth(t, berthOptions{noStart: true, args: []string{"--manifest-permissions=warn"}})
	b.writeManifestMode("db.yaml", secretAndPod("db"), 0o644)
	b.start()
	b.waitReady()
	name := podName("db")
	api := b.waitRunning(name)
	before := b.waitRuntime(name, "main", api.UID)
	if !b.logContains("manifest holding a Secret others may read used anyway") {
		t.Errorf("warn: berth's log does not say it used the readable Secret")
	}
	sum := sha256.Sum256([]byte(b.manifestPath("db.yaml")))
	state := filepath.Join(b.root, "manifests", "file", hex.EncodeToString(sum[:])+".json")
	b.waitFor("the last good version persisted", waitTimeout, func() (bool, string) {
		_, err := os.Stat(state)
		return err == nil, fmt.Sprint(err)
	})

	b.stop()
	b.args = append(b.args, "--manifest-permissions=strict") // the last one counts
	b.start()
	b.waitReady()
	b.waitProblem("ManifestPermissions", "db.yaml")
	b.waitFor("two housekeeping passes", waitTimeout, func() (bool, string) {
		n, err := b.housekeepingPasses()
		return n >= 2, fmt.Sprintf("%d passes (%v)", n, err)
	})
	now, ok, detail := runtimeState(name, "main", api.UID)
	if !ok || now.container.Id != before.container.Id {
		t.Errorf("after the restart under strict the last good pod does not keep running: %s", detail)
	}
	if b.logContains("orphaned pod") {
		t.Errorf("berth removed a pod as an orphan")
	}
	code, raw, err := b.getUnix("/problems")
	want := b.manifestPath("db.yaml") + " holds a Secret and is mode 0644, readable by group or others; " +
		"it must be readable by its owner only (chmod 600 " + b.manifestPath("db.yaml")
	if code != 200 || !strings.Contains(string(raw), want) || !strings.Contains(string(raw), "keep running") {
		t.Errorf("/problems: %d %v %s\nwant %q and what keeps running", code, err, raw, want)
	}

	b.writeManifestMode("fresh.yaml", secretAndPod("fresh"), 0o644)
	b.waitProblem("ManifestPermissions", "fresh.yaml")
	if sbs, err := sandboxesOf(podName("fresh")); err != nil || len(sbs) > 0 {
		t.Errorf("the refused manifest's pod has sandboxes: %v %s", err, describeSandboxes(sbs))
	}

	for _, f := range []string{"db.yaml", "fresh.yaml"} {
		if err := os.Chmod(b.manifestPath(f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	b.waitFor("the problems gone", waitTimeout, func() (bool, string) {
		ps, err := b.problemsOf()
		return err == nil && len(ps) == 0, fmt.Sprint(ps, err)
	})
	b.waitRunning(podName("fresh"))
	if now, ok, detail := runtimeState(name, "main", api.UID); !ok || now.container.Id != before.container.Id {
		t.Errorf("chmod 600 restarted the pod: %s", detail)
	}
}
