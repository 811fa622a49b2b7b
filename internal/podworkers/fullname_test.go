package podworkers

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// gateStep is one call on the gate and what it must answer.
type gateStep struct {
	op   string // "try", "hold", "release"
	uid  types.UID
	want bool      // for try and hold
	wake types.UID // for release: the UID to wake
}

func TestFullNameGate(t *testing.T) {
	tests := []struct {
		name  string
		steps []gateStep
	}{
		{"first start wins", []gateStep{{op: "try", uid: "a", want: true}, {op: "try", uid: "a", want: true}}},
		{"second waits until first released", []gateStep{
			{op: "try", uid: "a", want: true},
			{op: "try", uid: "b", want: false},
			{op: "try", uid: "b", want: false},
			{op: "release", uid: "a", wake: "b"},
			{op: "try", uid: "b", want: true},
		}},
		{"FIFO among waiters", []gateStep{
			{op: "try", uid: "a", want: true},
			{op: "try", uid: "b", want: false},
			{op: "try", uid: "c", want: false},
			{op: "release", uid: "a", wake: "b"},
			{op: "try", uid: "c", want: false},
			{op: "try", uid: "b", want: true},
			{op: "release", uid: "b", wake: "c"},
			{op: "try", uid: "c", want: true},
		}},
		{"withdrawn waiter never starts and the next one moves up", []gateStep{
			{op: "try", uid: "a", want: true},
			{op: "try", uid: "b", want: false},
			{op: "try", uid: "c", want: false},
			{op: "release", uid: "b", wake: ""},
			{op: "release", uid: "a", wake: "c"},
			{op: "try", uid: "c", want: true},
		}},
		{"release of a non-holder keeps the holder", []gateStep{
			{op: "try", uid: "a", want: true},
			{op: "release", uid: "x", wake: ""},
			{op: "try", uid: "b", want: false},
		}},
		{"held at start-up blocks a new UID", []gateStep{
			{op: "hold", uid: "old", want: true},
			{op: "hold", uid: "other", want: false},
			{op: "try", uid: "new", want: false},
			{op: "release", uid: "old", wake: "new"},
			{op: "try", uid: "new", want: true},
		}},
		{"a newcomer cannot jump the queue after release", []gateStep{
			{op: "try", uid: "a", want: true},
			{op: "try", uid: "b", want: false},
			{op: "release", uid: "a", wake: "b"},
			{op: "try", uid: "z", want: false},
			{op: "try", uid: "b", want: true},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := newFullNameGate()
			for i, s := range tt.steps {
				switch s.op {
				case "try":
					if got := g.tryStart("web_default", s.uid); got != s.want {
						t.Fatalf("step %d: tryStart(%s) = %v, want %v", i, s.uid, got, s.want)
					}
				case "hold":
					if got := g.hold("web_default", s.uid); got != s.want {
						t.Fatalf("step %d: hold(%s) = %v, want %v", i, s.uid, got, s.want)
					}
				case "release":
					if got := g.release("web_default", s.uid); got != s.wake {
						t.Fatalf("step %d: release(%s) woke %q, want %q", i, s.uid, got, s.wake)
					}
				}
			}
		})
	}
}

func TestFullNameGateNamesAreIndependentAndLeaveNoState(t *testing.T) {
	g := newFullNameGate()
	if !g.tryStart("a_default", "1") || !g.tryStart("b_default", "2") {
		t.Fatal("different full names must not block each other")
	}
	g.tryStart("a_default", "3")
	g.release("a_default", "3")
	g.release("a_default", "1")
	g.release("b_default", "2")
	if len(g.started) != 0 || len(g.waiting) != 0 {
		t.Errorf("gate kept state after every pod released: started=%v waiting=%v", g.started, g.waiting)
	}
}
