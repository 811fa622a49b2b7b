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
	if pods := a.mirrorPods(); len(pods) != 0 {
		t.Errorf("pods to mirror before any status: %d, want 0", len(pods))
	}
	a.status.Set(web, v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.9"})
	pods := a.mirrorPods()
	if len(pods) != 1 || pods[0].UID != "u1" || pods[0].Status.PodIP != "10.0.0.9" || len(pods[0].Spec.Containers) != 1 {
		t.Errorf("pods to mirror = %+v, want web with its status", pods)
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
