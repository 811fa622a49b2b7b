//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Tuning of TestCrashCycles.
const (
	// crashCyclesDefault keeps `make test` around two minutes on a loaded
	// 2-core machine; BERTH_CRASH_CYCLES asks for more.
	crashCyclesDefault = 12
	// crashWatchPeriod is how often the watcher looks at the runtime.
	crashWatchPeriod = 20 * time.Millisecond
	// crashHookTimeout bounds the wait for a kill point to be reached.
	crashHookTimeout = 45 * time.Second
	// crashSettleTimeout bounds the wait for the runtime to match the
	// manifests after a cycle (berth retries failed syncs every 2 s).
	crashSettleTimeout = 45 * time.Second
	// crashExtraGrace is how long a problem berth should clean up by
	// itself (a leftover container) may stay before it counts.
	crashExtraGrace = 6 * time.Second
	// crashHoldTimeout is how long a held start stays held when berth
	// rightly waits for it.
	crashHoldTimeout = 10 * time.Second
	// crashLogTail is how many lines of berth's log a failing cycle shows.
	crashLogTail = 150
)

// TestCrashCycles SIGKILLs berth (and once in a while containerd) at
// chosen and at random points of manifest adds, edits, removals and broken
// edits, restarting it each time, while a watcher polls containerd every
// 20 ms. It checks berth's promises through crashes:
//
//	(a) no two UIDs of one full name ever hold a READY sandbox or a
//	    CREATED/RUNNING container at the same moment;
//	(b) the pod of a manifest edited into a broken one keeps running (the
//	    same container, RUNNING) for as long as the manifest is broken,
//	    across berth's kills and restarts;
//	(c) once berth settles, the runtime is exactly the manifests: one
//	    running pod of the right version per good manifest, nothing of
//	    removed ones or of older versions, no CREATED leftovers, and
//	    restartCount 0 (nothing here ever crashes).
//
// Berth talks to containerd through a CRI proxy of the test, which kills
// it at exact points: after containerd created a container (before the
// start), right after StartContainer was sent, during the StopContainer
// of an edit; and kills containerd while RunPodSandbox sets up the pod
// network. Every other of those berth kills is followed by an edit of the
// same manifest while berth is down; after StartContainer, containerd's
// start of the old version is then also held in flight (see logFIFO)
// until the next berth starts a container of the pod or has waited
// crashHoldTimeout. The remaining cycles kill berth at a uniformly random
// time after the change, sometimes followed by a change of another
// manifest while berth is down. BERTH_CRASH_CYCLES sets the number of
// cycles, BERTH_CRASH_SEED replays a sequence of changes.
func TestCrashCycles(t *testing.T) {
	cycles := crashCyclesDefault
	if v := os.Getenv("BERTH_CRASH_CYCLES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("BERTH_CRASH_CYCLES=%q: want a positive number", v)
		}
		cycles = n
	}
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("BERTH_CRASH_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("BERTH_CRASH_SEED=%q: %v", v, err)
		}
		seed = n
	}
	t.Logf("crash test: %d cycles, seed %d (BERTH_CRASH_SEED=%d replays the changes)", cycles, seed, seed)

	c := &crashRun{
		t:        t,
		rng:      rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		reported: map[string]bool{},
		fired:    map[killMode]int{},
		missed:   map[killMode]int{},
		slots: []*crashSlot{
			{name: "crash-a"},
			{name: "crash-b", hostNetwork: true},
			{name: "crash-c"},
			{name: "crash-d", hostNetwork: true},
		},
	}
	// Registered before berth's cleanup, so it runs after it: a failing
	// run's output then ends with its violations, not with berth's log
	// (CI shows the tail of the output).
	t.Cleanup(func() {
		if t.Failed() && c.w != nil {
			t.Logf("TestCrashCycles failed (seed %d); its violations again, after berth's log:\n%s", seed, c.violationSummary())
		}
	})
	c.proxy = startCRIProxy(t, t.TempDir())
	manifests := map[string]string{}
	for _, s := range c.slots {
		s.state, s.gen = slotGood, 1
		manifests[s.file()] = s.manifest()
	}
	c.b = newBerth(t, berthOptions{
		args:      append([]string{"--container-runtime-endpoint", c.proxy.endpoint()}, fastBackoff...),
		omit:      []string{"container-runtime-endpoint"},
		manifests: manifests,
	})
	t.Cleanup(func() {
		// Never leave the shared bed without its containerd, whatever
		// cycle failed.
		if err := bed.StartContainerd(); err != nil {
			t.Errorf("StartContainerd in cleanup: %v", err)
		}
	})
	w, err := startCrashWatch(crashWatchPeriod)
	if err != nil {
		t.Fatal(err)
	}
	c.w = w
	w.cycle.Store(-1) // the first pods, before the cycles
	t.Cleanup(w.stop)

	c.b.waitReady()
	if pending := c.settle(-1, waitTimeout); len(pending) > 0 {
		t.Fatalf("the first pods never ran: %s", strings.Join(pending, "; "))
	}
	started := time.Now()
	for i := range cycles {
		c.cycle(i, cycles)
	}
	w.cycle.Store(int64(cycles))
	c.final(cycles)
	w.stop()
	c.report(cycles, time.Since(started))
}

