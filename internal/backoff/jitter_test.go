package backoff

import (
	"testing"
	"time"
)

func TestJittered(t *testing.T) {
	for _, tt := range []struct {
		failures int
		u        float64
		want     time.Duration
	}{
		{1, 0, time.Second}, // base 2s, half of it
		{1, 0.5, 1500 * time.Millisecond},
		{3, 0, 4 * time.Second},              // base 8s
		{10, 0, 30 * time.Second},            // capped at max 60s
		{62, 0.99, 59700 * time.Millisecond}, // no overflow
	} {
		if got := Jittered(time.Second, time.Minute, tt.failures, tt.u); got != tt.want {
			t.Errorf("Jittered(1s, 1m, %d, %v) = %v, want %v", tt.failures, tt.u, got, tt.want)
		}
	}
}
