package backoff

import (
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestBackoffNextDoublesAndCaps(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	b := New(clk, 10*time.Second, 5*time.Minute)
	want := []time.Duration{10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 5 * time.Minute, 5 * time.Minute}
	for i, w := range want {
		if got := b.Next("k"); got != w {
			t.Fatalf("failure %d: delay = %v, want %v", i+1, got, w)
		}
	}
	if got := b.Next("other"); got != 10*time.Second {
		t.Errorf("keys are independent: other = %v, want 10s", got)
	}
}

func TestBackoffRemaining(t *testing.T) {
	start := time.Unix(1000, 0)
	tests := []struct {
		name     string
		failures int
		since    time.Duration // failure time relative to start
		elapsed  time.Duration // clock advance after the failures
		want     time.Duration
	}{
		{"no failure never waits", 0, 0, 0, 0},
		{"just failed waits initial", 1, 0, 0, 10 * time.Second},
		{"part of the delay elapsed", 1, 0, 4 * time.Second, 6 * time.Second},
		{"delay elapsed", 1, 0, 10 * time.Second, 0},
		{"second failure waits double", 2, 0, 5 * time.Second, 15 * time.Second},
		{"quiet for twice max resets", 3, 0, 10*time.Minute + time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(start)
			b := New(clk, 10*time.Second, 5*time.Minute)
			for range tt.failures {
				b.Next("k")
			}
			clk.SetTime(start.Add(tt.elapsed))
			if got := b.Remaining("k", start.Add(tt.since)); got != tt.want {
				t.Errorf("Remaining = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestBackoffResetAndGC(t *testing.T) {
	start := time.Unix(1000, 0)
	clk := clocktesting.NewFakePassiveClock(start)
	b := New(clk, time.Second, 4*time.Second)
	b.Next("a")
	b.Next("a")
	b.Reset("a")
	if got := b.Next("a"); got != time.Second {
		t.Errorf("after Reset delay = %v, want 1s", got)
	}
	b.Next("b")
	clk.SetTime(start.Add(9 * time.Second))
	b.GC()
	if b.Len() != 0 {
		t.Errorf("GC kept %d expired entries", b.Len())
	}
	if got := b.Delay("a"); got != 0 {
		t.Errorf("Delay of collected key = %v, want 0", got)
	}
}

func TestBackoffRemainingSinceLast(t *testing.T) {
	start := time.Unix(1000, 0)
	clk := clocktesting.NewFakePassiveClock(start)
	b := New(clk, 10*time.Second, 5*time.Minute)
	if got := b.RemainingSinceLast("k"); got != 0 {
		t.Fatalf("no failure: %v, want 0", got)
	}
	b.Next("k")
	clk.SetTime(start.Add(4 * time.Second))
	if got := b.RemainingSinceLast("k"); got != 6*time.Second {
		t.Errorf("4s after the first failure: %v, want 6s", got)
	}
	b.Next("k") // second failure at +4s: 20s from now
	clk.SetTime(start.Add(19 * time.Second))
	if got := b.RemainingSinceLast("k"); got != 5*time.Second {
		t.Errorf("15s after the second failure: %v, want 5s", got)
	}
	clk.SetTime(start.Add(24 * time.Second))
	if got := b.RemainingSinceLast("k"); got != 0 {
		t.Errorf("delay passed: %v, want 0", got)
	}
}
