package syncloop

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/podsnapshot"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podstatus"
	"github.com/berth-agent/berth/internal/store"
)

// TestStatusReportContent checks what the agent reports: the status
// store's pods and the merge store's problems, as summaries that never
// carry an environment value, a command or a problem's message.
func TestStatusReportContent(t *testing.T) {
	store := store.New(podspec.SourceFile)
	if err := store.Apply(context.Background(), podsnapshot.Snapshot{Source: podspec.SourceFile, Problems: []podspec.Problem{{
		Source: podspec.SourceFile, Origin: "/etc/kubernetes/manifests/db.yaml", Line: 7, Field: "spec.containers[0].env[0].value",
		Reason: podspec.ReasonInvalid, Message: `Invalid value: "s3cret"`, Name: "db-edge-1", Namespace: "default",
	}}}); err != nil {
		t.Fatal(err)
	}
	a := &Loop{cfg: Config{NodeName: "edge-1", Version: "v1.2"}, store: store, status: podstatus.NewStore(),
		health: newHealth(clocktesting.NewFakeClock(time.Now()), time.Minute)}
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-edge-1", Namespace: "default", UID: "u1"},
		Spec: v1.PodSpec{Containers: []v1.Container{
			{Name: "a", Command: []string{"run", "--password=s3cret"}, Env: []v1.EnvVar{{Name: "PW", Value: "s3cret"}}},
			{Name: "b"},
		}},
	}
	a.status.Set(pod, v1.PodStatus{Phase: v1.PodRunning, Message: "s3cret", ContainerStatuses: []v1.ContainerStatus{
		{Name: "a", Ready: true, RestartCount: 1, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}},
		{Name: "b", RestartCount: 3, State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "s3cret"}}},
	}})
	body, err := json.Marshal(a.statusReport())
	if err != nil {
		t.Fatal(err)
	}
	want := `{"node":"edge-1","berthVersion":"v1.2","time":"0001-01-01T00:00:00Z","ready":false,` +
		`"pods":[{"namespace":"default","name":"web-edge-1","uid":"u1","phase":"Running","ready":"1/2","restarts":4,"reason":"CrashLoopBackOff"}],` +
		`"problems":[{"source":"file","origin":"/etc/kubernetes/manifests/db.yaml","line":7,"field":"spec.containers[0].env[0].value","reason":"Invalid","pod":"default/db-edge-1"}]}`
	if string(body) != want {
		t.Errorf("report\n%s\nwant\n%s", body, want)
	}
}