// slotState is what a manifest file of the test holds.
type slotState int

const (
	slotAbsent slotState = iota // no file
	slotGood                    // a valid manifest of version gen
	slotBroken                  // a broken edit of version gen, which ran
)

func (s slotState) String() string {
	return [...]string{"absent", "good", "broken"}[s]
}

// crashSlot is one manifest file and what the test expects of it.
type crashSlot struct {
	name        string // metadata.name; the file is name.yaml
	hostNetwork bool
	state       slotState
	gen         int // the version that runs (good) or ran last (broken)
	variant     int // counts broken edits, so each is new content
	// uid and container are the running pod of gen and its container,
	// learned once it ran; "" when unknown.
	uid       types.UID
	container string
}

func (s *crashSlot) file() string     { return s.name + ".yaml" }
func (s *crashSlot) podName() string  { return podName(s.name) }
func (s *crashSlot) fullName() string { return fullName(s.podName(), "default") }

// pod is the slot's pod at version gen: a label tells versions apart in
// the runtime, and makes each version new content (a new UID).
func (s *crashSlot) pod() *v1.Pod {
	p := sleeper(s.name)
	p.Labels = map[string]string{"crash-gen": strconv.Itoa(s.gen)}
	p.Spec.HostNetwork = s.hostNetwork
	return p
}

func (s *crashSlot) manifest() string { return podManifest(s.pod()) }

// brokenManifest fails validation (an unknown imagePullPolicy), in a
// new way each time.
func (s *crashSlot) brokenManifest() string {
	p := s.pod()
	p.Labels["crash-broken"] = strconv.Itoa(s.variant)
	p.Spec.Containers[0].ImagePullPolicy = "Sometimes"
	return podManifest(p)
}

func (s *crashSlot) String() string {
	net := "podnet"
	if s.hostNetwork {
		net = "hostnet"
	}
	return fmt.Sprintf("%s(%s %s gen %d)", s.name, net, s.state, s.gen)
}

// killMode is where a cycle kills.
type killMode int

const (
	killAfterCreate          killMode = iota // berth, once containerd created the new container, before StartContainer
	killAfterStartSent                       // berth, right after it sent StartContainer
	killDuringStop                           // berth, right after it sent StopContainer for the old version
	killContainerdNetworking                 // containerd, while RunPodSandbox runs CNI
	killAtRandom                             // berth, at a uniformly random time after the change
)

func (m killMode) String() string {
	return [...]string{"berth after CreateContainer", "berth after StartContainer sent", "berth during StopContainer",
		"containerd during sandbox networking", "berth at a random time"}[m]
}

// modeRotation gives each exact kill point its cycles deterministically;
// the random ones fill the rest.
var modeRotation = []killMode{killAfterCreate, killAfterStartSent, killDuringStop, killContainerdNetworking, killAtRandom, killAtRandom}

// crashOp is one change of one manifest.
type crashOp struct {
	slot *crashSlot
	what string // add, edit, break, rebreak, fix, remove
}

func (o crashOp) String() string { return o.what + " " + o.slot.String() }

// crashRun is the state of one TestCrashCycles, owned by the test's
// goroutine. The hooks it arms run in the proxy's goroutines: they touch
// only berth (which has its own mutex), berth's log file and variables of
// their own, which the test reads once the hook's fired is closed.
type crashRun struct {
	t        *testing.T
	rng      *rand.Rand
	b        *berth
	proxy    *criProxy
	w        *crashWatch
	slots    []*crashSlot
	reported map[string]bool // end-state problems already recorded, by text
	fired    map[killMode]int
	missed   map[killMode]int
	span     time.Duration // the longest from a change to its exact kill point
	settled  time.Time     // when settle last saw the manifests run
}

