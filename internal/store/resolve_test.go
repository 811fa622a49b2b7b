package store

import (
	"context"
	"strings"
	"testing"

	"github.com/berth-agent/berth/internal/podsnapshot"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podspec/podspectest"
)

func TestStoreUpdatesOnObjectEdit(t *testing.T) {
	s := New(podspec.SourceFile)
	r := podsnapshot.NewResolver(nil)
	apply := func(files ...[2]string) []string {
		t.Helper()
		if err := s.Apply(context.Background(), resolveFiles(r, files...)); err != nil {
			t.Fatal(err)
		}
		return drain(s)
	}
	pod := [2]string{"b.yaml", podspectest.RefPod}
	if got := apply([2]string{"a.yaml", podspectest.ConfigMap + "---\n" + podspectest.Secret}, pod); len(got) != 1 || !strings.HasPrefix(got[0], "ADD") {
		t.Fatalf("updates %v", got)
	}
	if got := apply([2]string{"a.yaml", podspectest.ConfigMap + "---\n" + podspectest.Secret}, pod); len(got) != 0 {
		t.Errorf("a re-read changed nothing but gave %v", got)
	}
	got := apply([2]string{"a.yaml", strings.Replace(podspectest.ConfigMap, "hello", "bye", 1) + "---\n" + podspectest.Secret}, pod)
	if len(got) != 1 || !strings.HasPrefix(got[0], "UPDATE") {
		t.Errorf("an edit of a mounted ConfigMap gave %v, want one UPDATE", got)
	}
	uid := s.Pods()[0].UID
	if o := s.PodObjects(uid); o == nil || o.ConfigMaps["files"].Data["greeting"] != "bye" {
		t.Errorf("objects of the pod %+v, want the edited ConfigMap", o)
	}
	got = apply([2]string{"a.yaml", podspectest.ConfigMap + "---\n" + strings.Replace(podspectest.Secret, "hunter2", "x", 1)}, pod)
	if len(got) != 2 || !strings.HasPrefix(got[0], "REMOVE") || !strings.HasPrefix(got[1], "ADD") {
		t.Errorf("an edit of a value used as env gave %v, want REMOVE and ADD", got)
	}
	if s.PodObjects(uid) != nil {
		t.Errorf("the removed pod's objects are still served")
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
