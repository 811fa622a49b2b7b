//go:build e2e

package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"
)

// pinManifest is a pod holding a 4-digit PIN as an environment value, which
// --listen-pods=redacted hides.
func pinManifest(pin string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: vault
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: busybox:1.36
    command: ["sh", "-c", %q]
    env:
    - name: PIN
      value: "%s"
`, sleepForever, pin)
}

// plainUID is the UID as berth derived it before the node's UID key,
// written out as an attacker would: sha256 over the node name, the source
// and the manifest's path, each ended by a zero byte, then the JSON of the
// pod as decoded, cut to 32 hex digits.
func plainUID(t *testing.T, pod *v1.Pod, path string) types.UID {
	t.Helper()
	h := sha256.New()
	for _, s := range []string{nodeName, "file", path} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	b, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	h.Write(b)
	return types.UID(hex.EncodeToString(h.Sum(nil))[:32])
}

// decodePod decodes a manifest as berth does before deriving its UID.
func decodePod(t *testing.T, manifest string) *v1.Pod {
	t.Helper()
	var pod v1.Pod
	if err := yaml.Unmarshal([]byte(manifest), &pod); err != nil {
		t.Fatal(err)
	}
	return &pod
}

// validateUID is the UID berth validate (no state directory, no key) shows
// for the one pod of path.
func validateUID(t *testing.T, bin, path string) types.UID {
	t.Helper()
	out, err := exec.Command(bin, "validate", "--node-name", nodeName, "-o", "json", path).Output()
	if err != nil {
		t.Fatalf("berth validate: %v\n%s", err, out)
	}
	var list v1.PodList
	if err := json.Unmarshal(out, &list); err != nil || len(list.Items) != 1 {
		t.Fatalf("berth validate: %v: %s", err, out)
	}
	return list.Items[0].UID
}

// TestUIDNotAnOracle runs a pod holding PIN=1234 under
// --listen-pods=redacted: the UID every local user gets over TCP (and sees
// in /var/log/pods) is not the plain hash of the manifest, and trying
// every PIN against it finds nothing, while the same attack finds 1234 in
// the UID berth validate shows, which has no key.
func TestUIDNotAnOracle(t *testing.T) {
	b := newBerth(t, berthOptions{args: []string{"--listen-pods", "redacted"},
		manifests: map[string]string{"vault.yaml": pinManifest("1234")}})
	b.waitReady()
	name := podName("vault")
	b.waitRunning(name)

	code, body, err := getFrom(b.http, "http://"+b.addr+"/pods")
	if err != nil || code != http.StatusOK {
		t.Fatalf("TCP /pods: %d %v %.300s", code, err, body)
	}
	if strings.Contains(string(body), "1234") {
		t.Errorf("the redacted answer shows the PIN: %.2000s", body)
	}
	var list v1.PodList
	if err := json.Unmarshal(body, &list); err != nil || len(list.Items) != 1 {
		t.Fatalf("TCP /pods: %v: %.300s", err, body)
	}
	p := list.Items[0]
	uid := p.UID
	if p.Annotations["kubernetes.io/config.hash"] != string(uid) {
		t.Errorf("config.hash %q, UID %q", p.Annotations["kubernetes.io/config.hash"], uid)
	}
	if _, err := os.Stat(filepath.Join(b.logs, fmt.Sprintf("default_%s_%s", name, uid))); err != nil {
		t.Errorf("the pod's log directory is not named with the UID /pods shows: %v", err)
	}

	path := b.manifestPath("vault.yaml")
	plain := plainUID(t, decodePod(t, pinManifest("1234")), path)
	if v := validateUID(t, berthBin, path); v != plain {
		t.Fatalf("the test hashes as berth validate does not: %s, validate %s", plain, v)
	}
	if uid == plain {
		t.Fatalf("the UID %s is the plain hash of the manifest", uid)
	}
	candidate := decodePod(t, pinManifest("0000"))
	guess := func(target types.UID) string {
		for n := range 10000 {
			pin := fmt.Sprintf("%04d", n)
			candidate.Spec.Containers[0].Env[0].Value = pin
			if plainUID(t, candidate, path) == target {
				return pin
			}
		}
		return ""
	}
	if pin := guess(uid); pin != "" {
		t.Errorf("the PIN %s was found from the UID served to every local user", pin)
	}
	if pin := guess(plain); pin != "1234" {
		t.Errorf("the attack on the plain hash found %q, want 1234", pin)
	}
}

// TestUIDUpgradeFromPlainHash runs a pod under the berth before the UID
// key (plain-hash UIDs), kills it with SIGKILL and starts this berth on
// the same directories: the pod keeps its UID and its container (not
// restarted, not removed as an orphan). An edit of the manifest then gives
// the new version a keyed UID.
func TestUIDUpgradeFromPlainHash(t *testing.T) {
	old := oldBerthBinary(t)
	b := newBerth(t, berthOptions{manifests: map[string]string{"vault.yaml": pinManifest("1234")}, noStart: true})
	b.bin = old
	b.start()
	b.waitReady()
	name := podName("vault")
	api := b.waitRunning(name)
	path := b.manifestPath("vault.yaml")
	if plain := plainUID(t, decodePod(t, pinManifest("1234")), path); api.UID != plain {
		t.Fatalf("the earlier berth's UID %s is not the plain hash %s: %s is not the berth before the key", api.UID, plain, old)
	}
	before := b.waitRuntime(name, "main", api.UID)

	b.kill()
	b.bin = ""
	b.start()
	b.waitReady()
	// Orphans are cleaned up by the relists and housekeeping passes after
	// the sources are ready: two passes since the restart would have
	// removed the pod had berth given it another UID.
	b.waitFor("two housekeeping passes", waitTimeout, func() (bool, string) {
		n, err := b.housekeepingPasses()
		return n >= 2, fmt.Sprintf("%d passes (%v)", n, err)
	})
	now, ok, detail := runtimeState(name, "main", api.UID)
	if !ok || now.container.Id != before.container.Id {
		t.Fatalf("after the upgrade the pod does not keep running: %s (container %s, was %s)",
			detail, shortID(now.container.GetId()), shortID(before.container.Id))
	}
	if b.logContains("orphaned pod") {
		t.Errorf("berth removed a pod as an orphan")
	}
	p := b.waitRunning(name)
	cs := containerStatus(p, "main")
	switch {
	case p.UID != api.UID:
		t.Errorf("/pods after the upgrade: UID %s, was %s", p.UID, api.UID)
	case cs == nil || cs.RestartCount != 0 || shortID(cs.ContainerID) != shortID(before.container.Id):
		t.Errorf("/pods after the upgrade: container %s; want %s, 0 restarts", describePod(p), shortID(before.container.Id))
	}

	b.writeManifest("vault.yaml", pinManifest("5678"))
	edited := b.waitPod(name, "the edit running", func(p *v1.Pod) bool {
		return p.UID != api.UID && p.Status.Phase == v1.PodRunning
	})
	if plain := plainUID(t, decodePod(t, pinManifest("5678")), path); edited.UID == plain {
		t.Errorf("the edited pod's UID %s is the plain hash of its manifest", edited.UID)
	}
	b.waitRuntime(name, "main", edited.UID)
}

// oldBinaryEnv names a berth binary from before the UID key, in place of
// the one oldBerthBinary builds.
const oldBinaryEnv = "BERTH_E2E_OLD_BINARY"

// keyedMarker is in manifest/identity.go from the commit that made derived
// UIDs keyed on: the berth before it, its parent, is the one whose pods an
// upgrade must keep.
const keyedMarker = "hmac.New(sha256.New, key)"

var oldBerth struct {
	once sync.Once
	bin  string
	err  error
}

// oldBerthBinary returns $BERTH_E2E_OLD_BINARY, or builds the berth of the
// commit before derived UIDs were keyed from this repository's history
// (once per commit, kept in the test bed's cache directory).
func oldBerthBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv(oldBinaryEnv); bin != "" {
		return bin
	}
	oldBerth.once.Do(func() { oldBerth.bin, oldBerth.err = buildOldBerth() })
	if oldBerth.err != nil {
		t.Fatalf("the berth before the UID key: %v (set %s to one)", oldBerth.err, oldBinaryEnv)
	}
	return oldBerth.bin
}

func buildOldBerth() (string, error) {
	// The module root: this package is e2e/.
	out, err := exec.Command("git", "-C", "..", "log", "--format=%H", "-S"+keyedMarker, "--", "manifest/identity.go").Output()
	if err != nil {
		return "", fmt.Errorf("git log: %w (the repository's history is needed)", err)
	}
	commits := strings.Fields(string(out))
	if len(commits) == 0 {
		return "", fmt.Errorf("no commit adds %q to manifest/identity.go", keyedMarker)
	}
	out, err = exec.Command("git", "-C", "..", "rev-parse", commits[len(commits)-1]+"^").Output()
	if err != nil {
		return "", fmt.Errorf("the parent of %s: %w (a shallow clone? git fetch --unshallow)", commits[len(commits)-1], err)
	}
	base := strings.TrimSpace(string(out))
	cache := os.Getenv("BERTH_TESTBED_CACHE")
	if cache == "" {
		d, err := os.UserCacheDir()
		if err != nil {
			d = os.TempDir()
		}
		cache = filepath.Join(d, "berth-testbed")
	}
	bin := filepath.Join(cache, "berth-"+base)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	src, err := os.MkdirTemp("", "berth-e2e-old-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	if out, err := exec.Command("sh", "-c", `git -C .. archive "$1" | tar -x -C "$2"`, "sh", base, src).CombinedOutput(); err != nil {
		return "", fmt.Errorf("git archive %s: %w\n%s", base, err, out)
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	tmp := fmt.Sprintf("%s.tmp-%d", bin, os.Getpid())
	// As make build builds, so the packages of the dependencies come
	// from the build cache.
	build := exec.Command("go", "build", "-trimpath", "-tags", "grpcnotrace", "-o", tmp, "./cmd/berth")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build of %s: %w\n%s", base, err, out)
	}
	// Two suites building at once each rename a whole binary.
	if err := os.Rename(tmp, bin); err != nil {
		return "", err
	}
	return bin, nil
}
