package syncloop

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/podsnapshot"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/store"
)

var podsT0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// podsAgent is an agent, never run, over a merge store holding one
// refused manifest (bad-node1), whose status store the test fills.
func podsAgent(t testing.TB) *Loop {
	t.Helper()
	clk := clocktesting.NewFakeClock(podsT0)
	store := store.NewWithClock(clk, podspec.SourceFile)
	if err := store.Apply(context.Background(), podsnapshot.Snapshot{Source: podspec.SourceFile, Problems: []podspec.Problem{{
		Source: podspec.SourceFile, Origin: "/etc/kubernetes/manifests/bad.yaml", Line: 7, Field: "spec.containers[0].image",
		Reason: podspec.ReasonInvalid, Message: "Required value", Name: "bad-node1", Namespace: "default",
	}}}); err != nil {
		t.Fatal(err)
	}
	return newAgent(Config{Clock: clk, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, store, nil, nil)
}

func runningPod(name string, uid types.UID) (*v1.Pod, v1.PodStatus) {
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: uid},
		Spec:       v1.PodSpec{NodeName: "node1", Containers: []v1.Container{{Name: "web", Image: "busybox:1.36"}}},
	}
	return pod, v1.PodStatus{Phase: v1.PodRunning}
}

// TestPodsShowsRefusedManifests: Pods lists the pods berth runs and, as
// Failed pods that say why, the manifests it refused, typed for readers.
func TestPodsShowsRefusedManifests(t *testing.T) {
	a := podsAgent(t)
	a.status.Set(runningPod("web-node1", "uid-web"))
	pods := a.Pods()
	if len(pods) != 2 || pods[0].Name != "bad-node1" || pods[1].Name != "web-node1" {
		t.Fatalf("pods = %+v, want bad-node1 and web-node1", pods)
	}
	bad := pods[0]
	if bad.Status.Phase != v1.PodFailed || bad.Status.Reason != "Invalid" || !strings.Contains(bad.Status.Message, "bad.yaml:7: spec.containers[0].image: Required value") {
		t.Errorf("refused pod status = %+v", bad.Status)
	}
	if pods[1].Kind != "Pod" || pods[1].APIVersion != "v1" {
		t.Errorf("web pod type = %s/%s, want v1/Pod", pods[1].APIVersion, pods[1].Kind)
	}
	if p := a.Pod("default", "bad-node1"); p == nil || p.Status.Phase != v1.PodFailed {
		t.Errorf("Pod(bad-node1) = %+v, want the refused manifest", p)
	}
	if p := a.Pod("default", "nope"); p != nil {
		t.Errorf("Pod(nope) = %+v, want nil", p)
	}
}

// BenchmarkAgentPodOfMany: one pod looked up by name among 10,000, as
// `berth logs -f` does every 100 ms while it follows a container.
func BenchmarkAgentPodOfMany(b *testing.B) {
	const pods = 10000
	a := podsAgent(b)
	for i := range pods {
		a.status.Set(runningPod(fmt.Sprintf("web%05d-node1", i), types.UID(fmt.Sprintf("uid-%05d", i))))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if a.Pod("default", "web05000-node1") == nil {
			b.Fatal("pod not found")
		}
	}
}

// TestChangedForwardsBothStores: Changed fires on a change of a pod's
// status and on a merge of the store (a manifest refused or fixed, which
// only the problems show).
func TestChangedForwardsBothStores(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := podsAgent(t)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { a.forwardChanges(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		steps := []struct {
			name string
			do   func()
		}{
			{"status set", func() { a.status.Set(runningPod("web-node1", "uid-web")) }},
			{"snapshot merged", func() {
				if err := a.store.Apply(ctx, podsnapshot.Snapshot{Source: podspec.SourceFile}); err != nil {
					t.Fatal(err)
				}
			}},
			{"pod deleted", func() { a.status.Delete("uid-web") }},
		}
		for _, st := range steps {
			// The forwarder waits on both stores before the change.
			synctest.Wait()
			c := a.Changed()
			st.do()
			synctest.Wait()
			select {
			case <-c:
			default:
				t.Errorf("%s: Changed not fired", st.name)
			}
		}
	})
}
