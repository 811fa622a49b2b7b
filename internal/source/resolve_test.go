package source

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-agent/berth/internal/podsnapshot"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podspec/podspectest"
	"github.com/berth-agent/berth/internal/source/laststate"
)

// TestObjectsLastGoodAcrossRestart: a ConfigMap's and a Secret's file
// broken while berth is down still gives the pod that uses them its data
// and its UID after the restart, from the persisted state.
func TestObjectsLastGoodAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	stateDir := filepath.Join(t.TempDir(), "root", "manifests")
	objs, pod := filepath.Join(dir, "objects.yaml"), filepath.Join(dir, "pod.yaml")
	write(t, objs, podspectest.ConfigMap+"---\n"+podspectest.Secret)
	chmod(t, objs, 0o600) // it holds a Secret
	write(t, pod, podspectest.RefPod)
	cfg := Config{ManifestPath: dir, StateDir: stateDir}

	first := startSources(t, cfg)
	eventually(t, "the pod", func() bool { return len(first.store.Pods()) == 1 })
	want := podUIDs(first.store)
	uid := first.store.Pods()[0].UID
	first.stop()

	write(t, objs, "{{ not yaml")
	second := startSources(t, cfg)
	eventually(t, "the source to deliver", second.store.SourcesReady)
	if got := podUIDs(second.store); got != want {
		t.Errorf("pods after the restart:\n%s\nwant:\n%s", got, want)
	}
	o := second.store.PodObjects(uid)
	if o == nil || string(o.Secrets["db"].Data["password"]) != "hunter2" || o.ConfigMaps["files"].Data["greeting"] != "hello" {
		t.Errorf("objects after the restart: %+v", o)
	}
	second.stop()
}

// The UID key's file under the state directory, and its size, as
// laststate keeps it.
const (
	uidKeyName = "uid-key"
	uidKeySize = 32
)

// TestUIDKey: the key is made once, 0600, and kept; with it the UID of a
// pod taking a Secret as env is not the unkeyed hash, and stays the same
// across restarts.
func TestUIDKey(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "manifests")
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	key := laststate.LoadUIDKey(dir, log)
	if len(key) != uidKeySize {
		t.Fatalf("key of %d bytes", len(key))
	}
	if fi, err := os.Stat(filepath.Join(dir, uidKeyName)); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v (mode %v)", err, fi.Mode())
	}
	if again := laststate.LoadUIDKey(dir, log); !bytes.Equal(again, key) {
		t.Errorf("the key changed on the second load")
	}
	files := [][2]string{{"a.yaml", podspectest.ConfigMap + "---\n" + podspectest.Secret}, {"b.yaml", podspectest.RefPod}}
	keyed := resolveFiles(podsnapshot.NewResolver(key), files...).Pods[0].UID
	plain := resolveFiles(podsnapshot.NewResolver(nil), files...).Pods[0].UID
	if keyed == plain {
		t.Errorf("the keyed UID is the unkeyed hash")
	}
	if again := resolveFiles(podsnapshot.NewResolver(laststate.LoadUIDKey(dir, log)), files...).Pods[0].UID; again != keyed {
		t.Errorf("the UID changed across a restart: %s -> %s", keyed, again)
	}
	if err := os.Chmod(filepath.Join(dir, uidKeyName), 0o644); err != nil {
		t.Fatal(err)
	}
	if other := laststate.LoadUIDKey(dir, log); bytes.Equal(other, key) {
		t.Errorf("a key others may read was used")
	}
}

// TestHTTPSourceObjects: a List served by the manifest URL carries the
// ConfigMaps and Secrets its pods reference.
func TestHTTPSourceObjects(t *testing.T) {
	fake := &fakeServer{status: http.StatusOK}
	list := strings.Replace(podspectest.List(podspectest.ConfigMap, podspectest.Secret, podspectest.RefPod), "kind: PodList", "kind: List", 1)
	fake.set(http.StatusOK, `"v1"`, list, false)
	st := watchedSource(t, Config{URL: "http://manifests.example/pods", HTTPClient: &http.Client{Transport: fake}})
	eventually(t, "the pod", func() bool { return len(st.Pods()) == 1 })
	o := st.PodObjects(st.Pods()[0].UID)
	if o == nil || o.ConfigMaps["files"] == nil || string(o.Secrets["db"].Data["password"]) != "hunter2" {
		t.Errorf("objects %+v", o)
	}
	if p := st.Problems(); len(p) != 0 {
		t.Errorf("problems %v", p)
	}
}

// resolveFiles assembles the snapshot of a file source holding files
// (name, content), resolved by r.
func resolveFiles(r *podsnapshot.Resolver, files ...[2]string) podsnapshot.Snapshot {
	var results []podsnapshot.Merged
	for _, f := range files {
		o := podspec.Origin{Source: podspec.SourceFile, Path: "/m/" + f[0]}
		results = append(results, podsnapshot.Merged{Origin: o, Result: podspec.Parse([]byte(f[1]), o, podspectest.Node)})
	}
	return podsnapshot.Assemble(podspec.SourceFile, results, false, nil, r)
}
