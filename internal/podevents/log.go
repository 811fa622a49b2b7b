package podevents

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/kuberuntime"
)

// eventsPerPod bounds the ring of recent events kept for each pod.
const eventsPerPod = 50

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

// Log keeps a bounded ring of recent events per pod and logs each new
// one. It implements kuberuntime.Recorder.
type Log struct {
	clock clock.PassiveClock
	log   *slog.Logger
	limit int

	mu   sync.Mutex // guards pods
	pods map[types.UID][]Event
}

// New returns the event log to hand to both the runtime manager (as its
// kuberuntime.Recorder) and the sync loop.
func New(c clock.PassiveClock, log *slog.Logger) *Log {
	return &Log{clock: c, log: log, limit: eventsPerPod, pods: map[types.UID][]Event{}}
}

// Event records and logs one event; it never blocks on anything but the
// ring's mutex.
func (l *Log) Event(uid types.UID, podName, podNamespace string, typ kuberuntime.EventType, reason, message string) {
	now := l.clock.Now()
	l.mu.Lock()
	ring := l.pods[uid]
	if n := len(ring); n > 0 && ring[n-1].Type == typ && ring[n-1].Reason == reason && ring[n-1].Message == message {
		ring[n-1].Count++
		ring[n-1].LastSeen = now
		l.mu.Unlock()
		return
	}
	ring = append(ring, Event{Type: typ, Reason: reason, Message: message, Count: 1, FirstSeen: now, LastSeen: now})
	if len(ring) > l.limit {
		ring = append(ring[:0:0], ring[len(ring)-l.limit:]...)
	}
	l.pods[uid] = ring
	l.mu.Unlock()

	level := slog.LevelInfo
	if typ == kuberuntime.EventWarning {
		level = slog.LevelWarn
	}
	l.log.Log(context.Background(), level, message, "event", reason, "pod", podName, "namespace", podNamespace, "uid", uid)
}

// List returns a copy of uid's events, oldest first.
func (l *Log) List(uid types.UID) []Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Event(nil), l.pods[uid]...)
}

// Forget drops the events of a pod that is gone.
func (l *Log) Forget(uid types.UID) {
	l.mu.Lock()
	delete(l.pods, uid)
	l.mu.Unlock()
}

// GC drops rings whose newest event is older than an hour, so pods that were
// rejected and never had a lane do not keep events forever.
func (l *Log) GC() {
	cutoff := l.clock.Now().Add(-time.Hour)
	l.mu.Lock()
	defer l.mu.Unlock()
	for uid, ring := range l.pods {
		if len(ring) == 0 || ring[len(ring)-1].LastSeen.Before(cutoff) {
			delete(l.pods, uid)
		}
	}
}
