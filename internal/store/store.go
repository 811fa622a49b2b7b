package store

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"

	"github.com/berth-agent/berth/internal/podrules"
	"github.com/berth-agent/berth/internal/podsnapshot"
	"github.com/berth-agent/berth/internal/podspec"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
)

// updatesBuffer lets sources run ahead of a busy agent for a while before
// they block.
const updatesBuffer = 64

// Store merges per-source snapshots into the ordered, incremental stream of
// PodUpdates the agent consumes, and remembers the current pods and problems
// of every source for the agent's API.
//
// Apply may be called from several goroutines (one per source); updates are
// delivered in the order the snapshots were merged. Pods, Problems and
// SourcesReady never wait for the agent to read Updates.
type Store struct {
	clock   clock.PassiveClock
	updates chan PodUpdate

	// sending is held by the one Apply call that drains pending into the
	// channel, so updates leave in the order they were queued.
	sending sync.Mutex

	// mu guards everything below.
	mu        sync.Mutex
	required  []string
	delivered map[string]bool
	pods      map[string]map[types.UID]*v1.Pod // source -> UID -> pod as last emitted
	// inputs holds the pods as the source last sent them: sources resend
	// the same object for an unchanged manifest, and pointer equality
	// spares the deep comparison of every pod on every snapshot.
	inputs map[string]map[types.UID]*v1.Pod
	// offered holds every source's last snapshot of pods, accepted or
	// not: a pod refused because another source has its UID is accepted
	// once that one goes, without waiting for its own source to resend.
	offered map[string][]*v1.Pod
	// offeredObjects holds every source's last snapshot of objects, and
	// objects those of the pods accepted, by UID: an edit of a ConfigMap
	// is an update of the pods that use it.
	offeredObjects map[string]map[types.UID]*podsnapshot.PodObjects
	objects        map[types.UID]*podsnapshot.PodObjects
	problems       map[string][]podspec.Problem // source -> its current problems
	warnings       map[string][]podspec.Problem // source -> its snapshot's Warnings
	versions       map[string]string            // source -> podsnapshot.Snapshot.Version
	// conflicts are the DuplicateUID problems across sources, recomputed
	// on every merge.
	conflicts []podspec.Problem
	// clashes are the HostPortConflict warnings between pods of
	// different sources, recomputed on every merge; within a source the
	// snapshot has them already.
	clashes []podspec.Problem
	pending []PodUpdate // merged, not yet handed to the channel
	// changed is closed, and replaced, after every merge: the problems
	// (and so the refused manifests the API shows as pods) may have
	// changed without any update. The API's watches wait on it.
	changed chan struct{}

	// applied counts the Apply calls that returned: a test waits on it to
	// know a source's snapshot was merged and its updates queued, before
	// it asserts that nothing changed.
	applied atomic.Int64
}

// New returns a store whose SourcesReady waits for every named source
// (podspec.SourceFile, podspec.SourceHTTP) to deliver a snapshot. It stamps
// kubernetes.io/config.seen with the real clock.
func New(sources ...string) *Store {
	return NewWithClock(clock.RealClock{}, sources...)
}

// NewWithClock is New with the clock that stamps
// kubernetes.io/config.seen, for tests.
func NewWithClock(c clock.PassiveClock, sources ...string) *Store {
	return &Store{
		clock:          c,
		updates:        make(chan PodUpdate, updatesBuffer),
		required:       append([]string(nil), sources...),
		delivered:      make(map[string]bool),
		pods:           make(map[string]map[types.UID]*v1.Pod),
		inputs:         make(map[string]map[types.UID]*v1.Pod),
		offered:        make(map[string][]*v1.Pod),
		offeredObjects: make(map[string]map[types.UID]*podsnapshot.PodObjects),
		objects:        make(map[types.UID]*podsnapshot.PodObjects),
		problems:       make(map[string][]podspec.Problem),
		warnings:       make(map[string][]podspec.Problem),
		versions:       make(map[string]string),
		changed:        make(chan struct{}),
	}
}

// Changed returns a channel closed after the next merge of a snapshot:
// take it before reading Problems, then wait on it.
func (s *Store) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// Updates is the ordered stream of changes. The agent must be its only
// reader; the channel is never closed.
// Applied is how many Apply calls have returned: a test of a source
// waits on it to know its snapshot was merged and its updates queued,
// before it asserts that nothing changed.
func (s *Store) Applied() int64 { return s.applied.Load() }

