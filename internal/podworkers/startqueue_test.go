package podworkers

import (
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/podplan"
)

// TestStartQueueOrder drives the queue through a scripted sequence: pods
// are added (as the sync loop creates lanes), their lanes ask in whatever
// order the goroutines run, and slots are given back. Each step checks who
// got a slot and who is to be woken.
func TestStartQueueOrder(t *testing.T) {
	type op struct {
		do       string // add, acquire, release, withdraw, advance, soloLeft
		uid      string
		priority int32
		slots    int           // acquire's slots; 0 stands for 1
		want     bool          // acquire's answer
		wake     []string      // wakeable() after the op, when not nil
		by       time.Duration // advance's step of the clock
		solo     time.Duration // soloLeft's answer
	}
	for _, tt := range []struct {
		name  string
		limit int
		ops   []op
	}{
		{
			name: "under the limit every pod starts at once", limit: 2,
			ops: []op{
				{do: "acquire", uid: "a", want: true},
				{do: "acquire", uid: "b", want: true},
				{do: "acquire", uid: "c", want: false},
				{do: "release", uid: "a", wake: []string{"c"}},
				{do: "acquire", uid: "c", want: true},
			},
		},
		{
			name: "a critical pod of the same batch keeps its rank while its lane is on the way", limit: 2,
			ops: []op{
				{do: "add", uid: "a"}, {do: "add", uid: "b"}, {do: "add", uid: "c"},
				{do: "add", uid: "crit", priority: 2000001000},
				// The others' lanes ask first: crit goes first, alone.
				{do: "acquire", uid: "c", want: false},
				{do: "acquire", uid: "b", want: false},
				{do: "acquire", uid: "a", want: false},
				{do: "acquire", uid: "crit", priority: 2000001000, want: true, wake: []string{}},
				{do: "release", uid: "crit", wake: []string{"a", "b"}},
				{do: "acquire", uid: "c", want: false},
				{do: "acquire", uid: "b", want: true},
				{do: "acquire", uid: "a", want: true},
				{do: "release", uid: "a", wake: []string{"c"}},
			},
		},
		{
			name: "priority first, then the order seen", limit: 1,
			ops: []op{
				{do: "acquire", uid: "running", want: true},
				{do: "add", uid: "low1", priority: -1},
				{do: "add", uid: "a"}, {do: "add", uid: "b"},
				{do: "add", uid: "cluster", priority: 2000000000},
				{do: "add", uid: "node", priority: 2000001000},
				{do: "acquire", uid: "low1", priority: -1, want: false},
				{do: "acquire", uid: "b", want: false},
				{do: "acquire", uid: "a", want: false},
				{do: "acquire", uid: "cluster", priority: 2000000000, want: false},
				// Critical pods do not wait for the others' starts,
				// only for each other's.
				{do: "acquire", uid: "node", priority: 2000001000, want: true, wake: []string{}},
				{do: "release", uid: "node", wake: []string{"cluster"}},
				{do: "acquire", uid: "cluster", priority: 2000000000, want: true},
				{do: "release", uid: "cluster", wake: []string{}},
				{do: "release", uid: "running", wake: []string{"a"}},
				{do: "acquire", uid: "a", want: true},
				{do: "release", uid: "a", wake: []string{"b"}},
				{do: "acquire", uid: "b", want: true},
				{do: "release", uid: "b", wake: []string{"low1"}},
			},
		},
		{
			name: "a critical start has the runtime to itself for a while", limit: 3,
			ops: []op{
				{do: "acquire", uid: "crit", priority: 2000000000, want: true},
				{do: "acquire", uid: "a", want: false},
				{do: "soloLeft", solo: criticalSoloDefault},
				{do: "advance", by: criticalSoloDefault - time.Millisecond, wake: []string{}},
				{do: "advance", by: time.Millisecond, wake: []string{"a"}},
				{do: "soloLeft", solo: 0},
				{do: "acquire", uid: "a", want: true},
				// The critical start, now slow, shares the runtime.
				{do: "acquire", uid: "b", want: true},
				{do: "acquire", uid: "c", want: false},
			},
		},
		{
			name: "a critical start measured quick keeps the runtime a shorter while", limit: 3,
			ops: []op{
				{do: "acquire", uid: "lone", want: true},
				{do: "advance", by: 100 * time.Millisecond},
				{do: "release", uid: "lone"},
				{do: "acquire", uid: "crit", priority: 2000000000, want: true},
				{do: "acquire", uid: "a", want: false},
				{do: "soloLeft", solo: soloFactor * 100 * time.Millisecond},
				{do: "advance", by: soloFactor * 100 * time.Millisecond, wake: []string{"a"}},
			},
		},
		{
			name: "a withdrawn pod gives its turn to the next", limit: 1,
			ops: []op{
				{do: "acquire", uid: "a", want: true},
				{do: "acquire", uid: "b", want: false},
				{do: "acquire", uid: "c", want: false},
				{do: "withdraw", uid: "b", wake: []string{}},
				{do: "release", uid: "a", wake: []string{"c"}},
			},
		},
		{
			name: "a candidate that needs no start frees its rank", limit: 1,
			ops: []op{
				{do: "add", uid: "adopted", priority: 10},
				{do: "acquire", uid: "new", want: false},
				{do: "withdraw", uid: "adopted", wake: []string{"new"}},
				{do: "acquire", uid: "new", want: true},
			},
		},
		{
			name: "a start that first stops an old sandbox takes two slots", limit: 4,
			ops: []op{
				{do: "acquire", uid: "dead1", slots: 2, want: true},
				{do: "acquire", uid: "dead2", slots: 2, want: true},
				{do: "acquire", uid: "dead3", slots: 2, want: false},
				{do: "acquire", uid: "new", want: false}, // ranks after dead3
				{do: "release", uid: "dead1", wake: []string{"dead3"}},
				{do: "acquire", uid: "dead3", slots: 2, want: true},
				// One slot free, the next pod needs one.
				{do: "release", uid: "dead2", wake: []string{"new"}},
			},
		},
		{
			name: "a pod ranked after a two-slot start counts its two", limit: 4,
			ops: []op{
				{do: "acquire", uid: "a", want: true},
				{do: "add", uid: "dead"}, {do: "add", uid: "b"},
				{do: "acquire", uid: "b", want: true}, // dead's lane not asked yet: one slot
				{do: "acquire", uid: "dead", slots: 2, want: true},
				{do: "acquire", uid: "c", want: false},
				{do: "release", uid: "a", wake: []string{"c"}},
			},
		},
		{
			name: "a two-slot start goes alone under a limit of one", limit: 1,
			ops: []op{
				{do: "acquire", uid: "a", want: true},
				{do: "acquire", uid: "dead", slots: 2, want: false},
				{do: "release", uid: "a", wake: []string{"dead"}},
				{do: "acquire", uid: "dead", slots: 2, want: true},
				{do: "acquire", uid: "b", want: false},
			},
		},
		{
			name: "a critical two-slot start counts among the critical ones only", limit: 2,
			ops: []op{
				{do: "acquire", uid: "a", want: true},
				{do: "acquire", uid: "b", want: true},
				{do: "acquire", uid: "crit1", priority: 2000000000, slots: 2, want: true},
				{do: "acquire", uid: "crit2", priority: 2000000000, slots: 2, want: false},
				{do: "release", uid: "crit1", wake: []string{"crit2"}},
			},
		},
		{
			name: "asking again while holding a slot keeps it", limit: 1,
			ops: []op{
				{do: "acquire", uid: "a", want: true},
				{do: "acquire", uid: "a", want: true},
				{do: "acquire", uid: "b", want: false},
			},
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
			q := newStartQueue(clk, newStartLimit(tt.limit))
			seqs := map[string]uint64{}
			seq := func(uid string) uint64 {
				if _, ok := seqs[uid]; !ok {
					seqs[uid] = uint64(len(seqs) + 1)
				}
				return seqs[uid]
			}
			for i, o := range tt.ops {
				uid := types.UID(o.uid)
				switch o.do {
				case "add":
					q.add(uid, o.priority, seq(o.uid))
				case "acquire":
					if got := q.acquire(uid, o.priority, seq(o.uid), max(o.slots, 1)); got != o.want {
						t.Fatalf("op %d: acquire(%s) = %v, want %v", i, o.uid, got, o.want)
					}
				case "release", "withdraw":
					q.release(uid, true)
				case "advance":
					clk.SetTime(clk.Now().Add(o.by))
				case "soloLeft":
					if got := q.soloLeft(); got != o.solo {
						t.Fatalf("op %d: soloLeft = %s, want %s", i, got, o.solo)
					}
				}
				if o.wake != nil {
					var got []string
					for _, u := range q.wakeable() {
						got = append(got, string(u))
					}
					if !slices.Equal(got, o.wake) && len(got)+len(o.wake) > 0 {
						t.Fatalf("op %d (%s %s): wakeable = %v, want %v", i, o.do, o.uid, got, o.wake)
					}
				}
			}
		})
	}
}

