//go:build e2e

package e2e

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// The test bed registry's credentials (see TestMain).
const (
	registryUser     = "berth-e2e"
	registryPassword = "pw-2f9c1e7a"
)

// dockerConfigJSON is a .dockerconfigjson or config.json for the bed's
// registry with the given password.
func dockerConfigJSON(password string) string {
	auth := base64.StdEncoding.EncodeToString([]byte(registryUser + ":" + password))
	return fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, bed.Registry, auth)
}

// pullPod is a pod running the busybox image of the bed's registry,
// pulled at every start, with the given image pull secrets.
func pullPod(name string, secrets ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  terminationGracePeriodSeconds: 2\n", name)
	for i, s := range secrets {
		if i == 0 {
			b.WriteString("  imagePullSecrets:\n")
		}
		fmt.Fprintf(&b, "  - name: %s\n", s)
	}
	fmt.Fprintf(&b, "  containers:\n  - name: main\n    image: %s\n    imagePullPolicy: Always\n    command: [sh, -c, %q]\n", bed.RegistryBusyboxImage, sleepForever)
	return b.String()
}

// pullSecret is an image pull Secret for the bed's registry.
func pullSecret(name, password string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Secret\nmetadata:\n  name: %s\ntype: kubernetes.io/dockerconfigjson\nstringData:\n  .dockerconfigjson: '%s'\n", name, dockerConfigJSON(password))
}

// TestImagePullSecrets pulls from the test bed's registry, which requires
// a password (htpasswd): without credentials, or with a wrong password,
// the pull fails with ErrImagePull naming the registry's 401; with an
// image pull Secret beside the pod, or the node-wide config.json in
// --root-dir, it works. The password never shows in /pods, berth describe
// or berth's log.
func TestImagePullSecrets(t *testing.T) {
	b := newBerth(t, berthOptions{manifests: map[string]string{
		"anon.yaml":   pullPod("anon"),
		"wrong.yaml":  pullSecret("wrong", "not-the-password") + "---\n" + pullPod("wrong", "wrong"),
		"secret.yaml": pullSecret("regcred", registryPassword) + "---\n" + pullPod("secret", "regcred"),
	}})
	b.waitReady()

	for _, name := range []string{"anon", "wrong"} {
		p := b.waitPod(podName(name), "a failed pull", func(p *v1.Pod) bool {
			cs := containerStatus(p, "main")
			return cs != nil && cs.State.Waiting != nil && (cs.State.Waiting.Reason == "ErrImagePull" || cs.State.Waiting.Reason == "ImagePullBackOff")
		})
		t.Logf("%s: %s", name, describePod(p))
		out, err := exec.Command(berthBin, "describe", name, "--socket", b.socket).CombinedOutput()
		// containerd 1.6 names the registry's answer; 2.1 says only that
		// authorization failed, and berth adds that it had no credentials.
		want := `Failed\s.*Failed to pull image .*(401 Unauthorized|authorization failed)`
		if name == "anon" {
			want += `.*berth had no credentials for ` + regexp.QuoteMeta(bed.Registry)
		}
		if err != nil || !regexp.MustCompile(want).Match(out) {
			t.Errorf("berth describe %s (%v) shows no failed pull matching %s:\n%s", name, err, want, out)
		}
	}
	sec := b.waitRunning(podName("secret"))
	b.waitRuntime(podName("secret"), "main", sec.UID)

	// The node-wide credentials file, in --root-dir, for a pod without
	// a secret.
	if err := os.WriteFile(filepath.Join(b.root, "config.json"), []byte(dockerConfigJSON(registryPassword)), 0o600); err != nil {
		t.Fatal(err)
	}
	b.writeManifest("node.yaml", pullPod("node"))
	node := b.waitRunning(podName("node"))
	b.waitRuntime(podName("node"), "main", node.UID)

	_, body, err := b.getUnix("/pods")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(berthBin, "describe", "secret", "--socket", b.socket).CombinedOutput()
	if err != nil {
		t.Errorf("berth describe: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("regcred")) {
		t.Errorf("berth describe does not name the pull secret:\n%s", out)
	}
	auth := base64.StdEncoding.EncodeToString([]byte(registryUser + ":" + registryPassword))
	for what, data := range map[string][]byte{"/pods": body, "berth describe": out} {
		if bytes.Contains(data, []byte(registryPassword)) || bytes.Contains(data, []byte(auth)) {
			t.Errorf("%s shows the registry password", what)
		}
	}
	if b.logContains(registryPassword) || b.logContains(auth) {
		t.Errorf("berth's log shows the registry password")
	}
}