func (s *Store) Updates() <-chan PodUpdate { return s.updates }

// SourcesReady reports whether every source named in New has delivered
// at least one snapshot that was not Failed. Until then the agent must not
// treat unknown runtime pods as orphans.
func (s *Store) SourcesReady() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, src := range s.required {
		if !s.delivered[src] {
			return false
		}
	}
	return true
}

// Problems returns the current problems of all sources, ordered by source,
// origin and line, so listings are stable.
func (s *Store) Problems() []podspec.Problem {
	s.mu.Lock()
	var out []podspec.Problem
	for _, ps := range s.problems {
		out = append(out, ps...)
	}
	out = append(out, s.conflicts...)
	s.mu.Unlock()
	sortProblems(out)
	return out
}

// Warnings returns the current warnings of every source's snapshot
// (podsnapshot.Snapshot.Warnings): pods that run with a field berth ignores or
// a host port another pod claims too.
func (s *Store) Warnings() []podspec.Problem {
	s.mu.Lock()
	var out []podspec.Problem
	for _, ws := range s.warnings {
		out = append(out, ws...)
	}
	out = append(out, s.clashes...)
	s.mu.Unlock()
	sortProblems(out)
	return out
}

// Versions returns each source's podsnapshot.Snapshot.Version, for sources that have
// one.
func (s *Store) Versions() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.versions))
	for src, v := range s.versions {
		if v != "" {
			out[src] = v
		}
	}
	return out
}

// Pods returns the current desired pods of all sources, ordered by
// namespace, name and UID. The agent must not modify them.
func (s *Store) Pods() []*v1.Pod {
	s.mu.Lock()
	var out []*v1.Pod
	for _, byUID := range s.pods {
		for _, p := range byUID {
			out = append(out, p)
		}
	}
	s.mu.Unlock()
	SortPods(out)
	return out
}

// PodObjects returns the ConfigMaps and Secrets the pod with uid
// references, as of the last update the store queued for it; nil when it
// has none or is unknown. The caller must not modify them.
func (s *Store) PodObjects(uid types.UID) *podsnapshot.PodObjects {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.objects[uid]
}

// Apply merges one snapshot and hands the resulting updates to Updates(),
// waiting for room in the channel. It returns ctx.Err() if ctx ends first;
// the unsent updates stay queued for the next Apply.
func (s *Store) Apply(ctx context.Context, snap podsnapshot.Snapshot) error {
	defer s.applied.Add(1)
	s.mu.Lock()
	s.merge(snap)
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	return s.flush(ctx)
}

// merge diffs snap against what was last emitted and queues the updates:
// removals first so the agent can start stopping a pod before its
// replacement with the same full name arrives. A UID may run from one
// source only (the agent knows pods by UID, so a second source's copy
// would be stopped with the first): sources take precedence in name order
// (file before http) whatever order they delivered in, and the other
// source's pod is refused with a DuplicateUID problem. When the owner
// changes, the pod moves over as an update, without a stop. s.mu must be
// held.
func (s *Store) merge(snap podsnapshot.Snapshot) {
	sources := s.takeSnapshot(snap)
	owner, accepted := s.assignOwners(sources)
	s.clashes = crossSourceClashes(sources, accepted)
	before := s.emitted()
	q := updateQueue{}
	objects := make(map[types.UID]*podsnapshot.PodObjects, len(s.objects))
	for _, src := range sources {
		s.diffSource(src, accepted[src], before, q, objects)
	}
	s.objects = objects
	for uid, prev := range before {
		if _, ok := owner[uid]; !ok {
			q.add(OpRemove, prev.src, prev.pod)
		}
	}
	for _, op := range []Op{OpRemove, OpAdd, OpUpdate, OpReconcile} {
		for _, src := range sources {
			if pods := q[op][src]; len(pods) > 0 {
				SortPods(pods)
				s.pending = append(s.pending, PodUpdate{Op: op, Source: src, Pods: pods})
			}
		}
	}
}

