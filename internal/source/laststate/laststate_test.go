package laststate

import (
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podspec/podspectest"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// stateFiles lists the files of a source's state dir.
func stateFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestDecodeState feeds state files that must be refused, whatever is in
// them.
func TestDecodeState(t *testing.T) {
	origin := "/etc/kubernetes/manifests/a.yaml"
	res := podspec.Parse([]byte(podspectest.Manifest("a", "img:1")), podspec.Origin{Source: podspec.SourceFile, Path: origin}, podspectest.Node)
	encode := func(edit func(*stateFile)) []byte {
		sf := stateFile{Version: stateVersion, Source: podspec.SourceFile, Origin: origin, NodeName: podspectest.Node,
			Pods: []statePod{{Line: 4, Pod: res.Pods[0].DeepCopy()}}}
		edit(&sf)
		b, err := json.Marshal(sf)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name string
		data []byte
		err  string // "" for accepted
	}{
		{"good", encode(func(*stateFile) {}), ""},
		{"empty", nil, "decode"},
		{"truncated", encode(func(*stateFile) {})[:100], "decode"},
		{"trailing", append(encode(func(*stateFile) {}), []byte("{}")...), "trailing"},
		{"unknown field", []byte(`{"version":1,"evil":true}`), "unknown field"},
		{"other version", encode(func(sf *stateFile) { sf.Version = 2 }), "version"},
		{"other source", encode(func(sf *stateFile) { sf.Source = podspec.SourceHTTP }), "source"},
		{"other node", encode(func(sf *stateFile) { sf.NodeName = "node2" }), "node"},
		{"no pods", encode(func(sf *stateFile) { sf.Pods = nil }), "no pods"},
		{"null pod", encode(func(sf *stateFile) { sf.Pods[0].Pod = nil }), "empty"},
		{"uid not its hash", encode(func(sf *stateFile) { sf.Pods[0].Pod.UID = types.UID("x") }), "uid"},
		{"other origin", encode(func(sf *stateFile) { sf.Pods[0].Pod.Annotations[podspec.AnnotationOrigin] = "/tmp/x.yaml" }), "not read from"},
		{"other node's pod", encode(func(sf *stateFile) { sf.Pods[0].Pod.Spec.NodeName = "node2" }), "not of node"},
		{"invalid pod", encode(func(sf *stateFile) { sf.Pods[0].Pod.Spec.Containers = nil }), "spec.containers"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, got, err := decodeState(tc.data, podspec.SourceFile, podspectest.Node)
			switch {
			case tc.err == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tc.err == "" && (len(got.Pods) != 1 || got.Pods[0].UID != res.Pods[0].UID || got.Lines[0] != 4):
				t.Errorf("decoded %+v", got)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("error %v, want one with %q", err, tc.err)
			}
		})
	}
}

// FuzzDecodeState: whatever a state file holds, decoding it never panics,
// and what it accepts carries the identity of the file's origin.
func FuzzDecodeState(f *testing.F) {
	origin := "/etc/kubernetes/manifests/a.yaml"
	res := podspec.Parse([]byte(podspectest.Manifest("a", "img:1")), podspec.Origin{Source: podspec.SourceFile, Path: origin}, podspectest.Node)
	good, err := json.Marshal(stateFile{Version: stateVersion, Source: podspec.SourceFile, Origin: origin, NodeName: podspectest.Node,
		Pods: []statePod{{Line: 4, Pod: res.Pods[0]}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"version":1}`))
	objs := podspec.Parse([]byte(podspectest.ConfigMap+"---\n"+podspectest.Secret), podspec.Origin{Source: podspec.SourceFile, Path: origin}, podspectest.Node)
	withObjects, err := json.Marshal(stateFile{Version: stateVersion, Source: podspec.SourceFile, Origin: origin, NodeName: podspectest.Node,
		Pods: []statePod{{Line: 4, Pod: res.Pods[0], DerivedUID: true}}, Objects: objs.Objects})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(withObjects)
	f.Fuzz(func(t *testing.T, data []byte) {
		sf, got, err := decodeState(data, podspec.SourceFile, podspectest.Node)
		if err != nil {
			return
		}
		if len(got.Pods)+len(got.Objects) == 0 || len(got.Pods) != len(got.Lines) {
			t.Fatalf("accepted %d pods, %d lines, %d objects", len(got.Pods), len(got.Lines), len(got.Objects))
		}
		for _, o := range got.Objects {
			if (o.ConfigMap == nil) == (o.Secret == nil) || len(podspec.CheckObject(&o)) > 0 {
				t.Fatalf("accepted an invalid object %+v", o)
			}
		}
		for _, p := range got.Pods {
			if podspec.CheckIdentity(p, podspec.SourceFile, sf.Origin, podspectest.Node) != nil {
				t.Fatalf("accepted a pod of another identity: %+v", p.ObjectMeta)
			}
		}
	})
}

// TestLastGoodStageThenSync: stage leaves the entry on disk, renamed into
// place, before the pods go to the store, and owes the fsyncs that sync
// then pays; a removal owes the directory's.
func TestLastGoodStageThenSync(t *testing.T) {
	stateDir := t.TempDir()
	l := New(Config{StateDir: stateDir, Source: podspec.SourceFile, NodeName: podspectest.Node, MaxBytes: podspec.DefaultMaxBytes, Clock: clock.RealClock{}, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	l.Load()
	origin := "/etc/kubernetes/manifests/a.yaml"
	pod := parseOne(t, podspectest.Manifest("a", "img:1"), podspec.Origin{Source: podspec.SourceFile, Path: origin}, podspectest.Node)
	l.Stage(map[string]podspec.Result{origin: {Pods: []*v1.Pod{pod}, Lines: []int{1}}})
	sdir := filepath.Join(stateDir, podspec.SourceFile)
	if names := stateFiles(t, sdir); len(names) != 1 || names[0] != stateName(origin) {
		t.Fatalf("state files after stage: %v", names)
	}
	if len(l.unsynced) != 1 || !l.dirUnsynced {
		t.Fatalf("stage owes %v and dir %v, want the file and the dir", l.unsynced, l.dirUnsynced)
	}
	l.Sync()
	if len(l.unsynced) != 0 || l.dirUnsynced {
		t.Fatalf("sync left %v and dir %v", l.unsynced, l.dirUnsynced)
	}
	l.Stage(map[string]podspec.Result{})
	if names := stateFiles(t, sdir); len(names) != 0 || !l.dirUnsynced {
		t.Fatalf("after the entry went: files %v, dir owed %v", names, l.dirUnsynced)
	}
	l.Sync()
}

// parseOne is the one pod of manifest in, which must parse cleanly.
func parseOne(t *testing.T, in string, origin podspec.Origin, node string) *v1.Pod {
	t.Helper()
	res := podspec.Parse([]byte(in), origin, node)
	if len(res.Pods) != 1 || len(res.Problems) != 0 {
		t.Fatalf("Parse: pods %d, problems %v", len(res.Pods), res.Problems)
	}
	return res.Pods[0]
}
