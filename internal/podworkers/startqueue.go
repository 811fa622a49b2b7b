package podworkers

import (
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/podplan"
	"github.com/berth-agent/berth/internal/podrules"
)

// startQueue bounds how many pods are being started at once (a sandbox
// created and its containers started, one SyncPod of a pod that has no
// ready sandbox) and decides who starts next: higher spec.priority first,
// then the order berth saw the manifests in. Handing containerd every pod
// at once saturates the machine and no pod runs until nearly all do; a
// few starts in flight bring the first and the most important pods up in
// a fraction of the time and all of them no later.
//
// Only starts queue: stops, probes, status reads and restarts of single
// containers never wait here. A slot is held until the start's SyncPod
// returns, or until a postStart hook is about to run (the hook has no
// timeout and is the pod's own business).
//
// A pod enters the queue when it becomes a candidate (its lane is created,
// or it passes the full-name gate), before its lane has read the runtime,
// so a critical pod that arrives in the same batch as 49 others holds its
// rank while its lane is still on the way: a pod may start only while
// fewer entries rank above it than there are free slots.
//
// Critical pods (priority at or above system-cluster-critical: the
// control plane, the network) do not queue behind the others: they count
// against the limit only among themselves, and while one of them starts,
// or waits for its lane, no other pod gets a slot, for at most soloFor
// (see there), so a critical pod read last in a batch of 50 starts at
// nearly the pace of a lone pod. Pods already in flight finish.
//
// A start that must first stop the pod's old sandbox (a pod whose sandbox
// died: after a power cut, every pod) takes two slots (startSlots).
//
// The limit adapts between 1 and max to the start latency and cost the
// runtime shows (see startLimit.observe). It is not safe for concurrent
// use: the pod workers' mutex guards it.
type startQueue struct {
	clock clock.PassiveClock
	limit *startLimit

	// entries are the pods waiting for a slot, best first.
	entries []*startEntry
	// inflight maps the pods holding a slot to their start.
	inflight map[types.UID]inflightStart
	// held grants no slot while the sync loop hands over a batch of
	// pods: every pod of the batch ranks in the queue before the first
	// lane of it may start, so a critical pod read last still goes first.
	held bool
	// load is the integral of the slots taken over time (slots times
	// nanoseconds) up to loadAt: a start's share of it tells how many
	// ran beside it on average.
	load   time.Duration
	loadAt time.Time
}

// inflightStart is one pod holding a start slot.
type inflightStart struct {
	since    time.Time     // when it got the slot
	load     time.Duration // the queue's load then
	slots    int           // how many slots it takes (startSlots)
	critical bool
}

// startSlots is how many slots a start takes: two when it must first stop
// an old sandbox of the pod (a sandbox that died: after a power cut every
// pod brings a dead one), one otherwise. Tearing a sandbox down is runtime
// work of the size of setting one up (the CNI plugins' DEL, unmounts, the
// network namespace), so such a start is counted as the two pieces of
// runtime work it is; a first boot, with no old sandboxes, keeps one slot
// per start.
func startSlots(pod *podplan.PodStatus) int {
	if pod != nil && len(pod.OwnedSandboxes()) > 0 {
		return 2
	}
	return 1
}

// criticalSoloDefault is how long a critical start keeps the runtime to
// itself before berth has measured any start: several lone starts of a
// small pod, short enough that a critical pod whose start is slow (an
// image pull) does not hold up the others for long.
const criticalSoloDefault = 2 * time.Second

// startEntry is one pod waiting for a start slot.
type startEntry struct {
	uid      types.UID
	priority int32
	seq      uint64 // the order the pod was seen in
	// asked is set once the pod's lane asked for a slot and was told to
	// wait: only such lanes need waking when a slot frees, the others ask
	// on their own.
	asked bool
	// slots is what its start takes (startSlots), known once its lane
	// asked; one until then.
	slots int
}

func newStartQueue(clk clock.PassiveClock, limit *startLimit) *startQueue {
	return &startQueue{clock: clk, limit: limit, inflight: map[types.UID]inflightStart{}}
}

func (e *startEntry) critical() bool { return e.priority >= podrules.CriticalPriority }

// before reports whether a ranks before b: higher priority, then seen
// earlier.
func (a *startEntry) before(b *startEntry) bool {
	if a.priority != b.priority {
		return a.priority > b.priority
	}
	return a.seq < b.seq
}

// add makes uid a candidate for a start slot, unless it already is one or
// holds a slot.
func (q *startQueue) add(uid types.UID, priority int32, seq uint64) {
	if _, ok := q.inflight[uid]; ok || q.index(uid) >= 0 {
		return
	}
	e := &startEntry{uid: uid, priority: priority, seq: seq, slots: 1}
	i, _ := slices.BinarySearchFunc(q.entries, e, func(x, y *startEntry) int {
		if x.before(y) {
			return -1
		}
		return 1
	})
	q.entries = slices.Insert(q.entries, i, e)
}

// acquire gives uid the slots its start takes (slots, startSlots) if it
// holds them or may take them now, and otherwise marks it as waiting, to be
// returned by wakeable once its turn comes. It adds uid first if it is no
// candidate yet.
func (q *startQueue) acquire(uid types.UID, priority int32, seq uint64, slots int) bool {
	if _, ok := q.inflight[uid]; ok {
		return true
	}
	q.add(uid, priority, seq)
	i := q.index(uid)
	q.entries[i].slots = max(slots, 1)
	if q.grantable(i) {
		e := q.entries[i]
		q.entries = slices.Delete(q.entries, i, i+1)
		now := q.accrue()
		q.inflight[uid] = inflightStart{since: now, load: q.load, slots: e.slots, critical: e.critical()}
		return true
	}
	q.entries[i].asked = true
	return false
}