// cycle makes one change (two when one is made while berth is down),
// kills at the cycle's point, restarts what was killed, and waits for the
// runtime to match the manifests.
func (c *crashRun) cycle(i, cycles int) {
	t := c.t
	c.w.cycle.Store(int64(i))
	logFrom := logSize(c.b)
	_, vFrom := c.w.since(0)
	began := time.Now()

	mode := modeRotation[i%len(modeRotation)]
	// Every other cycle of an exact berth kill edits the manifest again
	// while berth is down: the next berth finds the old version half
	// started or half stopped, and a new one to run.
	editWhileDown := mode != killAtRandom && mode != killContainerdNetworking && (i/len(modeRotation))%2 == 1
	op, ok := c.pick(mode)
	if !ok {
		t.Logf("cycle %d: no manifest fits %q, killing at random instead", i+1, mode)
		mode, editWhileDown = killAtRandom, false
		op, _ = c.pick(mode)
	}
	summary := fmt.Sprintf("cycle %d/%d: %s, kill %s", i+1, cycles, op, mode)
	c.mark("cycle %d/%d begins: kill %s", i+1, cycles, mode)

	if mode == killAtRandom {
		// Uniform over the time a change takes berth: the longest an
		// exact kill point was seen after its change, with some margin.
		window := min(max(c.span*3/2, 500*time.Millisecond), 5*time.Second)
		delay := time.Duration(c.rng.Int64N(int64(window)))
		c.apply(op)
		time.Sleep(delay) // the kill point itself, not a wait for anything
		c.mark("SIGKILL berth, %s after the change", delay.Round(time.Millisecond))
		c.b.kill()
		summary += fmt.Sprintf(" %s after the change", delay.Round(time.Millisecond))
		// Sometimes a second change while berth is down, of another
		// manifest (a broken edit here is what a restart must survive).
		if c.rng.IntN(4) == 0 {
			if down, ok := c.pickRandom(op.slot); ok {
				c.apply(down)
				summary += "; while down: " + down.String()
			}
		}
		c.b.start()
	} else {
		summary += c.killAt(mode, op, editWhileDown)
	}
	c.b.waitReady()
	ready := time.Now()
	pending := c.settle(i, crashSettleTimeout)
	took := time.Since(began)
	if len(pending) > 0 {
		summary += "; NOT SETTLED"
	} else {
		summary += fmt.Sprintf("; the manifests ran %s after berth was ready", c.settled.Sub(ready).Round(time.Millisecond))
	}
	// containerd 1.6 killed while libcni wrote a sandbox's cache can never
	// stop that sandbox: berth must have run the pod anyway (settle), and
	// the operator's repair lets it clean the sandbox up in later cycles.
	if removed, err := bed.RepairCNICache(); err != nil || len(removed) > 0 {
		c.mark("removed broken CNI cache entries %v (%v)", removed, err)
		summary += fmt.Sprintf("; removed %d broken CNI cache entries after it (%v)", len(removed), err)
	}
	t.Logf("%s (%s in all)", summary, took.Round(time.Millisecond))

	if vs, _ := c.w.since(vFrom); len(vs) > 0 {
		for _, v := range vs {
			t.Logf("cycle %d: VIOLATION %s (%s at %s): %s", i+1, v.kind, v.key, clock(v.at), v.detail)
		}
		lines := logLinesSince(c.b, logFrom, "")
		if len(lines) > crashLogTail {
			lines = lines[len(lines)-crashLogTail:]
		}
		t.Logf("cycle %d: berth's log during the cycle (last %d lines):\n%s", i+1, len(lines), strings.Join(lines, "\n"))
	}
}