// TestStartQueueWaitReason checks the message a waiting pod shows.
func TestStartQueueWaitReason(t *testing.T) {
	q := newStartQueue(clocktesting.NewFakePassiveClock(time.Unix(0, 0)), newStartLimit(1))
	q.acquire("a", 0, 1, 1)
	q.acquire("b", 0, 2, 1)
	q.acquire("c", 0, 3, 1)
	got := q.waitReason("c")
	if !strings.Contains(got, "1 pod starts in flight (limit 1), 1 pods ahead") {
		t.Errorf("podstatus.Waiting = %q", got)
	}
	if len(q.inflight) != 1 || len(q.entries) != 2 {
		t.Errorf("%d in flight, %d waiting; want 1, 2", len(q.inflight), len(q.entries))
	}
}

// TestStartLimitAdapts feeds start latencies measured on a fake clock
// through the queue and checks that the limit keeps its slots while the
// runtime is only busy (more starts in flight, each longer, at the same
// cost per start), shrinks while its cost per start is far above its
// best, and grows back while starts are quick, never past the maximum
// nor below one.
func TestStartLimitAdapts(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	q := newStartQueue(clk, newStartLimit(4))
	next := uint64(0)
	// round starts n pods together, with one more waiting, and completes
	// them all after d.
	round := func(n int, d time.Duration) int {
		var got []types.UID
		for range n + 1 {
			next++
			uid := types.UID(strings.Repeat("x", int(next)))
			if q.acquire(uid, 0, next, 1) {
				got = append(got, uid)
			}
		}
		if len(got) < n {
			t.Fatalf("%d pods got a slot, want %d", len(got), n)
		}
		for _, uid := range got[n:] {
			q.release(uid, false)
		}
		clk.SetTime(clk.Now().Add(d))
		for _, uid := range got[:n] {
			q.release(uid, true)
		}
		for len(q.entries) > 0 {
			q.release(q.entries[0].uid, false)
		}
		return q.limit.current()
	}
	steps := []struct {
		n    int
		d    time.Duration
		want int
	}{
		{1, 100 * time.Millisecond, 4},  // a lone start: 100 ms a start
		{4, 450 * time.Millisecond, 4},  // 4.5x as long, but 4 at once: busy, not slow
		{4, 1400 * time.Millisecond, 3}, // 350 ms a start, 3.5x the best: one slot fewer
		{3, 1200 * time.Millisecond, 2},
		{2, 900 * time.Millisecond, 1},
		{1, 900 * time.Millisecond, 1}, // never below one
		{1, 150 * time.Millisecond, 2}, // quick again, with pods waiting
		{2, 200 * time.Millisecond, 3}, // twice the quickest: still quick
		{3, 500 * time.Millisecond, 3}, // neither slow nor quick: kept
		{3, 180 * time.Millisecond, 4},
		{4, 100 * time.Millisecond, 4}, // never above the maximum
	}
	for i, s := range steps {
		if got := round(s.n, s.d); got != s.want {
			t.Fatalf("step %d (%d for %s): limit = %d, want %d", i, s.n, s.d, got, s.want)
		}
	}
}