// takeSnapshot records what snap offers and returns every source that
// offered anything, in name order. s.mu must be held.
func (s *Store) takeSnapshot(snap podsnapshot.Snapshot) []string {
	s.problems[snap.Source] = append([]podspec.Problem(nil), snap.Problems...)
	s.warnings[snap.Source] = append([]podspec.Problem(nil), snap.Warnings...)
	s.versions[snap.Source] = snap.Version
	if !snap.Failed {
		s.delivered[snap.Source] = true
	}
	s.offered[snap.Source] = snap.Pods
	s.offeredObjects[snap.Source] = snap.Objects
	sources := make([]string, 0, len(s.offered))
	for src := range s.offered {
		sources = append(sources, src)
	}
	sort.Strings(sources)
	return sources
}

// owned is the source a UID runs from, and its pod there.
type owned struct {
	src string
	pod *v1.Pod
}

// assignOwners decides who owns each UID now, sources in the order given,
// and records the other sources' copies as conflicts. A UID twice in one
// source is the source's own business (assemble reports it); the first
// copy counts. accepted are each source's pods it owns. s.mu must be held.
func (s *Store) assignOwners(sources []string) (owner map[types.UID]owned, accepted map[string][]*v1.Pod) {
	owner = map[types.UID]owned{}
	accepted = map[string][]*v1.Pod{}
	s.conflicts = nil
	for _, src := range sources {
		for _, p := range s.offered[src] {
			first, taken := owner[p.UID]
			switch {
			case !taken:
				owner[p.UID] = owned{src, p}
				accepted[src] = append(accepted[src], p)
			case first.src != src:
				s.conflicts = append(s.conflicts, duplicateUID(src, p, first.src, first.pod))
			}
		}
	}
	return owner, accepted
}

// crossSourceClashes warns of each host port a pod claims that a pod of
// an earlier source (in the order given: file before http) claims too, as
// podsnapshot warns within one source: both pods run, and the later says
// so. The line of the claim is the source's to know; the warning names
// the field and the other pod's origin.
func crossSourceClashes(sources []string, accepted map[string][]*v1.Pod) []podspec.Problem {
	type claim struct {
		port podrules.HostPort
		src  string
		pod  *v1.Pod
	}
	var out []podspec.Problem
	var claimed []claim
	for _, src := range sources {
		for _, p := range accepted[src] {
			ports := podrules.HostPorts(p)
			for _, h := range ports {
				for _, c := range claimed {
					if c.src != src && c.port.Clashes(h) {
						out = append(out, podspec.Problem{Source: src, Origin: p.Annotations[podspec.AnnotationOrigin], Field: h.Field,
							Reason: podspec.ReasonHostPortConflict, Name: p.Name, Namespace: p.Namespace,
							Message: fmt.Sprintf("hostPort %s clashes with %s of pod %q from %s: both pods run, but only one can hold the port",
								h, c.port, c.pod.Name, c.pod.Annotations[podspec.AnnotationOrigin])})
						break
					}
				}
			}
			for _, h := range ports {
				claimed = append(claimed, claim{port: h, src: src, pod: p})
			}
		}
	}
	return out
}

// emittedPod is a pod emitted before: its source, the pod as emitted,
// and the pod as the source offered it.
type emittedPod struct {
	src       string
	pod, from *v1.Pod
}

// emitted is what was emitted before, by UID, whichever source it came
// from. s.mu must be held.
func (s *Store) emitted() map[types.UID]emittedPod {
	before := map[types.UID]emittedPod{}
	for src, byUID := range s.pods {
		for uid, p := range byUID {
			before[uid] = emittedPod{src, p, s.inputs[src][uid]}
		}
	}
	return before
}

// updateQueue holds the updates one merge queues, by op and source.
type updateQueue map[Op]map[string][]*v1.Pod

func (q updateQueue) add(op Op, src string, p *v1.Pod) {
	if q[op] == nil {
		q[op] = map[string][]*v1.Pod{}
	}
	q[op][src] = append(q[op][src], p)
}