// killAt arms the proxy for mode, makes the change op, waits for the kill
// and restarts what was killed. With editWhileDown, the manifest is
// edited again before berth restarts; after StartContainer, containerd is
// then also kept in the middle of that start (its shim for the pod
// paused) until the new berth acts on the old version's sandbox: the
// window where a start is still in flight and must count as running. It
// returns what happened, for the cycle's summary.
func (c *crashRun) killAt(mode killMode, op crashOp, editWhileDown bool) string {
	h := &proxyHook{pod: op.slot.fullName(), fired: make(chan struct{})}
	var fireDetail string
	killBerth := func() {
		c.mark("at %s: SIGKILL berth", h)
		if c.b.signal(syscall.SIGKILL, 30*time.Second) == nil {
			fireDetail = " (berth did not exit within 30s of SIGKILL)"
		}
	}
	var held *logFIFO // set when a start is held in containerd
	switch mode {
	case killAfterCreate:
		h.methods, h.phase, h.fire = []string{"CreateContainer"}, responseReceived, killBerth
	case killAfterStartSent:
		h.methods, h.phase, h.fire = []string{"StartContainer"}, requestSent, killBerth
		if editWhileDown {
			h.detach = true
			h.before = func(call proxyCall) {
				f, err := holdLogOpen(call.logPath)
				if err != nil {
					fireDetail = fmt.Sprintf(" (cannot hold the start: %v)", err)
					return
				}
				c.mark("at %s: a FIFO at %s, the start will hang in containerd", h, call.logPath)
				held = f
			}
		}
	case killDuringStop:
		h.methods, h.phase, h.fire = []string{"StopContainer"}, requestSent, killBerth
	case killContainerdNetworking:
		before := ipamReservations()
		h.methods, h.phase = []string{"RunPodSandbox"}, requestSent
		h.fire = func() {
			if !waitNewReservation(before, 30*time.Second) {
				fireDetail = " (no IP reserved within 30s: containerd not killed)"
				return
			}
			c.mark("at %s, an IP address reserved: SIGKILL containerd", h)
			if err := bed.KillContainerd(); err != nil {
				fireDetail = fmt.Sprintf(" (kill containerd: %v)", err)
			}
		}
	}
	c.proxy.arm(h)
	changed := time.Now()
	c.apply(op)
	select {
	case <-h.fired:
	case <-time.After(crashHookTimeout):
		if c.proxy.disarm(h) {
			c.missed[mode]++
			return fmt.Sprintf(": MISSED, no %s within %s", h, crashHookTimeout)
		}
		<-h.fired // a call took it just now; fire is bounded
	}
	// fireDetail and held were set before h.fired was closed.
	if held != nil {
		defer held.close()
	}
	c.span = max(c.span, time.Since(changed))
	detail := fmt.Sprintf(" %s after the change", time.Since(changed).Round(time.Millisecond))
	if fireDetail != "" {
		c.missed[mode]++
		detail += fireDetail
	} else {
		c.fired[mode]++
	}
	if mode == killContainerdNetworking {
		if err := bed.StartContainerd(); err != nil {
			c.t.Fatalf("restart containerd: %v", err)
		}
		c.mark("containerd restarted and ready")
		return detail
	}
	if c.b.running() {
		return detail // not killed (reported in detail): nothing to restart
	}
	if editWhileDown && op.slot.state == slotGood {
		down := crashOp{slot: op.slot, what: "edit"}
		c.apply(down)
		detail += "; while down: " + down.String()
	}
	if held == nil {
		c.b.start()
		return detail
	}
	// The old version's start hangs in containerd. Let it go on once the
	// new berth started a container of the pod (it should not have while
	// the start is in flight), or once it has clearly waited.
	release := &proxyHook{methods: []string{"StartContainer"}, phase: responseReceived, pod: op.slot.fullName(), fired: make(chan struct{})}
	release.fire = func() {
		c.mark("at %s: letting the held start go on", release)
		if err := held.release(); err != nil {
			c.t.Errorf("%v", err)
		}
	}
	c.proxy.arm(release)
	c.b.start()
	select {
	case <-release.fired:
		detail += "; the new berth started a container while the old start was held"
	case <-time.After(crashHoldTimeout):
		if !c.proxy.disarm(release) {
			<-release.fired
		} else {
			c.mark("the new berth started nothing of %s in %s: letting the held start go on", op.slot.fullName(), crashHoldTimeout)
			if err := held.release(); err != nil {
				c.t.Errorf("%v", err)
			}
			detail += fmt.Sprintf("; the new berth waited %s for the held start", crashHoldTimeout)
		}
	}
	return detail
}

// logFIFO holds a container's start in flight in containerd: containerd
// opens the container's log file (creating it) in the middle of
// StartContainer, after marking the container as starting and checking
// its sandbox; a FIFO with no reader at that path makes the open hang
// until a reader comes. Nothing else of the pod is affected, so this is a
// runtime slow to start one container, as on a loaded machine.
type logFIFO struct {
	path string

	// mu guards reader.
	mu     sync.Mutex
	reader *os.File
}