// TestStartQueueCostSharesTheTime: a start's cost is its latency over the
// mean number of starts in flight while it ran, whenever the others began
// or ended.
func TestStartQueueCostSharesTheTime(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	q := newStartQueue(clk, newStartLimit(3))
	step := func(d time.Duration) { clk.SetTime(clk.Now().Add(d)) }
	q.acquire("a", 0, 1, 1)
	step(100 * time.Millisecond)
	q.acquire("b", 0, 2, 1)
	step(100 * time.Millisecond)
	q.acquire("c", 0, 3, 1)
	step(100 * time.Millisecond)
	q.release("a", true) // 300 ms: 1, 2 then 3 in flight, 2 on average
	step(200 * time.Millisecond)
	q.release("b", true) // 400 ms: 2, 3 then 2 in flight for 200 ms, 2.25 on average
	q.release("c", true) // 300 ms: 3 then 2 in flight for 200 ms, 7/3 on average
	want := []struct {
		latency  time.Duration
		inflight float64
	}{{300 * time.Millisecond, 2}, {400 * time.Millisecond, 2.25}, {300 * time.Millisecond, 7.0 / 3}}
	if len(q.limit.samples) != len(want) {
		t.Fatalf("%d samples, want %d", len(q.limit.samples), len(want))
	}
	for i, w := range want {
		got := q.limit.samples[i]
		cost := time.Duration(float64(w.latency) / w.inflight)
		if got.latency != w.latency || (got.cost-cost).Abs() > time.Microsecond {
			t.Errorf("start %d: latency %s cost %s, want %s and %s (%.2f in flight)", i, got.latency, got.cost, w.latency, cost, w.inflight)
		}
	}
}

