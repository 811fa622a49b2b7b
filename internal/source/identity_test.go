package source

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-agent/berth/internal/podsnapshot"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podspec/podspectest"
	"github.com/berth-agent/berth/internal/source/laststate"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	sigsyaml "sigs.k8s.io/yaml"
)

// pinPod is a pod holding a 4-digit PIN (%[1]s) where --listen-pods=redacted
// hides it: an environment value, a command, an argument or an annotation
// value, as where says.
func pinPod(where, pin string) string {
	var meta, ctr string
	switch where {
	case "env":
		ctr = "    env:\n    - {name: PIN, value: \"" + pin + "\"}\n"
	case "command":
		ctr = "    command: [\"unlock\", \"" + pin + "\"]\n"
	case "args":
		ctr = "    args: [\"--pin=" + pin + "\"]\n"
	case "annotation":
		meta = "  annotations: {example.com/pin: \"" + pin + "\"}\n"
	}
	return "apiVersion: v1\nkind: Pod\nmetadata:\n  name: vault\n" + meta +
		"spec:\n  containers:\n  - name: main\n    image: busybox:1.36\n" + ctr
}

// plainUID is the UID as berth derived it before the UID key, written out
// as an attacker would: sha256 over the node name, the source and the
// path, each ended by a zero byte, then the JSON of the pod as decoded.
func plainUID(pod *v1.Pod, origin podspec.Origin) types.UID {
	h := sha256.New()
	for _, s := range []string{podspectest.Node, origin.Source, origin.Path} {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	b, _ := json.Marshal(pod)
	h.Write(b)
	return types.UID(hex.EncodeToString(h.Sum(nil))[:32])
}

// setPIN puts pin where pinPod(where, ...) holds it.
func setPIN(p *v1.Pod, where, pin string) {
	c := &p.Spec.Containers[0]
	switch where {
	case "env":
		c.Env[0].Value = pin
	case "command":
		c.Command[1] = pin
	case "args":
		c.Args[0] = "--pin=" + pin
	case "annotation":
		p.Annotations["example.com/pin"] = pin
	}
}

// guessPIN is the attack the plain hash allowed: hash every candidate the
// way the UID was derived and compare. It returns the PIN whose plain UID
// is uid, or "".
func guessPIN(t *testing.T, where string, origin podspec.Origin, uid types.UID) string {
	t.Helper()
	var pod v1.Pod
	if err := sigsyaml.Unmarshal([]byte(pinPod(where, "0000")), &pod); err != nil {
		t.Fatal(err)
	}
	for n := range 10000 {
		pin := fmt.Sprintf("%04d", n)
		setPIN(&pod, where, pin)
		if plainUID(&pod, origin) == uid {
			return pin
		}
	}
	return ""
}

// TestSourceUIDsKeyed: a pod whose UID berth derives gets an HMAC with the
// node's UID key, not the plain hash of its manifest: the PIN it holds
// (where --listen-pods=redacted hides it) cannot be found by trying every
// candidate against the UID, which the same attack finds in the plain
// hash. The UID is the same across restarts with the same key, and
// another key gives another UID.
func TestSourceUIDsKeyed(t *testing.T) {
	for _, where := range []string{"env", "command", "args", "annotation"} {
		t.Run(where, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "manifests")
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			m := filepath.Join(dir, "vault.yaml")
			write(t, m, pinPod(where, "1234"))
			origin := podspec.Origin{Source: podspec.SourceFile, Path: m}
			plain := podspec.Parse([]byte(pinPod(where, "1234")), origin, podspectest.Node).Pods[0].UID

			uidWith := func(stateDir string) types.UID {
				s := startSources(t, Config{ManifestPath: dir, StateDir: stateDir})
				defer s.stop()
				eventually(t, "the pod", func() bool { return len(s.store.Pods()) == 1 })
				p := s.store.Pods()[0]
				if p.Annotations[podspec.AnnotationHash] != string(p.UID) {
					t.Errorf("%s = %q, the UID is %q", podspec.AnnotationHash, p.Annotations[podspec.AnnotationHash], p.UID)
				}
				return p.UID
			}
			stateDir := filepath.Join(root, "state")
			keyed := uidWith(stateDir)
			if keyed == plain {
				t.Fatalf("the UID %s is the plain hash of the manifest", keyed)
			}
			if again := uidWith(stateDir); again != keyed {
				t.Errorf("the UID changed across a restart with the same key: %s -> %s", keyed, again)
			}
			if other := uidWith(filepath.Join(root, "other-state")); other == keyed || other == plain {
				t.Errorf("another key gives UID %s (keyed %s, plain %s)", other, keyed, plain)
			}
			if pin := guessPIN(t, where, origin, keyed); pin != "" {
				t.Errorf("the PIN %s was found from the keyed UID", pin)
			}
			if pin := guessPIN(t, where, origin, plain); pin != "1234" {
				t.Errorf("the attack on the plain hash found %q, want 1234: it does not hash as berth did", pin)
			}
		})
	}
}