// holdLogOpen puts the FIFO where the container's log file will be.
func holdLogOpen(path string) (*logFIFO, error) {
	if path == "" {
		return nil, fmt.Errorf("the container's log path is unknown")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		return nil, fmt.Errorf("mkfifo %s: %w", path, err)
	}
	return &logFIFO{path: path}, nil
}

// release opens the FIFO's read end, which lets containerd's open return,
// and drains what the container logs until close. Releasing twice is a
// no-op.
func (f *logFIFO) release() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.reader != nil {
		return nil
	}
	r, err := os.OpenFile(f.path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("release the held start: %w", err)
	}
	f.reader = r
	go func() { _, _ = io.Copy(io.Discard, r) }() // ends when close closes r
	return nil
}

// close releases the start if it was not, and stops draining.
func (f *logFIFO) close() {
	_ = f.release()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reader.Close()
}

// mark writes a line into berth's log, so that the log of a failing cycle
// shows what the test did and when, between berth's own lines. Hooks call
// it from the proxy's goroutines: each line is one append.
func (c *crashRun) mark(format string, args ...any) {
	f, err := os.OpenFile(c.b.logFile, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "=== e2e crash %s: %s\n", clock(time.Now()), fmt.Sprintf(format, args...))
}

// pick chooses a change that passes through the kill point of mode.
func (c *crashRun) pick(mode killMode) (crashOp, bool) {
	if mode == killAtRandom {
		return c.pickRandom(nil)
	}
	var ops []crashOp
	for _, s := range c.slots {
		if mode == killContainerdNetworking && s.hostNetwork {
			continue
		}
		// A stop needs a running old version: not one of a broken
		// manifest whose pod was already lost.
		if mode == killDuringStop && (s.container == "" || c.w.lost(s.fullName(), s.container)) {
			continue
		}
		switch {
		case s.state == slotAbsent:
			ops = append(ops, crashOp{s, "add"})
		case s.state == slotGood:
			ops = append(ops, crashOp{s, "edit"})
		case s.state == slotBroken:
			ops = append(ops, crashOp{s, "fix"})
		}
	}
	if len(ops) == 0 {
		return crashOp{}, false
	}
	return ops[c.rng.IntN(len(ops))], true
}

// pickRandom chooses any change, weighted so that manifests are more
// often there than not, of a slot other than skip.
func (c *crashRun) pickRandom(skip *crashSlot) (crashOp, bool) {
	type weighted struct {
		op crashOp
		w  int
	}
	var ops []weighted
	total := 0
	for _, s := range c.slots {
		if s == skip {
			continue
		}
		var choices []weighted
		switch s.state {
		case slotAbsent:
			choices = []weighted{{crashOp{s, "add"}, 3}}
		case slotGood:
			choices = []weighted{{crashOp{s, "edit"}, 3}, {crashOp{s, "remove"}, 1}}
			if s.container != "" {
				choices = append(choices, weighted{crashOp{s, "break"}, 3})
			}
		case slotBroken:
			choices = []weighted{{crashOp{s, "fix"}, 3}, {crashOp{s, "rebreak"}, 1}, {crashOp{s, "remove"}, 1}}
		}
		for _, o := range choices {
			ops = append(ops, o)
			total += o.w
		}
	}
	if total == 0 {
		return crashOp{}, false
	}
	n := c.rng.IntN(total)
	for _, o := range ops {
		if n < o.w {
			return o.op, true
		}
		n -= o.w
	}
	panic("unreachable")
}

// apply makes the change on disk and tells the watcher which container
// must not stop meanwhile.
func (c *crashRun) apply(op crashOp) {
	c.mark("change: %s", op)
	s := op.slot
	switch op.what {
	case "add", "edit", "fix":
		c.w.unprotect(s.fullName())
		s.state, s.gen, s.uid, s.container = slotGood, s.gen+1, "", ""
		c.b.writeManifest(s.file(), s.manifest())
	case "break", "rebreak":
		if s.state == slotGood && s.container != "" {
			c.w.protect(s.fullName(), s.container)
		}
		s.state = slotBroken
		s.variant++
		c.b.writeManifest(s.file(), s.brokenManifest())
	case "remove":
		c.w.unprotect(s.fullName())
		s.state, s.uid, s.container = slotAbsent, "", ""
		c.b.removeManifest(s.file())
	default:
		c.t.Fatalf("unknown change %q", op.what)
	}
}

