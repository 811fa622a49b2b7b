package syncloop

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/podsnapshot"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podtest"
	v1 "k8s.io/api/core/v1"
)

// TestAgentPodWarnings: a snapshot's warnings become Warning events of
// the pod they name, once per pod version however often the source
// resends them, also for a pod that did not change, and the pods run
// all the same.
func TestAgentPodWarnings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOpts{})
		a := podtest.Simple(t, "a", podtest.Loop)
		b := podtest.Simple(t, "b", podtest.Loop)
		clash := podspec.Problem{Source: podspec.SourceFile, Origin: b.Annotations[podspec.AnnotationOrigin], Line: 11,
			Field: "spec.containers[0].ports[0].hostPort", Reason: podspec.ReasonHostPortConflict, Name: b.Name, Namespace: b.Namespace,
			Message: "hostPort TCP/0.0.0.0/8080 clashes with TCP/0.0.0.0/8080 of pod \"a\" at a.yaml:11: both pods run, but only one can hold the port"}
		elsewhere := clash
		elsewhere.Origin = "other.yaml" // a pod of that name in another manifest: not this one
		snap := podsnapshot.Snapshot{Source: podspec.SourceFile, Pods: []*v1.Pod{a, b}, Warnings: []podspec.Problem{clash, elsewhere}}
		for range 2 {
			if err := h.store.Apply(context.Background(), snap); err != nil {
				t.Fatal(err)
			}
			h.eventually("both running", func() bool {
				na, _ := h.rt.running(a.UID)
				nb, _ := h.rt.running(b.UID)
				return na == 1 && nb == 1
			})
		}
		var got []string
		for _, e := range h.agent.Events(b.UID) {
			if e.Type == kuberuntime.EventWarning {
				got = append(got, e.Reason+" "+e.Message)
				if e.Count != 1 {
					t.Errorf("warning recorded %d times, want once: %+v", e.Count, e)
				}
			}
		}
		if want := podspec.ReasonHostPortConflict + " " + clash.Error(); len(got) != 1 || got[0] != want {
			t.Errorf("warning events of b = %q, want [%q]", got, want)
		}
		for _, e := range h.agent.Events(a.UID) {
			if e.Type == kuberuntime.EventWarning {
				t.Errorf("a got a warning event: %+v", e)
			}
		}

		// A pod sorted before a claims its port: a, unchanged, gets the
		// clash when c is added.
		c := podtest.Simple(t, "c", podtest.Loop)
		onA := clash
		onA.Origin, onA.Name, onA.Namespace = a.Annotations[podspec.AnnotationOrigin], a.Name, a.Namespace
		snap.Pods, snap.Warnings = []*v1.Pod{a, b, c}, []podspec.Problem{clash, onA}
		if err := h.store.Apply(context.Background(), snap); err != nil {
			t.Fatal(err)
		}
		h.eventually("c running", func() bool { n, _ := h.rt.running(c.UID); return n == 1 })
		var onAGot []string
		for _, e := range h.agent.Events(a.UID) {
			if e.Type == kuberuntime.EventWarning {
				onAGot = append(onAGot, e.Message)
			}
		}
		if len(onAGot) != 1 || onAGot[0] != onA.Error() {
			t.Errorf("warning events of the unchanged pod a = %q, want [%q]", onAGot, onA.Error())
		}
	})
}