// TestUnkeyedUIDUnchanged: without a state directory (berth validate, the
// podspec.Parse of tests) the UID is the plain hash berth has always derived, and
// a pod of a berth before the UID key is known by: these values must never
// change, or an upgrade would restart every such pod.
func TestUnkeyedUIDUnchanged(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		origin podspec.Origin
		want   types.UID
	}{
		{name: "file", in: podspectest.Manifest("web", "nginx:1"), origin: webOrigin, want: "c1d7278492e591128fbff02845cdc30e"},
		{name: "env value", in: pinPod("env", "1234"), origin: webOrigin, want: "e2d0a01edbaa89a34082b3d53755eea3"},
		{name: "url", in: podspectest.Manifest("web", "nginx:1"), origin: podspec.Origin{Source: podspec.SourceHTTP, Path: "http://m.example/pods"}, want: "dd7854fd4e0d667fbadbe753cd2b4fe3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res := podspec.Parse([]byte(tt.in), tt.origin, podspectest.Node)
			if len(res.Pods) != 1 {
				t.Fatalf("problems: %v", res.Problems)
			}
			if got := res.Pods[0].UID; got != tt.want {
				t.Errorf("UID %s, want %s", got, tt.want)
			}
		})
	}
	dir := t.TempDir()
	m := filepath.Join(dir, "vault.yaml")
	write(t, m, pinPod("env", "1234"))
	snap := ReadPaths(ReadOptions{NodeName: podspectest.Node}, dir)
	want := podspec.Parse([]byte(pinPod("env", "1234")), podspec.Origin{Source: podspec.SourceFile, Path: m}, podspectest.Node).Pods[0].UID
	if len(snap.Pods) != 1 || snap.Pods[0].UID != want {
		t.Errorf("berth validate's pods %v, want UID %s", snap.Pods, want)
	}
}

// TestLegacyUIDMigration: the pods of a berth before the UID key run under
// plain-hash UIDs, and its last good state holds them. Upgraded, berth
// keeps those UIDs for the same content, across further restarts and a
// restart with the manifest broken (the kept version runs under the UID it
// runs under), also for a pod taking a Secret as environment; an edit
// gives the keyed UID, and going back to the old content does not bring
// the plain hash back.
func TestLegacyUIDMigration(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "manifests")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	stateDir := filepath.Join(root, "state")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	key := laststate.LoadUIDKey(stateDir, log) // the earlier berth made it for env UIDs

	pin, objs, ref := filepath.Join(dir, "pin.yaml"), filepath.Join(dir, "objs.yaml"), filepath.Join(dir, "ref.yaml")
	files := map[string]string{pin: pinPod("env", "1234"), objs: podspectest.ConfigMap + "---\n" + podspectest.Secret, ref: podspectest.RefPod}
	// What the earlier berth parsed, ran and kept: plain content UIDs,
	// the env UID an HMAC of the plain one.
	var results []podsnapshot.Merged
	entries := map[string]podspec.Result{}
	for _, p := range []string{objs, pin, ref} {
		write(t, p, files[p])
		o := podspec.Origin{Source: podspec.SourceFile, Path: p}
		res := podspec.Parse([]byte(files[p]), o, podspectest.Node)
		results = append(results, podsnapshot.Merged{Origin: o, Result: res})
		entries[p] = res
	}
	old := podsnapshot.Assemble(podspec.SourceFile, results, false, nil, podsnapshot.NewResolver(key))
	if len(old.Pods) != 2 {
		t.Fatalf("the earlier berth's pods: %v %v", old.Pods, old.Problems)
	}
	want := map[string]types.UID{}
	for _, p := range old.Pods {
		want[p.Name] = p.UID
	}
	state := newLastGoodState(Config{NodeName: podspectest.Node, StateDir: stateDir}, podspec.SourceFile, log)
	state.Load()
	state.Save(entries)

	uids := func(what string) map[string]types.UID {
		t.Helper()
		s := startSources(t, Config{ManifestPath: dir, StateDir: stateDir})
		defer s.stop()
		eventually(t, what, func() bool { return len(s.store.Pods()) == 2 })
		got := map[string]types.UID{}
		for _, p := range s.store.Pods() {
			got[p.Name] = p.UID
		}
		return got
	}
	for _, what := range []string{"the upgrade", "a restart"} {
		if got := uids(what); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("after %s: UIDs %v, want the earlier berth's %v", what, got, want)
		}
	}
	write(t, pin, "{{ not yaml")
	if got := uids("a restart with a broken manifest"); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("after a restart with a broken manifest: UIDs %v, want the earlier berth's %v", got, want)
	}

	// Edited: the keyed UID, while the pod beside it keeps its UID.
	s := startSources(t, Config{ManifestPath: dir, StateDir: stateDir})
	name := "vault-" + podspectest.Node
	uidOf := func() types.UID {
		for _, p := range s.store.Pods() {
			if p.Name == name {
				return p.UID
			}
		}
		return ""
	}
	eventually(t, "the kept pod", func() bool { return uidOf() == want[name] })
	edited := pinPod("env", "5678")
	write(t, pin, edited)
	eventually(t, "the edit", func() bool { return uidOf() != want[name] })
	plain := podspec.Parse([]byte(edited), podspec.Origin{Source: podspec.SourceFile, Path: pin}, podspectest.Node).Pods[0].UID
	if got := uidOf(); got == plain {
		t.Errorf("the edited pod has the plain hash %s as UID", got)
	}
	first := uidOf()
	write(t, pin, files[pin])
	eventually(t, "the content back", func() bool { return uidOf() != first })
	if got := uidOf(); got == want[name] {
		t.Errorf("the old content got its plain-hash UID %s back", got)
	}
	for _, p := range s.store.Pods() {
		if p.Name != name && p.UID != want[p.Name] {
			t.Errorf("%s: UID %s, want %s", p.Name, p.UID, want[p.Name])
		}
	}
	s.stop()
}

