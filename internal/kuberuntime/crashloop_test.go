package kuberuntime

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/backoff"
)

func TestBackoffNextWithin(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	b := backoff.New(clk, 10*time.Second, 5*time.Minute)
	tests := []struct {
		key     string
		ceiling time.Duration
		want    []time.Duration
	}{
		{"under", 30 * time.Second, []time.Duration{10 * time.Second, 20 * time.Second, 30 * time.Second, 30 * time.Second}},
		{"below the first delay", 3 * time.Second, []time.Duration{3 * time.Second, 3 * time.Second}},
		{"above the max", time.Hour, []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 5 * time.Minute}},
	}
	for _, tt := range tests {
		for i, w := range tt.want {
			if got := b.NextWithin(tt.key, tt.ceiling); got != w {
				t.Fatalf("%s: failure %d: delay = %v, want %v", tt.key, i+1, got, w)
			}
		}
	}
}

// TestPodCrashLoopCeiling: the annotation lowers a pod's ceiling, never
// raises it above the node's, and a value manifest validation refuses
// falls back to the node's.
func TestPodCrashLoopCeiling(t *testing.T) {
	tests := []struct {
		value string
		want  time.Duration
	}{
		{"", 5 * time.Minute},
		{"30s", 30 * time.Second},
		{"1h", 5 * time.Minute},
		{"-1s", 5 * time.Minute},
		{"soon", 5 * time.Minute},
	}
	f := newSyncFixture(t)
	for _, tt := range tests {
		pod := syncPod("app")
		if tt.value != "" {
			pod.Annotations = map[string]string{AnnotationCrashLoopBackoffMax: tt.value}
		}
		if got := f.m.podCrashLoopCeiling(pod); got != tt.want {
			t.Errorf("%q: ceiling %v, want %v", tt.value, got, tt.want)
		}
	}
}

// TestSyncPodCrashLoopCeiling: a pod whose annotation says 15s waits 10s,
// then 15s, not 20s.
func TestSyncPodCrashLoopCeiling(t *testing.T) {
	f := newSyncFixture(t)
	pod := syncPod("app")
	pod.Annotations = map[string]string{AnnotationCrashLoopBackoffMax: "15s"}
	sb := f.runningSandbox(pod)
	ctx := context.Background()
	if err := syncPlanned(ctx, f.m, pod, exitedStatus(pod, sb, 0, f.clock.Now())).Error(); err != nil {
		t.Fatal(err)
	}
	for i, want := range []time.Duration{10 * time.Second, 15 * time.Second, 15 * time.Second} {
		f.clock.Step(time.Second)
		exit := exitedStatus(pod, sb, i+1, f.clock.Now())
		if got := syncPlanned(ctx, f.m, pod, exit).RetryAfter(); got != want {
			t.Errorf("exit %d: retry after %v, want %v", i+2, got, want)
		}
		f.clock.Step(want)
		if err := syncPlanned(ctx, f.m, pod, exit).Error(); err != nil {
			t.Fatalf("exit %d, after its back-off: %v", i+2, err)
		}
	}
}
