package podsapi

import (
	"crypto/sha256"
	"errors"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	podsv1alpha1 "k8s.io/kubelet/pkg/apis/pods/v1alpha1"
)

// watchedPod is what a watch remembers of a pod it sent: the hash of its
// encoding, to tell a change, and its identity, for its DELETED event.
type watchedPod struct {
	sum             [sha256.Size]byte
	name, namespace string
}

// errStalled ends a watch whose client left an event unread for sendGrace.
var errStalled = errors.New("the client does not read its watch")

// WatchPods sends every pod as ADDED, then INITIAL_SYNC_COMPLETE, then,
// each time the pods change, a DELETED, ADDED or MODIFIED for every pod
// that differs from what this watch last sent: DELETED first (with the
// pod's name, namespace and UID only, as the kubelet's), then ADDED and
// MODIFIED by UID.
//
// Nothing is queued per watch: a change while the client is slow is
// folded into the next relist, so a watch holds one pod's encoding and a
// hash per pod, whatever happens. A client that leaves an event unread
// for sendGrace is dropped (ResourceExhausted, as the kubelet ends a
// watch it dropped), and at most maxWatches are served at once.
func (s *Server) WatchPods(_ *podsv1alpha1.WatchPodsRequest, stream podsv1alpha1.Pods_WatchPodsServer) error {
	select {
	case s.watches <- struct{}{}:
		defer func() { <-s.watches }()
	default:
		return status.Errorf(codes.ResourceExhausted, "too many watches are being served (%d at once): close some and retry", cap(s.watches))
	}
	ctx := stream.Context()
	out := startSender(stream, s.sendGrace)
	stalled := false
	defer func() { out.stop(!stalled) }()
	sent := map[types.UID]watchedPod{}
	for first := true; ; first = false {
		changed := s.pods.Changed()
		var pods []*v1.Pod
		if err := s.withPods(ctx, func(p []*v1.Pod) error { pods = p; return nil }); err != nil {
			return err
		}
		err := sendChanges(out.send, sent, pods)
		if err == nil && first {
			err = out.send(&podsv1alpha1.WatchPodsEvent{Type: podsv1alpha1.EventType_INITIAL_SYNC_COMPLETE})
		}
		if errors.Is(err, errStalled) {
			stalled = true
			s.log.Info("dropping a pods API watch: the client does not read it", "grace", s.sendGrace)
			return status.Errorf(codes.ResourceExhausted, "watch dropped: an event was left unread for %s", s.sendGrace)
		}
		if err != nil {
			return err
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return status.FromContextError(ctx.Err()).Err()
		}
	}
}

// sendChanges sends the events that take a watch from sent to pods
// (sorted by UID), one encoding at a time, and updates sent.
func sendChanges(send func(*podsv1alpha1.WatchPodsEvent) error, sent map[types.UID]watchedPod, pods []*v1.Pod) error {
	now := make(map[types.UID]bool, len(pods))
	for _, p := range pods {
		now[p.UID] = true
	}
	var gone []types.UID
	for uid := range sent {
		if !now[uid] {
			gone = append(gone, uid)
		}
	}
	slices.Sort(gone)
	for _, uid := range gone {
		old := sent[uid]
		delete(sent, uid)
		stub := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: old.name, Namespace: old.namespace, UID: uid}}
		data, err := stub.Marshal()
		if err != nil {
			return status.Errorf(codes.Internal, "encode pod %s/%s (uid %s): %v", old.namespace, old.name, uid, err)
		}
		if err := send(&podsv1alpha1.WatchPodsEvent{Type: podsv1alpha1.EventType_DELETED, Pod: data}); err != nil {
			return err
		}
	}
	for _, p := range pods {
		data, err := marshal(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(data)
		old, seen := sent[p.UID]
		if seen && old.sum == sum {
			continue
		}
		sent[p.UID] = watchedPod{sum: sum, name: p.Name, namespace: p.Namespace}
		typ := podsv1alpha1.EventType_ADDED
		if seen {
			typ = podsv1alpha1.EventType_MODIFIED
		}
		if err := send(&podsv1alpha1.WatchPodsEvent{Type: typ, Pod: data}); err != nil {
			return err
		}
	}
	return nil
}

// sender sends a watch's events from a goroutine of its own. gRPC's Send
// blocks while the client leaves its flow-control window full, and only
// the end of the handler (which cancels the stream) unblocks it: the
// handler waits for each send at most grace, then gives up and returns.
type sender struct {
	stream podsv1alpha1.Pods_WatchPodsServer
	grace  time.Duration
	events chan *podsv1alpha1.WatchPodsEvent
	// errs has room for the result of the send in flight, so the
	// goroutine never blocks on a handler that gave up on it.
	errs chan error
	done chan struct{} // closed when the goroutine ends
}

func startSender(stream podsv1alpha1.Pods_WatchPodsServer, grace time.Duration) *sender {
	w := &sender{stream: stream, grace: grace, events: make(chan *podsv1alpha1.WatchPodsEvent), errs: make(chan error, 1), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for ev := range w.events {
			w.errs <- w.stream.Send(ev)
		}
	}()
	return w
}

// send hands ev to the goroutine, idle since the previous send returned,
// and waits for it to be sent, at most grace: errStalled after that.
func (w *sender) send(ev *podsv1alpha1.WatchPodsEvent) error {
	w.events <- ev
	t := time.NewTimer(w.grace)
	defer t.Stop()
	select {
	case err := <-w.errs:
		return err
	case <-t.C:
		return errStalled
	}
}

// stop ends the goroutine; wait says to wait for it, which a handler that
// gave up on a blocked send must not do: the send returns once the
// handler has.
func (w *sender) stop(wait bool) {
	close(w.events)
	if wait {
		<-w.done
	}
}