// diffSource diffs the pods src owns now (pods) against what was emitted
// before, queues their adds, updates and reconciles into q, collects
// their objects into objects, and keeps them as src's emitted pods.
// s.mu must be held.
func (s *Store) diffSource(src string, pods []*v1.Pod, before map[types.UID]emittedPod, q updateQueue, objects map[types.UID]*podsnapshot.PodObjects) {
	cur := make(map[types.UID]*v1.Pod, len(pods))
	inputs := make(map[types.UID]*v1.Pod, len(pods))
	for _, p := range pods {
		inputs[p.UID] = p
		prev, ok := before[p.UID]
		objs := s.offeredObjects[src][p.UID]
		sameObjects := podsnapshot.EqualObjects(s.objects[p.UID], objs)
		if objs != nil {
			objects[p.UID] = objs
		}
		switch {
		case !ok:
			p = s.stampSeen(p, "")
			q.add(OpAdd, src, p)
		case prev.from == p && sameObjects:
			p = prev.pod
		case !sameObjects || differSemantically(prev.pod, p):
			p = s.stampSeen(p, prev.pod.Annotations[podspec.AnnotationSeen])
			q.add(OpUpdate, src, p)
		case !equalBookkeeping(prev.pod, p):
			p = s.stampSeen(p, prev.pod.Annotations[podspec.AnnotationSeen])
			q.add(OpReconcile, src, p)
		default:
			p = prev.pod
		}
		cur[p.UID] = p
	}
	s.pods[src], s.inputs[src] = cur, inputs
}

// duplicateUID is the problem of pod p of source src, refused because the
// pod first of source owner has its UID.
func duplicateUID(src string, p *v1.Pod, owner string, first *v1.Pod) podspec.Problem {
	return podspec.Problem{Source: src, Origin: p.Annotations[podspec.AnnotationOrigin], Field: "metadata.uid",
		Reason: podsnapshot.ReasonDuplicateUID, Name: p.Name, Namespace: p.Namespace,
		Message: fmt.Sprintf("uid %q is also used by pod %q of the %s source (%s), which takes precedence; "+
			"this one is ignored until that one is removed", p.UID, first.Name, owner, first.Annotations[podspec.AnnotationOrigin])}
}

// flush hands pending updates to the channel in order. Only one caller
// drains at a time, and s.mu is not held while waiting on the agent, so
// Pods and Problems stay answerable.
func (s *Store) flush(ctx context.Context) error {
	s.sending.Lock()
	defer s.sending.Unlock()
	for {
		s.mu.Lock()
		if len(s.pending) == 0 {
			s.mu.Unlock()
			return nil
		}
		u := s.pending[0]
		s.mu.Unlock()
		select {
		case s.updates <- u:
		case <-ctx.Done():
			return ctx.Err()
		}
		s.mu.Lock()
		s.pending = s.pending[1:]
		s.mu.Unlock()
	}
}

// stampSeen returns a copy of p carrying kubernetes.io/config.seen: seen when
// the UID is already known (so a re-read never looks like a change), the
// store's current time otherwise. Sources never set it.
func (s *Store) stampSeen(p *v1.Pod, seen string) *v1.Pod {
	p = p.DeepCopy()
	if seen == "" {
		seen = s.clock.Now().UTC().Format(podspec.TimeFormatSeen)
	}
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations[podspec.AnnotationSeen] = seen
	return p
}

// differSemantically reports a change the agent must act on: identity, spec,
// labels or any annotation except berth's bookkeeping ones.
func differSemantically(a, b *v1.Pod) bool {
	return a.Name != b.Name || a.Namespace != b.Namespace ||
		!equality.Semantic.DeepEqual(a.Spec, b.Spec) ||
		!equality.Semantic.DeepEqual(a.Labels, b.Labels) ||
		!equality.Semantic.DeepEqual(withoutBookkeeping(a.Annotations), withoutBookkeeping(b.Annotations))
}

// equalBookkeeping compares the annotations that never restart a pod (where
// it was read from), so a manifest moved to another file with a fixed
// metadata.uid becomes a RECONCILE.
func equalBookkeeping(a, b *v1.Pod) bool {
	return a.Annotations[podspec.AnnotationOrigin] == b.Annotations[podspec.AnnotationOrigin]
}

// withoutBookkeeping drops the annotations equalBookkeeping and the store
// own, leaving those that describe what to run.
func withoutBookkeeping(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		if k != podspec.AnnotationSeen && k != podspec.AnnotationOrigin {
			out[k] = v
		}
	}
	return out
}

// SortPods orders pods by namespace, name, then UID: the order of Pods()
// and of every listing of pods berth prints, so output is stable.
func SortPods(pods []*v1.Pod) {
	sort.Slice(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.UID < b.UID
	})
}

func sortProblems(ps []podspec.Problem) {
	sort.SliceStable(ps, func(i, j int) bool {
		a, b := ps[i], ps[j]
		if a.Source != b.Source {
			return a.Source < b.Source
		}
		if a.Origin != b.Origin {
			return a.Origin < b.Origin
		}
		return a.Line < b.Line
	})
}
