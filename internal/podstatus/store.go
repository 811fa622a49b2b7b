package podstatus

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/store"
)

// Store keeps the latest v1.Pod (spec and status) of every pod berth
// knows, for the local API, the CLI, metrics and sd_notify's STATUS line.
// Pods handed in are never modified afterwards: readers share them.
type Store struct {
	mu   sync.RWMutex // guards pods and deleting
	pods map[types.UID]*v1.Pod
	// deleting holds when berth began stopping a removed pod; it is stamped
	// on every later status of the pod, as an API server's
	// deletionTimestamp, so readers show it Terminating.
	deleting map[types.UID]deletion
	// phases has room for one pending signal that some pod's phase
	// changed, or a pod came or went: the sync loop then refreshes the
	// STATUS= line at once instead of at its next housekeeping tick.
	phases chan struct{}
	// changed fires on every change a reader of the pods could see: a
	// status that differs, a pod that came or went, a deletion stamped.
	// The API's watches wait on it.
	changed Signal
}

type deletion struct {
	at    metav1.Time
	grace *int64
}

// NewStore returns an empty store.
func NewStore() *Store {
	return &Store{pods: map[types.UID]*v1.Pod{}, deleting: map[types.UID]deletion{}, phases: make(chan struct{}, 1)}
}

// Set records pod with st as its status. The desired pod itself is shared
// with the merge store, so a shallow copy carries the status.
func (s *Store) Set(pod *v1.Pod, st v1.PodStatus) {
	cp := *pod
	cp.Status = st
	s.mu.Lock()
	if d, ok := s.deleting[pod.UID]; ok {
		cp.DeletionTimestamp, cp.DeletionGracePeriodSeconds = &d.at, d.grace
	}
	old, ok := s.pods[pod.UID]
	s.pods[pod.UID] = &cp
	s.mu.Unlock()
	if !ok || old.Status.Phase != st.Phase {
		s.phaseChanged()
	}
	// Workers set the same status on every resync: only a change wakes
	// the watches, which would otherwise relist every pod for nothing.
	// An edit of a static pod changes its UID, so the metadata and the
	// status say everything a watch shows.
	if !ok || !equality.Semantic.DeepEqual(old.Status, st) || !equality.Semantic.DeepEqual(old.ObjectMeta, cp.ObjectMeta) {
		s.changed.Fire()
	}
}

// Changed returns a channel closed at the next change of a pod, its status
// or its deletion: take it before reading the pods, then wait on it.
func (s *Store) Changed() <-chan struct{} { return s.changed.C() }

// Phases has a signal when some pod's phase changed, or a pod came or
// went, since the sync loop last received from it.
func (s *Store) Phases() <-chan struct{} { return s.phases }

// phaseChanged signals the sync loop without ever blocking a worker.
func (s *Store) phaseChanged() {
	select {
	case s.phases <- struct{}{}:
	default:
	}
}

// MarkDeleting records that the pod of uid is being stopped because its
// source dropped it, with the grace period it gets.
func (s *Store) MarkDeleting(uid types.UID, at time.Time, grace *int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := deletion{at: metav1.NewTime(at), grace: grace}
	s.deleting[uid] = d
	if p, ok := s.pods[uid]; ok {
		cp := *p
		cp.DeletionTimestamp, cp.DeletionGracePeriodSeconds = &d.at, d.grace
		s.pods[uid] = &cp
	}
	s.changed.Fire()
}

// Get returns the pod of uid, or nil.
func (s *Store) Get(uid types.UID) *v1.Pod {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.pods[uid]
}

// Delete forgets the pod of uid.
func (s *Store) Delete(uid types.UID) {
	s.mu.Lock()
	_, ok := s.pods[uid]
	delete(s.pods, uid)
	delete(s.deleting, uid)
	s.mu.Unlock()
	if ok {
		s.phaseChanged()
		s.changed.Fire()
	}
}

// Named returns the pods of namespace/name, in no order.
func (s *Store) Named(namespace, name string) []*v1.Pod {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var out []*v1.Pod
	for _, p := range s.pods {
		if p.Name == name && p.Namespace == namespace {
			out = append(out, p)
		}
	}
	return out
}

// List returns every pod sorted by namespace and name, then UID, so output
// is stable.
func (s *Store) List() []*v1.Pod {
	s.mu.RLock()
	out := make([]*v1.Pod, 0, len(s.pods))
	for _, p := range s.pods {
		out = append(out, p)
	}
	s.mu.RUnlock()
	store.SortPods(out)
	return out
}