// settle waits until the runtime and /pods are the manifests, for at most
// limit; then it gives berth a moment to clean up what it should have, and
// records what is left as end-state violations of cycle i (-1: before the
// cycles). It returns what never settled.
func (c *crashRun) settle(i int, limit time.Duration) []string {
	deadline := time.Now().Add(limit)
	var pending []string
	var extra []problem
	var snap runtimeSnapshot
	for {
		if !c.b.running() {
			c.t.Fatalf("berth exited by itself while settling (cycle %d)", i+1)
		}
		pending, extra, snap = c.state()
		if len(pending) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(pending) > 0 {
		c.w.record(violation{kind: kindEndState, cycle: i, key: "settle", at: time.Now(), detail: fmt.Sprintf(
			"not the manifests %s after berth was ready: %s\n%s", limit, strings.Join(pending, "; "), snap.describe(""))})
		return pending
	}
	c.settled = time.Now()
	graceEnd := time.Now().Add(crashExtraGrace)
	for len(c.fresh(extra)) > 0 && time.Now().Before(graceEnd) {
		time.Sleep(200 * time.Millisecond)
		_, extra, snap = c.state()
	}
	for _, e := range c.fresh(extra) {
		c.reported[e.text] = true
		c.w.record(violation{kind: kindEndState, cycle: i, key: e.pod, at: time.Now(), detail: e.text + "\n" + snap.describe(e.pod)})
	}
	return nil
}

// problem is something berth got wrong with one pod although the right
// version of it runs.
type problem struct {
	pod  string // full name
	text string
}

// fresh filters the problems not recorded before.
func (c *crashRun) fresh(problems []problem) []problem {
	var out []problem
	for _, p := range problems {
		if !c.reported[p.text] {
			out = append(out, p)
		}
	}
	return out
}

// final leaves berth running until the runtime is the manifests and
// every leftover is gone, and records what is still wrong after that.
func (c *crashRun) final(cycles int) {
	pending := c.settle(cycles, waitTimeout)
	if len(pending) > 0 {
		return // recorded by settle
	}
	// Problems seen in a cycle were given their grace there; at the end
	// none may remain.
	var extra []problem
	var snap runtimeSnapshot
	deadline := time.Now().Add(crashExtraGrace)
	for {
		_, extra, snap = c.state()
		if len(extra) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, e := range extra {
		if c.reported[e.text] { // recorded in a cycle: still there at the end
			c.w.record(violation{kind: kindEndState, cycle: cycles, key: e.pod, at: time.Now(), detail: "still at the end: " + e.text + "\n" + snap.describe(e.pod)})
		}
	}
	for _, s := range c.slots {
		if s.state == slotBroken && c.w.lost(s.fullName(), s.container) {
			c.w.record(violation{kind: kindEndState, cycle: cycles, key: s.fullName(), at: time.Now(), detail: fmt.Sprintf(
				"%s: the last good version %s of the broken manifest is not running at the end\n%s", s.fullName(), s.uid, snap.describe(s.fullName()))})
		}
	}
}

// state compares /pods and the runtime with the manifests. pending says
// why they do not match (yet); extra lists what berth got wrong although
// the right pods run. Once a good manifest's pod runs, its uid and
// container are learned.
func (c *crashRun) state() (pending []string, extra []problem, snap runtimeSnapshot) {
	list, err := c.b.pods()
	if err != nil {
		return []string{"/pods: " + err.Error()}, nil, snap
	}
	snap, err = listManaged()
	if err != nil {
		return []string{"CRI: " + err.Error()}, nil, snap
	}
	known := map[string]bool{}
	for _, s := range c.slots {
		known[s.podName()] = true
		p, e, uid, container := c.slotState(s, list, snap)
		pending, extra = append(pending, p...), append(extra, e...)
		if len(p) == 0 && s.state == slotGood {
			s.uid, s.container = uid, container
		}
	}
	for _, p := range list.Items {
		if !known[p.Name] {
			pending = append(pending, "/pods lists a pod of no manifest: "+p.Name)
		}
	}
	for _, x := range snap.sandboxes {
		if !known[x.Labels[labelPodName]] {
			pending = append(pending, "a sandbox of no manifest: "+x.Labels[labelPodName])
		}
	}
	return pending, extra, snap
}

// slotState checks one manifest's pod; see state.
func (c *crashRun) slotState(s *crashSlot, list *v1.PodList, snap runtimeSnapshot) (pending []string, extra []problem, uid types.UID, container string) {
	name := s.podName()
	wrong := func(format string, args ...any) {
		extra = append(extra, problem{pod: s.fullName(), text: fmt.Sprintf(format, args...)})
	}
	var api []*v1.Pod
	for i := range list.Items {
		if list.Items[i].Name == name {
			api = append(api, &list.Items[i])
		}
	}
	var sbs []*runtimeapi.PodSandbox
	var cs []*runtimeapi.Container
	for _, x := range snap.sandboxes {
		if x.Labels[labelPodName] == name {
			sbs = append(sbs, x)
		}
	}
	for _, x := range snap.containers {
		if x.Labels[labelPodName] == name {
			cs = append(cs, x)
			if x.State == runtimeapi.ContainerState_CONTAINER_CREATED {
				wrong("%s: container %s of uid %s left CREATED", name, shortID(x.Id), x.Labels[labelPodUID])
			}
		}
	}
	if s.state == slotAbsent {
		for _, p := range api {
			pending = append(pending, fmt.Sprintf("%s: removed, still in /pods: %s", name, describePod(p)))
		}
		if len(sbs)+len(cs) > 0 {
			pending = append(pending, fmt.Sprintf("%s: removed, %d sandboxes and %d containers remain", name, len(sbs), len(cs)))
		}
		return pending, extra, "", ""
	}
	if s.state == slotBroken && c.w.lost(s.fullName(), s.container) {
		// Its pod stopped (recorded by the watcher): what is left of it
		// is anyone's guess until the manifest is fixed or removed.
		return nil, extra, "", ""
	}

	var want *v1.Pod
	for _, p := range api {
		if (s.state == slotGood && p.Labels["crash-gen"] == strconv.Itoa(s.gen)) || (s.state == slotBroken && p.UID == s.uid && s.uid != "") {
			want = p
		}
	}
	if want == nil {
		return append(pending, fmt.Sprintf("%s: version %d not in /pods (%d entries)", name, s.gen, len(api))), extra, "", ""
	}
	uid = want.UID
	if want.Status.Phase != v1.PodRunning || !podReady(want) {
		pending = append(pending, fmt.Sprintf("%s: version %d not Running and Ready in /pods: %s", name, s.gen, describePod(want)))
	}
	for _, p := range api {
		if p != want && p.Status.Phase == v1.PodRunning {
			pending = append(pending, fmt.Sprintf("%s: /pods also shows uid %s Running", name, p.UID))
		}
	}
	if h := want.Annotations["kubernetes.io/config.hash"]; h != string(uid) {
		wrong("%s: config.hash %q, uid %s", name, h, uid)
	}
	if cst := containerStatus(want, "main"); cst != nil && cst.RestartCount != 0 {
		wrong("%s (uid %s): restartCount %d in /pods, yet nothing crashed", name, uid, cst.RestartCount)
	}

	var ready []*runtimeapi.PodSandbox
	for _, x := range sbs {
		if x.Labels[labelPodUID] != string(uid) {
			pending = append(pending, fmt.Sprintf("%s: sandbox %s of another version (uid %s, %s) remains", name, shortID(x.Id), x.Labels[labelPodUID], x.State))
		} else if x.State == runtimeapi.PodSandboxState_SANDBOX_READY {
			ready = append(ready, x)
		}
	}
	var running []*runtimeapi.Container
	for _, x := range cs {
		if x.Labels[labelPodUID] != string(uid) {
			pending = append(pending, fmt.Sprintf("%s: container %s of another version (uid %s, %s) remains", name, shortID(x.Id), x.Labels[labelPodUID], x.State))
		} else if x.State == runtimeapi.ContainerState_CONTAINER_RUNNING && x.Labels[labelContainerName] == "main" {
			running = append(running, x)
		}
	}
	if len(ready) != 1 || len(running) != 1 || running[0].PodSandboxId != ready[0].Id {
		return append(pending, fmt.Sprintf("%s: uid %s has %d ready sandboxes and %d running containers, want one running in the one ready sandbox",
			name, uid, len(ready), len(running))), extra, "", ""
	}
	if n := running[0].Annotations[annoRestartCount]; n != "0" {
		wrong("%s (uid %s): running container %s has restart count %s, yet nothing crashed", name, uid, shortID(running[0].Id), n)
	}
	return pending, extra, uid, running[0].Id
}

// listManaged lists every berth-owned sandbox and container of the bed.
func listManaged() (runtimeSnapshot, error) {
	ctx, cancel := criCtx()
	defer cancel()
	managed := map[string]string{labelManaged: "true"}
	snap := runtimeSnapshot{t0: time.Now()}
	sbs, err := bed.Runtime().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: managed}})
	if err != nil {
		return snap, err
	}
	snap.t1 = time.Now()
	cs, err := bed.Runtime().ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{LabelSelector: managed}})
	if err != nil {
		return snap, err
	}
	snap.t2 = time.Now()
	snap.sandboxes, snap.containers = sbs.Items, cs.Containers
	return snap, nil
}