// TestStartLimitNeedsWaiters: a start with nobody waiting says nothing
// about room for more, nor about too many: a lone start costs more than
// one among several on a runtime that starts pods in parallel.
func TestStartLimitNeedsWaiters(t *testing.T) {
	l := newStartLimit(3)
	now := time.Unix(0, 0)
	start := func(d time.Duration, inflight float64, waiting bool) {
		l.observe(now, now.Add(d), inflight, waiting)
		now = now.Add(d)
	}
	start(400*time.Millisecond, 3, true) // 133 ms a start
	start(500*time.Millisecond, 1, false)
	if got := l.current(); got != 3 {
		t.Fatalf("limit = %d after a lone start with nobody waiting, want 3", got)
	}
	for range 2 {
		start(time.Second, 1, true)
	}
	if got := l.current(); got != 1 {
		t.Fatalf("limit after slow starts = %d, want 1", got)
	}
	for range 5 {
		start(400*time.Millisecond, 1, false)
	}
	if got := l.current(); got != 1 {
		t.Errorf("limit grew to %d with nobody waiting", got)
	}
	start(400*time.Millisecond, 1, true)
	if got := l.current(); got != 2 {
		t.Errorf("limit = %d after a quick start with pods waiting, want 2", got)
	}
}

// TestStartQueueHeldGrantsNothing: while held (the sync loop handing over
// a batch), no slot is granted, whatever is free; once released, the best
// ranked pod of the whole batch goes first, not the first to ask.
func TestStartQueueHeldGrantsNothing(t *testing.T) {
	q := newStartQueue(clocktesting.NewFakePassiveClock(time.Unix(0, 0)), newStartLimit(1))
	q.held = true
	if q.acquire("regular", 0, 1, 1) {
		t.Fatal("a held queue granted a slot")
	}
	q.add("critical", 2000001000, 2)
	q.held = false
	if got := q.wakeable(); len(got) != 0 {
		t.Errorf("wakeable after release = %v, want none: the one slot is the critical pod's, whose lane asks on its own", got)
	}
	if q.acquire("regular", 0, 1, 1) {
		t.Fatal("the regular pod, first to ask, took the one slot before the critical pod")
	}
	if !q.acquire("critical", 2000001000, 2, 1) {
		t.Fatal("the critical pod did not get the slot")
	}
}

// TestStartSlots: a start takes two slots when it must first stop an old
// sandbox of berth's, one otherwise.
func TestStartSlots(t *testing.T) {
	owned := map[string]string{criconfig.LabelManaged: "true"}
	for _, tt := range []struct {
		name   string
		status *podplan.PodStatus
		want   int
	}{
		{"no status read", nil, 1},
		{"a new pod", &podplan.PodStatus{}, 1},
		{"a dead sandbox", &podplan.PodStatus{Sandboxes: []*podplan.SandboxStatus{{ID: "a", State: podplan.SandboxStateNotReady, Labels: owned}}}, 2},
		{"several old sandboxes", &podplan.PodStatus{Sandboxes: []*podplan.SandboxStatus{{ID: "a", Labels: owned}, {ID: "b", Labels: owned}}}, 2},
		{"only a sandbox berth does not own", &podplan.PodStatus{Sandboxes: []*podplan.SandboxStatus{{ID: "a", State: podplan.SandboxStateNotReady}}}, 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := startSlots(tt.status); got != tt.want {
				t.Errorf("startSlots = %d, want %d", got, tt.want)
			}
		})
	}
}

// TestStartQueueCostCountsSlots: a start's cost divides its latency by
// the slots taken beside it, a two-slot start counting two.
func TestStartQueueCostCountsSlots(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	q := newStartQueue(clk, newStartLimit(4))
	q.acquire("dead", 0, 1, 2)
	q.acquire("new", 0, 2, 1)
	clk.SetTime(clk.Now().Add(300 * time.Millisecond))
	q.release("dead", true)
	if got, want := q.limit.samples[0].cost, 100*time.Millisecond; got != want {
		t.Errorf("cost = %s, want %s (300 ms over 3 slots)", got, want)
	}
}
