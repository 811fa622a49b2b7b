package podevents

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/kuberuntime"
)

// TestLog: a repeat of the newest event bumps its count, each pod keeps
// its last eventsPerPod events, Forget drops a pod's ring, and GC drops
// the rings whose newest event is over an hour old.
func TestLog(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	l := New(clk, slog.New(slog.NewTextHandler(io.Discard, nil)))
	l.Event("a", "web", "default", kuberuntime.EventWarning, "BackOff", "back-off")
	clk.Step(time.Second)
	l.Event("a", "web", "default", kuberuntime.EventWarning, "BackOff", "back-off")
	if evs := l.List("a"); len(evs) != 1 || evs[0].Count != 2 || !evs[0].LastSeen.Equal(evs[0].FirstSeen.Add(time.Second)) {
		t.Fatalf("repeat: %+v, want one event seen twice", evs)
	}
	for i := range eventsPerPod + 5 {
		l.Event("b", "db", "default", kuberuntime.EventNormal, "Started", fmt.Sprint(i))
	}
	evs := l.List("b")
	if len(evs) != eventsPerPod || evs[0].Message != "5" || evs[len(evs)-1].Message != fmt.Sprint(eventsPerPod+4) {
		t.Fatalf("ring of %d: first %q, last %q; want the newest %d", len(evs), evs[0].Message, evs[len(evs)-1].Message, eventsPerPod)
	}
	l.Forget("b")
	if evs := l.List("b"); len(evs) != 0 {
		t.Errorf("after Forget: %d events", len(evs))
	}
	clk.Step(2 * time.Hour)
	l.Event("c", "new", "default", kuberuntime.EventNormal, "Pulled", "pulled")
	l.GC()
	if len(l.List("a")) != 0 || len(l.List("c")) != 1 {
		t.Errorf("after GC: a %d events, c %d; want a dropped, c kept", len(l.List("a")), len(l.List("c")))
	}
}