// ipamReservations lists the IP addresses host-local has reserved in the
// bed's networks (one file per address).
func ipamReservations() map[string]bool {
	out := map[string]bool{}
	nets, _ := os.ReadDir(filepath.Join(bed.Dir, "cni", "ipam"))
	for _, n := range nets {
		files, _ := os.ReadDir(filepath.Join(bed.Dir, "cni", "ipam", n.Name()))
		for _, f := range files {
			if net.ParseIP(f.Name()) != nil {
				out[n.Name()+"/"+f.Name()] = true
			}
		}
	}
	return out
}

// waitNewReservation polls (every millisecond, the CNI ADD takes tens)
// until an address not in before is reserved: the sandbox's network is
// being set up.
func waitNewReservation(before map[string]bool, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for ip := range ipamReservations() {
			if !before[ip] {
				return true
			}
		}
		time.Sleep(time.Millisecond)
	}
	return false
}

// violationSummary lists every violation recorded so far, one line each
// with the first line of its detail.
func (c *crashRun) violationSummary() string {
	vs, _ := c.w.since(0)
	if len(vs) == 0 {
		return "(none recorded: the test failed otherwise)"
	}
	var lines []string
	for _, v := range vs {
		detail, _, _ := strings.Cut(v.detail, "\n")
		lines = append(lines, fmt.Sprintf("cycle %d: %s (%s at %s): %.400s", v.cycle+1, v.kind, v.key, clock(v.at), detail))
	}
	return strings.Join(lines, "\n")
}

