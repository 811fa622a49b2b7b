package syncloop

import (
	"context"
	"io"
	"log/slog"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/podsnapshot"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podstatus"
	"github.com/berth-agent/berth/internal/podtest"
	"github.com/berth-agent/berth/internal/source/httpsource"
	"github.com/berth-agent/berth/internal/store"
)

const goodWeb = `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: app
    image: busybox:1.36
`

// TestPodsManifestValidCondition checks that a running pod whose manifest
// is broken says so on the pod itself, and only that pod.
func TestPodsManifestValidCondition(t *testing.T) {
	file := func(path, yaml string) []podspec.Problem {
		return podspec.Parse([]byte(yaml), podspec.Origin{Source: podspec.SourceFile, Path: path}, podtest.Node).Problems
	}
	invalidEdit := file("/m/web.yaml", `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: app
    image: ""
`)
	syntaxError := file("/m/web.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: web\n")
	duplicate := []podspec.Problem{{Source: podspec.SourceFile, Origin: "/m/other.yaml", Line: 3, Field: "metadata.name",
		Reason: podsnapshot.ReasonDuplicateName, Message: "already defined", Name: "web-node1", Namespace: "default"}}
	unreachable := []podspec.Problem{{Source: podspec.SourceFile, Origin: "/m/web.yaml", Reason: httpsource.ReasonUnreachable, Message: "down"}}
	if len(invalidEdit) != 1 || invalidEdit[0].Name != "web-node1" || len(syntaxError) != 1 || syntaxError[0].Name != "" {
		t.Fatalf("fixtures: invalid edit %+v, syntax error %+v", invalidEdit, syntaxError)
	}
	tests := []struct {
		name     string
		problems []podspec.Problem
		status   v1.ConditionStatus
		reason   string
		message  string
	}{
		{"valid manifest", nil, v1.ConditionTrue, "", ""},
		{"invalid edit naming the pod", invalidEdit, v1.ConditionFalse, podspec.ReasonInvalid,
			"/m/web.yaml:7: spec.containers[0].image: Required value: every container needs an image (the last good version of this pod keeps running)"},
		{"syntax error of its file", syntaxError, v1.ConditionFalse, podspec.ReasonDecodeError, syntaxError[0].Error()},
		{"both, in file order", append(append([]podspec.Problem(nil), syntaxError...), invalidEdit...), v1.ConditionFalse, podspec.ReasonDecodeError,
			syntaxError[0].Error() + "; /m/web.yaml:7: spec.containers[0].image: Required value: every container needs an image (the last good version of this pod keeps running)"},
		{"another file defining the same name", duplicate, v1.ConditionTrue, "", ""},
		{"unreachable source", unreachable, v1.ConditionTrue, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(podsT0)
			store := store.NewWithClock(clk, podspec.SourceFile)
			web := podtest.Parse(t, "/m/web.yaml", goodWeb)
			other := podtest.Parse(t, "/m/other.yaml", `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "other"}, "spec": {"containers": [{"name": "app", "image": "busybox:1.36"}]}}`)
			// Problems as keepLastGood leaves them, with the suffix the
			// source adds for a pod it keeps.
			probs := append([]podspec.Problem(nil), tt.problems...)
			for i := range probs {
				if probs[i].Reason == podspec.ReasonInvalid {
					probs[i].Message += " (the last good version of this pod keeps running)"
				}
			}
			if err := store.Apply(context.Background(), podsnapshot.Snapshot{Source: podspec.SourceFile, Pods: []*v1.Pod{web, other}, Problems: probs}); err != nil {
				t.Fatal(err)
			}
			a := newAgent(Config{Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), NodeName: podtest.Node}, store, nil, nil)
			for _, p := range []*v1.Pod{web, other} {
				a.status.Set(p, v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{podstatus.ManifestCondition(nil, podsT0)}})
			}
			before := a.status.Get(web.UID).Status.Conditions

			got := a.Pod("default", "web-node1")
			if got == nil || got.Status.Phase != v1.PodRunning {
				t.Fatalf("web pod = %+v, want it running", got)
			}
			c := condition(got, podstatus.ConditionManifestValid)
			if c == nil || c.Status != tt.status || c.Reason != tt.reason || c.Message != tt.message {
				t.Errorf("condition = %+v, want status %s reason %q message %q", c, tt.status, tt.reason, tt.message)
			}
			if c := condition(a.Pod("default", "other-node1"), podstatus.ConditionManifestValid); c == nil || c.Status != v1.ConditionTrue {
				t.Errorf("the other file's pod: condition = %+v, want True", c)
			}
			if after := a.status.Get(web.UID).Status.Conditions; len(after) != len(before) || after[len(after)-1] != before[len(before)-1] {
				t.Errorf("Pods wrote into the status store's pod: %+v, was %+v", after, before)
			}

			// Fixing the file (here: the problems go) clears it at once.
			if err := store.Apply(context.Background(), podsnapshot.Snapshot{Source: podspec.SourceFile, Pods: []*v1.Pod{web, other}}); err != nil {
				t.Fatal(err)
			}
			if c := condition(a.Pod("default", "web-node1"), podstatus.ConditionManifestValid); c == nil || c.Status != v1.ConditionTrue || c.Message != "" {
				t.Errorf("after the fix: condition = %+v, want True", c)
			}
		})
	}
}

// TestPodsRefusedManifestConditionFalse checks that a manifest refused
// before it ever ran carries the condition False as well.
func TestPodsRefusedManifestConditionFalse(t *testing.T) {
	a := podsAgent(t)
	c := condition(a.Pod("default", "bad-node1"), podstatus.ConditionManifestValid)
	if c == nil || c.Status != v1.ConditionFalse || c.Reason != podspec.ReasonInvalid ||
		c.Message != "/etc/kubernetes/manifests/bad.yaml:7: spec.containers[0].image: Required value" {
		t.Errorf("refused pod: condition = %+v", c)
	}
}

func condition(p *v1.Pod, typ v1.PodConditionType) *v1.PodCondition {
	if p == nil {
		return nil
	}
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// TestPodIsPodsFirstOfItsName: Pod, which reads only the pods of one name,
// returns what Pods lists first under that name: a running pod, the older
// of two UIDs sharing a name, a refused manifest, each with its
// condition; nil for a name nobody has.
func TestPodIsPodsFirstOfItsName(t *testing.T) {
	a := podsAgent(t)
	for _, p := range []struct{ uid, name, ns string }{{"uid-b", "web-node1", "default"}, {"uid-a", "web-node1", "default"}, {"uid-c", "web-node1", "other"}, {"uid-d", "db-node1", "default"}} {
		pod := podtest.Stub(types.UID(p.uid), p.name, "1")
		pod.Namespace = p.ns
		a.status.Set(pod, v1.PodStatus{Phase: v1.PodRunning})
	}
	all := a.Pods()
	for _, q := range []struct{ ns, name string }{{"default", "web-node1"}, {"other", "web-node1"}, {"default", "db-node1"}, {"default", "bad-node1"}, {"default", "nobody"}} {
		var want *v1.Pod
		for _, p := range all {
			if p.Namespace == q.ns && p.Name == q.name {
				want = p
				break
			}
		}
		if got := a.Pod(q.ns, q.name); !equality.Semantic.DeepEqual(got, want) {
			t.Errorf("Pod(%s, %s) = %+v, want %+v", q.ns, q.name, got, want)
		}
	}
	if got := a.Pod("default", "web-node1"); got == nil || got.UID != "uid-a" {
		t.Errorf("Pod(default, web-node1) = %v, want the pod of uid-a, first by UID", got)
	}
}
