package podstatus

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestStoreChanged: Changed is closed by a new pod, a status that differs,
// a deletion stamped and a pod removed, and not by the same status set
// again (workers set it on every resync).
func TestStoreChanged(t *testing.T) {
	s := NewStore()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "u1"}}
	running := v1.PodStatus{Phase: v1.PodRunning}
	steps := []struct {
		name   string
		do     func()
		change bool
	}{
		{"new pod", func() { s.Set(pod, running) }, true},
		{"same status", func() { s.Set(pod, *running.DeepCopy()) }, false},
		{"new message", func() { s.Set(pod, v1.PodStatus{Phase: v1.PodRunning, Message: "m"}) }, true},
		{"deleting", func() { s.MarkDeleting(pod.UID, metav1.Now().Time, nil) }, true},
		{"removed", func() { s.Delete(pod.UID) }, true},
		{"removed again", func() { s.Delete(pod.UID) }, false},
	}
	for _, st := range steps {
		c := s.Changed()
		st.do()
		if got := closed(c); got != st.change {
			t.Errorf("%s: Changed closed %v, want %v", st.name, got, st.change)
		}
	}
}
