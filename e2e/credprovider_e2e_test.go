//go:build e2e

package e2e

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// TestImageCredentialProvider pulls the test bed registry's image, which
// needs a password, with no image pull Secret and no config.json: the
// credentials come from a kubelet image credential provider plugin (built
// here from testdata/credprovider), configured by
// --image-credential-provider-config and -bin-dir. The plugin's mode file
// says how it answers at each run:
//
//   - hang: berth kills it (and the child holding its stdout) at
//     --image-credential-provider-timeout; the pod's event names the
//     plugin and the timeout, the pull goes on anonymously and fails, and
//     the pod waits in ImagePullBackOff while berth runs on;
//   - wrong: the pull with its credentials fails, the event names whose
//     credentials they were;
//   - ok: the pod runs; a second pod of the same image pulls with the
//     credentials the plugin cached (by registry) without running it.
//
// The password never shows in /pods, the events, berth describe or
// berth's log.
func TestImageCredentialProvider(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	const plugin = "e2e-credential-provider"
	build := exec.Command("go", "build", "-o", filepath.Join(bin, plugin), "./testdata/credprovider")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the plugin: %v\n%s", err, out)
	}
	modeFile, callsFile, pidsFile := filepath.Join(dir, "mode"), filepath.Join(dir, "calls"), filepath.Join(dir, "pids")
	setMode := func(mode string) {
		t.Helper()
		if err := os.WriteFile(modeFile, []byte(mode), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	calls := func() int {
		data, err := os.ReadFile(callsFile)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return strings.Count(string(data), "\n")
	}
	config := filepath.Join(dir, "credential-providers.yaml")
	if err := os.WriteFile(config, fmt.Appendf(nil, `apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
  - name: %s
    matchImages: [%q]
    defaultCacheDuration: 1m
    apiVersion: credentialprovider.kubelet.k8s.io/v1
    env:
      - {name: MODE_FILE, value: %q}
      - {name: CALLS_FILE, value: %q}
      - {name: PIDS_FILE, value: %q}
      - {name: REGISTRY_USER, value: %q}
      - {name: REGISTRY_PASSWORD, value: %q}
`, plugin, bed.Registry, modeFile, callsFile, pidsFile, registryUser, registryPassword), 0o600); err != nil {
		t.Fatal(err)
	}

	// The timeout is long enough for the plugin's answer on a loaded
	// machine: only a plugin that never answers meets it.
	setMode("hang")
	b := newBerth(t, berthOptions{
		args:      []string{"--image-credential-provider-config", config, "--image-credential-provider-bin-dir", bin, "--image-credential-provider-timeout", "10s"},
		manifests: map[string]string{"cp.yaml": pullPod("cp")},
	})
	b.waitReady()
	name := podName("cp")

	b.waitEvent(name, "Failed", "credential provider "+plugin+": killed after 10s without answering")
	b.waitPod(name, "the pull back-off", func(p *v1.Pod) bool {
		cs := containerStatus(p, "main")
		return cs != nil && cs.State.Waiting != nil && cs.State.Waiting.Reason == "ImagePullBackOff"
	})
	if !b.running() {
		t.Fatal("berth exited after a plugin hung")
	}
	pids, err := os.ReadFile(pidsFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(string(pids)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			t.Fatal(err)
		}
		waitKilled(t, pid)
	}

	setMode("wrong")
	b.waitEvent(name, "Failed", "with the credentials of credential provider "+plugin+": ")
	failed := b.findEvent(name, "Failed", "with the credentials of credential provider "+plugin)
	if !regexp.MustCompile(`401 Unauthorized|authorization failed`).MatchString(failed.Message) {
		t.Errorf("the failed pull's event does not say the registry refused the credentials: %s", failed.Message)
	}

	setMode("ok")
	p := b.waitRunning(name)
	b.waitRuntime(name, "main", p.UID)
	before := calls()
	b.writeManifest("cp2.yaml", pullPod("cp2"))
	p2 := b.waitRunning(podName("cp2"))
	b.waitRuntime(podName("cp2"), "main", p2.UID)
	if after := calls(); after != before {
		t.Errorf("the plugin ran %d more times for a second pull of the same registry, want none: its answer is cached", after-before)
	}

	_, body, err := b.getUnix("/pods")
	if err != nil {
		t.Fatal(err)
	}
	_, events, err := b.getUnix("/pods/default/" + name + "/events")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(berthBin, "describe", "cp", "--socket", b.socket).CombinedOutput()
	if err != nil {
		t.Errorf("berth describe: %v\n%s", err, out)
	}
	if !bytes.Contains(out, []byte("killed after 10s")) {
		t.Errorf("berth describe does not show the plugin's timeout:\n%s", out)
	}
	auth := base64.StdEncoding.EncodeToString([]byte(registryUser + ":" + registryPassword))
	for what, data := range map[string][]byte{"/pods": body, "the events": events, "berth describe": out} {
		if bytes.Contains(data, []byte(registryPassword)) || bytes.Contains(data, []byte(auth)) {
			t.Errorf("%s shows the registry password", what)
		}
	}
	if b.logContains(registryPassword) || b.logContains(auth) {
		t.Errorf("berth's log shows the registry password")
	}
}

// waitKilled waits, on a pidfd, for the process pid (not berth's child,
// nor the test's) to end: berth killed its process group at the timeout,
// so within seconds.
func waitKilled(t *testing.T, pid int) {
	t.Helper()
	fd, err := unix.PidfdOpen(pid, 0)
	if errors.Is(err, unix.ESRCH) {
		return // gone already
	}
	if err != nil {
		t.Fatalf("pidfd of %d: %v", pid, err)
	}
	defer unix.Close(fd)
	for {
		ready, err := unix.Poll([]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}, 10_000)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || ready == 0 {
			stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
			t.Errorf("process %d of the hung plugin still runs after the timeout (%v): %s", pid, err, stat)
		}
		return
	}
}