// report prints the counts of violations by kind and each violation,
// and fails the test if there is any, or if an exact kill point was
// never reached.
func (c *crashRun) report(cycles int, took time.Duration) {
	t := c.t
	vs, _ := c.w.since(0)
	counts := map[string]int{}
	inCycles := map[string]map[int]bool{}
	for _, v := range vs {
		counts[v.kind]++
		if inCycles[v.kind] == nil {
			inCycles[v.kind] = map[int]bool{}
		}
		inCycles[v.kind][v.cycle] = true
	}
	var modes []string
	for m := killAfterCreate; m <= killContainerdNetworking; m++ {
		modes = append(modes, fmt.Sprintf("%s: %d (missed %d)", m, c.fired[m], c.missed[m]))
	}
	t.Logf("%d cycles in %s; watcher: %s", cycles, took.Round(time.Second), c.w.stats())
	t.Logf("exact kill points reached: %s", strings.Join(modes, "; "))
	t.Logf("CRI calls through the proxy: %s", c.proxy.callCounts())
	kinds := []string{kindExclusive, kindBroken, kindEndState}
	var line []string
	for _, k := range kinds {
		line = append(line, fmt.Sprintf("%s: %d (in %d cycles)", k, counts[k], len(inCycles[k])))
	}
	t.Logf("violations by kind: %s", strings.Join(line, "; "))

	sort.SliceStable(vs, func(i, j int) bool { return slices.Index(kinds, vs[i].kind) < slices.Index(kinds, vs[j].kind) })
	for _, v := range vs {
		when := fmt.Sprintf("cycle %d", v.cycle+1)
		switch {
		case v.cycle >= cycles:
			when = "end"
		case v.cycle < 0:
			when = "before the cycles"
		}
		t.Errorf("%s (%s, %s at %s):\n%s", v.kind, when, v.key, clock(v.at), v.detail)
	}
	for m := killAfterCreate; m <= killContainerdNetworking; m++ {
		scheduled := false
		for i := range cycles {
			scheduled = scheduled || modeRotation[i%len(modeRotation)] == m
		}
		if scheduled && c.fired[m] == 0 {
			t.Errorf("the kill point %q was never reached", m)
		}
	}
	// The verdict means nothing unless the watcher actually looked.
	if c.w.samplesTaken() == 0 {
		t.Errorf("the watcher never got a sample: %s", c.w.stats())
	}
}
