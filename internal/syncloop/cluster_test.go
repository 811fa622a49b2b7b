package syncloop

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/mirror"
	"github.com/berth-agent/berth/internal/podevents"
	"github.com/berth-agent/berth/internal/podsnapshot"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podstatus"
	"github.com/berth-agent/berth/internal/rollback"
	"github.com/berth-agent/berth/internal/store"
)

// TestClusterViews checks what the sync loop hands the node controller and
// the mirrorer: the Node is Ready only when berth is healthy and ready;
// the pods to mirror are the served pods with the status the workers
// wrote (none before it); a pod NodeRestriction refuses shows why in
// /pods.
func TestClusterViews(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	st := store.New(podspec.SourceFile)
	secretPod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "vault-edge-1", Namespace: "default", UID: "u2"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", EnvFrom: []v1.EnvFromSource{
			{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "creds"}}},
		}}}},
	}
	web := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-edge-1", Namespace: "default", UID: "u1"}, Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c"}}}}
	if err := st.Apply(context.Background(), podsnapshot.Snapshot{Source: podspec.SourceFile, Pods: []*v1.Pod{web, secretPod}}); err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	events := podevents.New(clk, log)
	a := &Loop{
		cfg:      Config{NodeName: "edge-1", Clock: clk},
		store:    st,
		status:   podstatus.NewStore(),
		events:   events,
		health:   newHealth(clk, time.Minute),
		rollback: rollback.New(rollback.Config{}, "edge-1", clk, log, events, prometheus.NewRegistry()),
	}
	a.mirror = mirror.New(mirror.Config{NodeName: "edge-1", Clock: clk, Logger: log}, a.mirrorPods)

	if s := a.nodeSnapshot(); s.Ready || !strings.Contains(s.NotReadyMessage, "sync loop has not started") {
		t.Errorf("node snapshot before the loop turned = %+v, want NotReady saying why", s)
	}
	snap := a.mirrorPods()
	if len(snap.Pods) != 2 || snap.Pods[0].Status.Phase != "" || snap.Pods[1].Status.Phase != "" {
		t.Errorf("pods to mirror before any status: %+v, want both without status", snap.Pods)
	}
	if !snap.Complete {
		t.Error("the file source delivered, yet the snapshot is not complete")
	}
	a.status.Set(web, v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.9"})
	for _, p := range a.mirrorPods().Pods {
		if p.UID == "u1" && (p.Status.PodIP != "10.0.0.9" || len(p.Spec.Containers) != 1) {
			t.Errorf("web to mirror = %+v, want it with its status", p)
		}
	}
	a.status.Set(secretPod, v1.PodStatus{Phase: v1.PodRunning})
	p := a.Pod("default", "vault-edge-1")
	c := podCondition(p, mirror.ConditionMirrored)
	if c == nil || c.Status != v1.ConditionFalse || c.Reason != mirror.ReasonNodeRestriction {
		t.Errorf("vault's conditions = %+v, want Mirrored False (NodeRestriction)", p.Status.Conditions)
	}
	if c := podCondition(a.Pod("default", "web-edge-1"), mirror.ConditionMirrored); c != nil {
		t.Errorf("web has a Mirrored condition: %+v", c)
	}
	a.mirrorEvent(secretPod, mirror.ReasonNodeRestriction, "no mirror")
	if ev := events.List("u2"); len(ev) != 1 || ev[0].Reason != mirror.ReasonNodeRestriction {
		t.Errorf("vault's events = %+v", ev)
	}
}

func podCondition(p *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}