// TestLegacyUIDMigrationHTTP: the same for the URL source, whose last good
// state keeps the body's pods under the URL.
func TestLegacyUIDMigrationHTTP(t *testing.T) {
	body := podspectest.List(pinPod("env", "1234"))
	fake := &fakeServer{status: http.StatusOK, body: body}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	stateDir := filepath.Join(t.TempDir(), "state")
	cfg := Config{URL: srv.URL + "/pods", HTTPClient: srv.Client(), StateDir: stateDir,
		HTTPCheckFrequency: time.Hour, HTTPTimeout: time.Second}
	u, err := url.Parse(cfg.URL)
	if err != nil {
		t.Fatal(err)
	}
	origin := podspec.HTTPOrigin(u)
	res := podspec.Parse([]byte(body), origin, podspectest.Node)
	if len(res.Pods) != 1 {
		t.Fatalf("problems: %v", res.Problems)
	}
	want := res.Pods[0].UID
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	state := newLastGoodState(Config{NodeName: podspectest.Node, StateDir: stateDir}, podspec.SourceHTTP, log)
	state.Load()
	state.Save(map[string]podspec.Result{origin.Path: res})

	uid := func() types.UID {
		s := startSources(t, cfg)
		defer s.stop()
		eventually(t, "ready", s.store.SourcesReady)
		if ps := s.store.Pods(); len(ps) == 1 {
			return ps[0].UID
		}
		return ""
	}
	if got := uid(); got != want {
		t.Errorf("after the upgrade: UID %s, want the earlier berth's %s", got, want)
	}
	fake.set(http.StatusOK, "", podspectest.List(pinPod("env", "5678")), false)
	edited := uid()
	if plain := podspec.Parse([]byte(podspectest.List(pinPod("env", "5678"))), origin, podspectest.Node).Pods[0].UID; edited == "" || edited == plain {
		t.Errorf("edited: UID %q, the plain hash is %s", edited, plain)
	}
}

// TestUIDKeyMadeLogged: making the key says so, as a warning when the
// state directory was in use (the key was lost: pods restart once).
func TestUIDKeyMadeLogged(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  string
	}{
		{name: "first start", setup: func(*testing.T, string) {}, want: `level=INFO msg="making the node's UID key"`},
		{name: "lost", setup: func(t *testing.T, dir string) {
			if err := os.MkdirAll(filepath.Join(dir, podspec.SourceFile), 0o700); err != nil {
				t.Fatal(err)
			}
		}, want: `level=WARN msg="the UID key is missing from a state directory in use`},
		{name: "unusable", setup: func(t *testing.T, dir string) {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				t.Fatal(err)
			}
			write(t, filepath.Join(dir, uidKeyName), "short")
		}, want: `level=WARN msg="ignoring the UID key; making a new one`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "state")
			tt.setup(t, dir)
			logs := &lockedBuffer{}
			if key := laststate.LoadUIDKey(dir, slog.New(slog.NewTextHandler(logs, nil))); len(key) != uidKeySize {
				t.Fatalf("key of %d bytes", len(key))
			}
			if !strings.Contains(logs.String(), tt.want) {
				t.Errorf("log %q, want %s", logs.String(), tt.want)
			}
		})
	}
}

var webOrigin = podspec.Origin{Source: podspec.SourceFile, Path: "/etc/kubernetes/manifests/web.yaml"}
