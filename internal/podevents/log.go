package podevents

import (
	"context"
	"log/slog"
	"sort"
	"sync"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/kuberuntime"
)

// eventsPerPod bounds the ring of recent events kept for each pod.
const eventsPerPod = 50

// maxMessage bounds an event's message, as the API server bounds an
// event's note (1 KiB): a runtime error can be long, and every event is
// kept in memory and on disk.
const maxMessage = 1024

// Event is one thing that happened to a pod, as the kubelet would have
// recorded it (Pulling, Started, BackOff, Killing, ...). A repeat of the
// newest event bumps its Count instead of taking a slot.
type Event struct {
	Type      kuberuntime.EventType `json:"type"`
	Reason    string                `json:"reason"`
	Message   string                `json:"message"`
	Count     int                   `json:"count"`
	FirstSeen time.Time             `json:"firstTimestamp"`
	LastSeen  time.Time             `json:"lastTimestamp"`
}

// Record is an event with the pod it happened to, and the sequence number
// of its last change: a watch sends what changed after the last number it
// sent.
type Record struct {
	UID       types.UID `json:"uid"`
	Name      string    `json:"name"`
	Namespace string    `json:"namespace"`
	Seq       uint64    `json:"-"`
	Event
}

// ring is one pod's recent events.
type ring struct {
	name, namespace string
	events          []Event
	seqs            []uint64 // seqs[i] is events[i]'s last change
}

// Log keeps a bounded ring of recent events per pod and logs each new
// one. It implements kuberuntime.Recorder. With a state directory, Run
// keeps the events on disk across restarts (see persist.go).
type Log struct {
	clock clock.PassiveClock
	log   *slog.Logger
	limit int
	dir   string // "" keeps events in memory only

	mu   sync.Mutex // guards pods and seq
	pods map[types.UID]*ring
	seq  uint64 // the last sequence number given
	// changed fires on every event recorded or bumped: the API's event
	// watches wait on it.
	changed signal
	// dirty has a pending signal that the events changed since Run last
	// wrote them.
	dirty chan struct{}
}

// Options are what a Log is built with.
type Options struct {
	Clock  clock.PassiveClock
	Logger *slog.Logger
	// StateDir, when set, is where Run keeps the events across restarts;
	// Open reads what an earlier berth left there.
	StateDir string
}

// New returns the event log to hand to both the runtime manager (as its
// kuberuntime.Recorder) and the sync loop, keeping events in memory only.
func New(c clock.PassiveClock, log *slog.Logger) *Log {
	return Open(Options{Clock: c, Logger: log})
}

// Open returns the event log with the events an earlier berth kept in
// opts.StateDir, if any: an unreadable, corrupt or foreign file is
// ignored with a warning and replaced at the next write.
func Open(opts Options) *Log {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	l := &Log{clock: opts.Clock, log: opts.Logger, limit: eventsPerPod, dir: opts.StateDir,
		pods: map[types.UID]*ring{}, dirty: make(chan struct{}, 1)}
	if l.dir != "" {
		l.load()
	}
	return l
}

// Event records and logs one event; it never blocks on anything but the
// ring's mutex.
func (l *Log) Event(uid types.UID, podName, podNamespace string, typ kuberuntime.EventType, reason, message string) {
	now := l.clock.Now()
	stored := truncate(message)
	l.mu.Lock()
	r := l.pods[uid]
	if r == nil {
		r = &ring{}
		l.pods[uid] = r
	}
	r.name, r.namespace = podName, podNamespace
	l.seq++
	if n := len(r.events); n > 0 && r.events[n-1].Type == typ && r.events[n-1].Reason == reason && r.events[n-1].Message == stored {
		r.events[n-1].Count++
		r.events[n-1].LastSeen = now
		r.seqs[n-1] = l.seq
		l.mu.Unlock()
		l.touched()
		return
	}
	r.events = append(r.events, Event{Type: typ, Reason: reason, Message: stored, Count: 1, FirstSeen: now, LastSeen: now})
	r.seqs = append(r.seqs, l.seq)
	if len(r.events) > l.limit {
		r.events = append(r.events[:0:0], r.events[len(r.events)-l.limit:]...)
		r.seqs = append(r.seqs[:0:0], r.seqs[len(r.seqs)-l.limit:]...)
	}
	l.mu.Unlock()
	l.touched()

	level := slog.LevelInfo
	if typ == kuberuntime.EventWarning {
		level = slog.LevelWarn
	}
	l.log.Log(context.Background(), level, message, "event", reason, "pod", podName, "namespace", podNamespace, "uid", uid)
}

// truncate cuts a message to maxMessage bytes on a rune boundary.
func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}

// touched wakes the watches and Run; it never blocks.
func (l *Log) touched() {
	l.changed.fire()
	select {
	case l.dirty <- struct{}{}:
	default:
	}
}

// List returns a copy of uid's events, oldest first.
func (l *Log) List(uid types.UID) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	if r := l.pods[uid]; r != nil {
		return append([]Event(nil), r.events...)
	}
	return nil
}

// All returns every pod's events with their pods, oldest first (by their
// first time, then pod).
func (l *Log) All() []Record {
	l.mu.Lock()
	var out []Record
	for uid, r := range l.pods {
		for i, e := range r.events {
			out = append(out, Record{UID: uid, Name: r.name, Namespace: r.namespace, Seq: r.seqs[i], Event: e})
		}
	}
	l.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.FirstSeen.Equal(b.FirstSeen) {
			return a.FirstSeen.Before(b.FirstSeen)
		}
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Seq < b.Seq
	})
	return out
}

// Changed returns a channel closed at the next event recorded or bumped:
// take it before All, then wait on it.
func (l *Log) Changed() <-chan struct{} { return l.changed.c() }

// Forget drops the events of a pod that is gone.
func (l *Log) Forget(uid types.UID) {
	l.mu.Lock()
	_, ok := l.pods[uid]
	delete(l.pods, uid)
	l.mu.Unlock()
	if ok {
		l.touched()
	}
}

// GC drops rings whose newest event is older than an hour, so pods that were
// rejected and never had a lane do not keep events forever.
func (l *Log) GC() {
	cutoff := l.clock.Now().Add(-time.Hour)
	l.mu.Lock()
	dropped := false
	for uid, r := range l.pods {
		if len(r.events) == 0 || r.events[len(r.events)-1].LastSeen.Before(cutoff) {
			delete(l.pods, uid)
			dropped = true
		}
	}
	l.mu.Unlock()
	if dropped {
		l.touched()
	}
}

// signal is podstatus.Signal's rule for this leaf-side package: c returns
// a channel closed at the next fire, which replaces it at once.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func (s *signal) c() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

func (s *signal) fire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
	}
	s.ch = make(chan struct{})
}
