package podsnapshot

import (
	"fmt"
	"strings"
	"testing"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podspec/podspectest"
)

// problemLines renders problems as "LINE FIELD REASON" for comparison.
func problemLines(ps []podspec.Problem) []string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%d %s %s", p.Line, p.Field, p.Reason))
	}
	return out
}

// resolveFiles assembles the file source's snapshot of the given files
// (name -> content), in order, with r.
func resolveFiles(r *Resolver, files ...[2]string) Snapshot {
	var results []Merged
	for _, f := range files {
		o := podspec.Origin{Source: podspec.SourceFile, Path: "/m/" + f[0]}
		results = append(results, Merged{Origin: o, Result: podspec.Parse([]byte(f[1]), o, podspectest.Node)})
	}
	return Assemble(podspec.SourceFile, results, false, nil, r)
}

func TestResolve(t *testing.T) {
	yes := "true"
	tests := []struct {
		name      string
		files     [][2]string
		wantPods  int
		wantProbs []string
		wantMsg   string
	}{
		{name: "objects in another file of the directory", wantPods: 1,
			files: [][2]string{{"a.yaml", podspectest.ConfigMap + "---\n" + podspectest.Secret}, {"b.yaml", podspectest.RefPod}}},
		{name: "objects after the pod in its file", wantPods: 1,
			files: [][2]string{{"a.yaml", podspectest.RefPod + "---\n" + podspectest.ConfigMap + "---\n" + podspectest.Secret}}},
		{name: "a missing ConfigMap is an error at its line", wantPods: 0,
			files:     [][2]string{{"a.yaml", podspectest.Secret}, {"b.yaml", podspectest.RefPod}},
			wantProbs: []string{"15 spec.volumes[0].configMap.name MissingObject"},
			wantMsg:   `/m/b.yaml:15: spec.volumes[0].configMap.name: Invalid value: "files": no ConfigMap of that name in namespace "default"`},
		{name: "a missing key", wantPods: 0,
			files:     [][2]string{{"a.yaml", podspectest.ConfigMap + "---\n" + strings.Replace(podspectest.Secret, "password", "pass", 1)}, {"b.yaml", podspectest.RefPod}},
			wantProbs: []string{"12 spec.containers[0].env[0].valueFrom.secretKeyRef.key MissingObject"},
			wantMsg:   `Secret "db" has no key "password"`},
		{name: "optional references may miss", wantPods: 1,
			files: [][2]string{{"b.yaml", strings.Replace(strings.Replace(podspectest.RefPod, "{name: files}", "{name: files, optional: "+yes+"}", 1),
				"key: password}", "key: password, optional: true}", 1)}}},
		{name: "another namespace does not count", wantPods: 0,
			files: [][2]string{{"a.yaml", strings.Replace(podspectest.ConfigMap, "name: files", "name: files\n  namespace: other", 1) + "---\n" + podspectest.Secret},
				{"b.yaml", podspectest.RefPod}},
			wantProbs: []string{"15 spec.volumes[0].configMap.name MissingObject"}},
		{name: "a duplicate object: the first in order counts", wantPods: 1,
			files:     [][2]string{{"a.yaml", podspectest.ConfigMap + "---\n" + podspectest.Secret}, {"b.yaml", podspectest.ConfigMap + "---\n" + podspectest.RefPod}},
			wantProbs: []string{"1 metadata.name DuplicateName"}},
		{name: "a pull secret must hold registry credentials", wantPods: 0,
			files:     [][2]string{{"a.yaml", podspectest.Secret}, {"b.yaml", strings.Replace(podspectest.Manifest("p", "img"), "spec:\n", "spec:\n  imagePullSecrets: [{name: db}]\n", 1)}},
			wantProbs: []string{"6 spec.imagePullSecrets[0].name MissingObject"},
			wantMsg:   "must be of type kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg"},
		{name: "in a List item, the path has its prefix", wantPods: 0,
			files:     [][2]string{{"l.yaml", "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(strings.TrimSuffix(podspectest.RefPod, "\n"), "\n", "\n  ") + "\n"}},
			wantProbs: []string{"15 items[0].spec.containers[0].env[0].valueFrom.secretKeyRef.name MissingObject", "18 items[0].spec.volumes[0].configMap.name MissingObject"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			snap := resolveFiles(&Resolver{}, tt.files...)
			if len(snap.Pods) != tt.wantPods {
				t.Errorf("%d pods, want %d; problems %v", len(snap.Pods), tt.wantPods, snap.Problems)
			}
			got := problemLines(snap.Problems)
			if strings.Join(got, "\n") != strings.Join(tt.wantProbs, "\n") {
				t.Errorf("problems:\n%s\nwant:\n%s\nfull: %v", strings.Join(got, "\n"), strings.Join(tt.wantProbs, "\n"), snap.Problems)
			}
			if tt.wantMsg != "" && (len(snap.Problems) == 0 || !strings.Contains(snap.Problems[0].Error(), tt.wantMsg)) {
				t.Errorf("problems %v, want the first to say %q", snap.Problems, tt.wantMsg)
			}
			for _, p := range snap.Pods {
				if snap.Objects[p.UID] == nil {
					t.Errorf("pod %s has no objects", p.Name)
				}
			}
		})
	}
}

func TestResolveUIDFollowsEnvOnly(t *testing.T) {
	r := &Resolver{}
	uid := func(files ...[2]string) string {
		t.Helper()
		snap := resolveFiles(r, files...)
		if len(snap.Pods) != 1 {
			t.Fatalf("pods %v, problems %v", snap.Pods, snap.Problems)
		}
		return string(snap.Pods[0].UID)
	}
	base := uid([2]string{"a.yaml", podspectest.ConfigMap + "---\n" + podspectest.Secret}, [2]string{"b.yaml", podspectest.RefPod})
	if got := uid([2]string{"a.yaml", strings.Replace(podspectest.ConfigMap, "hello", "bye", 1) + "---\n" + podspectest.Secret}, [2]string{"b.yaml", podspectest.RefPod}); got != base {
		t.Errorf("an edit of a mounted ConfigMap changed the UID")
	}
	if got := uid([2]string{"a.yaml", podspectest.ConfigMap + "---\n" + strings.Replace(podspectest.Secret, "user: YXBw", "user: Ym9i", 1)}, [2]string{"b.yaml", podspectest.RefPod}); got != base {
		t.Errorf("an edit of a Secret's key the pod does not use changed the UID")
	}
	changed := uid([2]string{"a.yaml", podspectest.ConfigMap + "---\n" + strings.Replace(podspectest.Secret, "hunter2", "hunter3", 1)}, [2]string{"b.yaml", podspectest.RefPod})
	if changed == base {
		t.Errorf("an edit of a value used as env kept the UID")
	}
	// A fixed metadata.uid stays.
	fixed := strings.Replace(podspectest.RefPod, "  name: web\n", "  name: web\n  uid: fixed\n", 1)
	if got := uid([2]string{"a.yaml", podspectest.ConfigMap + "---\n" + podspectest.Secret}, [2]string{"b.yaml", fixed}); got != "fixed" {
		t.Errorf("uid %q, want the manifest's", got)
	}
}

func TestResolveKeepsLastGood(t *testing.T) {
	r := &Resolver{}
	good := resolveFiles(r, [2]string{"a.yaml", podspectest.ConfigMap + "---\n" + podspectest.Secret}, [2]string{"b.yaml", podspectest.RefPod})
	if len(good.Pods) != 1 {
		t.Fatalf("problems %v", good.Problems)
	}
	// The ConfigMap's file goes: the pod keeps running with what it had.
	snap := resolveFiles(r, [2]string{"b.yaml", podspectest.RefPod})
	if len(snap.Pods) != 1 || snap.Pods[0] != good.Pods[0] || snap.Objects[good.Pods[0].UID] != good.Objects[good.Pods[0].UID] {
		t.Fatalf("the pod was not kept with its objects: %v, problems %v", snap.Pods, snap.Problems)
	}
	if len(snap.Problems) != 2 || !strings.Contains(snap.Problems[0].Message, "keeps running") {
		t.Errorf("problems %v, want both missing objects saying the last good version keeps running", snap.Problems)
	}
	// Back again: resolved afresh, no problems.
	snap = resolveFiles(r, [2]string{"a.yaml", podspectest.ConfigMap + "---\n" + podspectest.Secret}, [2]string{"b.yaml", podspectest.RefPod})
	if len(snap.Pods) != 1 || len(snap.Problems) != 0 {
		t.Errorf("pods %v problems %v", snap.Pods, snap.Problems)
	}
	// A pod never resolved is not started.
	snap = resolveFiles(&Resolver{}, [2]string{"b.yaml", podspectest.RefPod})
	if len(snap.Pods) != 0 {
		t.Errorf("a pod whose objects never existed runs")
	}
}

func TestKeepLastGoodObjects(t *testing.T) {
	prev := podspec.Parse([]byte(podspectest.ConfigMap+"---\n"+podspectest.Manifest("a", "img:1")), webOrigin, podspectest.Node)
	res := KeepLastGood(prev, podspec.Parse([]byte("a: ["), webOrigin, podspectest.Node))
	if len(res.Objects) != 1 || len(res.Pods) != 1 {
		t.Errorf("a syntax error dropped objects or pods: %+v", res)
	}
	res = KeepLastGood(prev, podspec.Parse([]byte(podspectest.Manifest("a", "img:2")), webOrigin, podspectest.Node))
	if len(res.Objects) != 0 {
		t.Errorf("an object removed from a valid manifest is kept")
	}
}

// TestResolveBinaryDataIsNoEnv: a configMapKeyRef to a binaryData key is
// refused as the kubelet would fail it; a volume item may name one.
func TestResolveBinaryDataIsNoEnv(t *testing.T) {
	envPod := strings.Replace(podspectest.RefPod, "secretKeyRef: {name: db, key: password}", "configMapKeyRef: {name: files, key: blob}", 1)
	snap := resolveFiles(&Resolver{}, [2]string{"a.yaml", podspectest.ConfigMap}, [2]string{"b.yaml", envPod})
	if got := problemLines(snap.Problems); strings.Join(got, ",") != "12 spec.containers[0].env[0].valueFrom.configMapKeyRef.key MissingObject" {
		t.Errorf("problems %v", snap.Problems)
	}
	volPod := strings.Replace(podspectest.RefPod, "configMap: {name: files}", "configMap: {name: files, items: [{key: blob, path: b}]}", 1)
	snap = resolveFiles(&Resolver{}, [2]string{"a.yaml", podspectest.ConfigMap + "---\n" + podspectest.Secret}, [2]string{"b.yaml", volPod})
	if len(snap.Pods) != 1 {
		t.Errorf("a volume item naming a binaryData key refused: %v", snap.Problems)
	}
}