// release gives back uid's slot, or withdraws it from the queue (a pod
// removed while it waited never starts). A slot held is fed to the limit
// as one start, with the mean number of starts in flight beside it, when
// Observe is set: a start that ended in an error or a pull says nothing
// about how fast the runtime starts pods.
func (q *startQueue) release(uid types.UID, observe bool) {
	if in, ok := q.inflight[uid]; ok {
		now := q.accrue()
		inflight := float64(q.taken(false))
		if d := now.Sub(in.since); d > 0 {
			inflight = float64(q.load-in.load) / float64(d)
		}
		delete(q.inflight, uid)
		if observe {
			q.limit.observe(in.since, now, inflight, len(q.entries) > 0)
		}
		return
	}
	if i := q.index(uid); i >= 0 {
		q.entries = slices.Delete(q.entries, i, i+1)
	}
}

// wakeable returns the waiting pods whose lanes asked and may now take a
// slot: the caller wakes them.
func (q *startQueue) wakeable() []types.UID {
	var uids []types.UID
	for i, e := range q.entries {
		if e.asked && q.grantable(i) {
			uids = append(uids, e.uid)
		}
	}
	return uids
}

// waitReason says why uid waits, for its containers' ContainerCreating
// message in `berth describe`.
func (q *startQueue) waitReason(uid types.UID) string {
	i := max(q.index(uid), 0)
	msg := fmt.Sprintf("waiting for a pod start slot: %d pod starts in flight (limit %d), %d pods ahead in the start queue (higher priority or seen earlier)",
		len(q.inflight), q.limit.current(), i)
	if taken := q.taken(false); taken != len(q.inflight) {
		msg += fmt.Sprintf("; the starts in flight take %d slots (a start that first stops the pod's old sandbox takes two)", taken)
	}
	if _, solo := q.soloUntil(); i < len(q.entries) && !q.entries[i].critical() && (solo || q.entries[0].critical()) {
		msg += "; a critical pod is starting, alone"
	}
	return msg
}

// soloLeft is how long the critical starts in flight keep the runtime to
// themselves, if a pod that asked waits for that: its owner wakes the
// queue again then. Zero when no asking pod waits for a critical start.
func (q *startQueue) soloLeft() time.Duration {
	end, ok := q.soloUntil()
	if !ok || !slices.ContainsFunc(q.entries, func(e *startEntry) bool { return e.asked && !e.critical() }) {
		return 0
	}
	return max(end.Sub(q.clock.Now()), 0)
}

// soloUntil is when the last critical start in flight stops keeping the
// runtime to itself; false when none is in flight.
func (q *startQueue) soloUntil() (time.Time, bool) {
	var end time.Time
	found := false
	for _, in := range q.inflight {
		if in.critical {
			found = true
			if t := in.since.Add(q.soloFor()); t.After(end) {
				end = t
			}
		}
	}
	return end, found
}

// soloFor is how long one critical start keeps the runtime to itself:
// soloFactor times the quickest recent start, or criticalSoloDefault
// before any start was measured. A critical start that takes longer
// shares the runtime again.
func (q *startQueue) soloFor() time.Duration {
	if best, ok := q.limit.best(); ok {
		return soloFactor * best
	}
	return criticalSoloDefault
}

// grantable reports whether the entry at index i may take its slots now.
// A critical pod may while the slots of the critical starts in flight, of
// the entries ranked before it and its own fit in the limit; any other pod
// while no critical pod waits, none started within soloFor, and the slots
// of all starts in flight, of the entries before it and its own fit. The
// best ranked pod may start whatever it takes once nothing is in flight
// (a start of two slots under a limit that adapted down to one).
func (q *startQueue) grantable(i int) bool {
	if q.held || i < 0 {
		return false
	}
	e := q.entries[i]
	if !e.critical() {
		if q.entries[0].critical() {
			return false // a critical pod waits or is on its way: it goes first
		}
		if end, ok := q.soloUntil(); ok && q.clock.Now().Before(end) {
			return false
		}
	}
	taken := q.taken(e.critical())
	if i == 0 && taken == 0 {
		return true
	}
	ahead := 0
	for _, a := range q.entries[:i] {
		ahead += a.slots
	}
	return taken+ahead+e.slots <= q.limit.current()
}

// taken is the number of slots the starts in flight take; only the
// critical ones' when critical is set (critical pods count against the
// limit only among themselves).
func (q *startQueue) taken(critical bool) int {
	n := 0
	for _, in := range q.inflight {
		if in.critical || !critical {
			n += in.slots
		}
	}
	return n
}

// accrue brings load up to now and returns now; it runs before every
// change of the starts in flight.
func (q *startQueue) accrue() time.Time {
	now := q.clock.Now()
	if !q.loadAt.IsZero() {
		q.load += time.Duration(q.taken(false)) * now.Sub(q.loadAt)
	}
	q.loadAt = now
	return now
}

func (q *startQueue) index(uid types.UID) int {
	return slices.IndexFunc(q.entries, func(e *startEntry) bool { return e.uid == uid })
}
