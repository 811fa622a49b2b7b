package gc

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/podplan"
)

// Policy is the kubelet's container GC policy (ContainerGCPolicy), from
// --minimum-container-ttl-duration, --maximum-dead-containers-per-container
// and --maximum-dead-containers.
type Policy struct {
	// MinAge is how long after its creation a dead container is left alone;
	// zero for no limit.
	MinAge time.Duration
	// MaxPerPodContainer caps the dead containers of one (pod UID,
	// container name) evict unit; below zero for no limit.
	MaxPerPodContainer int
	// MaxContainers caps the dead containers of all pods; below zero for no
	// limit. It is spread evenly over the evict units, at least one each.
	MaxContainers int
}

// DefaultPolicy is the kubelet's default policy: no minimum age, one dead
// container per evict unit, no global cap.
var DefaultPolicy = Policy{MinAge: 0, MaxPerPodContainer: 1, MaxContainers: -1}

// createdGrace is how long a container that was created but never started
// is left alone in a pod that still exists: its pod worker may be between
// CreateContainer and StartContainer.
const createdGrace = time.Minute

// GC removal kinds, the label of berth_container_gc_removed_total.
const (
	KindContainer = "container"
	KindSandbox   = "sandbox"
	KindPodLogDir = "pod_log_dir"
	KindPodDir    = "pod_dir"
)

// Why a container or sandbox is collected, for logs and events.
const (
	ReasonDeletedPod  = "pod deleted"
	ReasonPerUnitCap  = "maximum-dead-containers-per-container"
	ReasonGlobalCap   = "maximum-dead-containers"
	ReasonInitPruned  = "older run of an init container"
	ReasonOldSandbox  = "not the newest sandbox"
	ReasonLeftoverDir = "pod no longer exists"
)

// Input is what one container GC pass decides on: the agent's latest
// relist snapshot and what it knows of each pod.
type Input struct {
	// Pods is a relist result (Manager.Relist); it is not modified.
	Pods   map[types.UID]*podplan.PodStatus
	Policy Policy
	// AllSourcesReady is set once every pod source has delivered: before
	// that a pod no source mentions may simply not have been read yet, so
	// no pod counts as deleted.
	AllSourcesReady bool
	Now             time.Time
	// PodDeleted reports a pod no source asks for and no pod worker
	// handles; consulted only when AllSourcesReady.
	PodDeleted func(types.UID) bool
	// InitContainers are the init container names of each pod that still
	// exists; their units keep only their newest run, as the kubelet's
	// pruneInitContainersBeforeStart does.
	InitContainers map[types.UID][]string
}

// Removal is one object a GC pass removed (or, in a plan, will remove).
type Removal struct {
	Kind      string // GCKind*
	UID       types.UID
	Pod       string // pod name
	Namespace string
	// Container is the container name (containers only).
	Container string
	// ID is the runtime ID (containers and sandboxes) or the directory.
	ID     string
	Reason string // GCReason*
	// PodExists is false for a pod no source asks for any more.
	PodExists bool
}

// gcCandidate is one dead container in an evict unit.
type gcCandidate struct {
	status    *podplan.ContainerStatus
	pod       *podplan.PodStatus
	protected bool // the unit's newest run, kept for logs --previous
}

// evictUnit is the kubelet's key of dead containers: one container name of
// one pod.
type evictUnit struct {
	uid  types.UID
	name string
}

// PlanContainerGC decides which dead containers to remove, with the
// kubelet's evictContainers semantics: running containers and those younger
// than MinAge are never candidates; the rest are grouped in evict units,
// newest first; deleted pods lose every dead container once all sources
// are ready; then MaxPerPodContainer is enforced per unit, then
// MaxContainers by an even share per unit (at least one) and, if still
// over, oldest first across units. berth departs from the kubelet in two
// ways that matter on an appliance: the newest dead container of each unit
// of a pod that still exists is never removed, so `berth logs --previous`
// and the pod's last termination state survive any cap; and a container
// that was created but never started is left for createdGrace, since its
// worker may be about to start it. The result is ordered for removal:
// oldest first within each reason.
func PlanContainers(in Input) []Removal {
	units := map[evictUnit][]gcCandidate{}
	newestGC := in.Now.Add(-in.Policy.MinAge)
	for uid, p := range in.Pods {
		deleted := in.AllSourcesReady && in.PodDeleted != nil && in.PodDeleted(uid)
		// p.Containers is newest first, so the first dead run of each
		// name is the one to protect.
		seen := map[string]bool{}
		for _, c := range p.Containers {
			if c.State == podplan.ContainerStateRunning || !podplan.Owned(c.Labels) {
				continue
			}
			if !deleted && c.State == podplan.ContainerStateCreated && in.Now.Sub(c.CreatedAt) < createdGrace {
				continue
			}
			first := !seen[c.Name]
			seen[c.Name] = true
			if in.Policy.MinAge > 0 && c.CreatedAt.After(newestGC) {
				continue
			}
			key := evictUnit{uid: uid, name: c.Name}
			units[key] = append(units[key], gcCandidate{status: c, pod: p, protected: first && !deleted})
		}
	}
	for _, u := range units {
		sortNewestFirst(u)
	}

	var out []Removal
	remove := func(cands []gcCandidate, reason string) {
		for _, c := range cands {
			out = append(out, Removal{
				Kind: KindContainer, UID: c.pod.UID, Pod: c.pod.Name, Namespace: c.pod.Namespace,
				Container: c.status.Name, ID: c.status.ID, Reason: reason, PodExists: reason != ReasonDeletedPod,
			})
		}
	}
	// Deleted pods first, in a stable order so a plan reads the same
	// every time.
	for _, key := range sortedUnits(units) {
		if in.AllSourcesReady && in.PodDeleted != nil && in.PodDeleted(key.uid) {
			remove(oldestFirst(units[key]), ReasonDeletedPod)
			delete(units, key)
		}
	}
	// Init containers keep only their newest run.
	for _, key := range sortedUnits(units) {
		if slices.Contains(in.InitContainers[key.uid], key.name) {
			var gone []gcCandidate
			units[key], gone = keepNewest(units[key], 1)
			remove(gone, ReasonInitPruned)
		}
	}
	if in.Policy.MaxPerPodContainer >= 0 {
		for _, key := range sortedUnits(units) {
			var gone []gcCandidate
			units[key], gone = keepNewest(units[key], in.Policy.MaxPerPodContainer)
			remove(gone, ReasonPerUnitCap)
		}
	}
	if in.Policy.MaxContainers >= 0 && countCandidates(units) > in.Policy.MaxContainers {
		perUnit := max(in.Policy.MaxContainers/max(len(units), 1), 1)
		for _, key := range sortedUnits(units) {
			var gone []gcCandidate
			units[key], gone = keepNewest(units[key], perUnit)
			remove(gone, ReasonGlobalCap)
		}
		if n := countCandidates(units); n > in.Policy.MaxContainers {
			var flat []gcCandidate
			for _, key := range sortedUnits(units) {
				flat = append(flat, units[key]...)
			}
			sortNewestFirst(flat)
			_, gone := keepNewest(flat, len(flat)-(n-in.Policy.MaxContainers))
			remove(gone, ReasonGlobalCap)
		}
	}
	return out
}

// keepNewest splits a newest-first unit into the n newest it keeps and the
// rest, oldest first, to remove. A protected candidate is always kept, and
// removing older ones never reaches past it, so the split may keep more
// than n.
func keepNewest(cands []gcCandidate, n int) (kept, gone []gcCandidate) {
	n = max(n, 0)
	if len(cands) <= n {
		return cands, nil
	}
	kept = append([]gcCandidate(nil), cands[:n]...)
	for _, c := range cands[n:] {
		if c.protected {
			kept = append(kept, c)
			continue
		}
		gone = append(gone, c)
	}
	sortNewestFirst(kept)
	return kept, oldestFirst(gone)
}

func sortNewestFirst(cands []gcCandidate) {
	slices.SortStableFunc(cands, func(a, b gcCandidate) int {
		return cmp.Or(b.status.CreatedAt.Compare(a.status.CreatedAt), cmp.Compare(a.status.ID, b.status.ID))
	})
}

// oldestFirst is the removal order: from the oldest to the newest, so an
// interrupted pass has removed the least useful ones.
func oldestFirst(cands []gcCandidate) []gcCandidate {
	out := slices.Clone(cands)
	sortNewestFirst(out)
	slices.Reverse(out)
	return out
}

func countCandidates(units map[evictUnit][]gcCandidate) int {
	n := 0
	for _, u := range units {
		n += len(u)
	}
	return n
}

func sortedUnits(units map[evictUnit][]gcCandidate) []evictUnit {
	keys := make([]evictUnit, 0, len(units))
	for k := range units {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b evictUnit) int { return cmp.Or(cmp.Compare(a.uid, b.uid), cmp.Compare(a.name, b.name)) })
	return keys
}

// Result is what one GarbageCollect pass did.
type Result struct {
	Removed []Removal
	// Errors are the removals that failed; the next pass retries them.
	Errors []error
}

// GarbageCollect runs one container and sandbox GC pass over the agent's
// snapshot: it removes the dead containers PlanContainers picks, then the
// sandboxes PlanSandboxes picks given what is left, and, for a deleted pod
// left with no runtime object at all, its log and state directories. It
// makes no list call: the snapshot says what exists, and an object the
// status cache no longer knows was removed since (by a pod worker or an
// earlier pass), so it is skipped without a runtime call.
func (c *Collector) GarbageCollect(ctx context.Context, in Input) Result {
	var res Result
	failures := c.failures
	failures.GC()
	removedContainers := map[string]bool{}
	for _, r := range PlanContainers(in) {
		if failures.RemainingSinceLast(r.ID) > 0 {
			continue
		}
		done, err := c.removeDeadContainer(ctx, r.ID)
		if err != nil {
			failures.Next(r.ID)
			res.Errors = append(res.Errors, err)
			continue
		}
		failures.Reset(r.ID)
		removedContainers[r.ID] = true
		if done {
			res.Removed = append(res.Removed, r)
		}
	}
	removedSandboxes := map[string]bool{}
	for _, r := range PlanSandboxes(in, removedContainers) {
		if failures.RemainingSinceLast(r.ID) > 0 {
			continue
		}
		done, err := c.removeDeadSandbox(ctx, r.ID)
		if err != nil {
			failures.Next(r.ID)
			res.Errors = append(res.Errors, err)
			continue
		}
		failures.Reset(r.ID)
		removedSandboxes[r.ID] = true
		if done {
			res.Removed = append(res.Removed, r)
		}
	}
	if !in.AllSourcesReady || in.PodDeleted == nil {
		return res
	}
	for _, uid := range sortedUIDs(in.Pods) {
		p := in.Pods[uid]
		if !in.PodDeleted(uid) || !allGone(p, removedContainers, removedSandboxes) {
			continue
		}
		removed, err := c.removePodDirs(uid, c.manager.PodLogDir(p))
		res.Removed = append(res.Removed, removed...)
		if err != nil {
			res.Errors = append(res.Errors, err)
		}
	}
	return res
}

// allGone reports whether every object of p was removed in this pass.
func allGone(p *podplan.PodStatus, containers, sandboxes map[string]bool) bool {
	for _, c := range p.Containers {
		if !containers[c.ID] {
			return false
		}
	}
	for _, s := range p.Sandboxes {
		if !sandboxes[s.ID] {
			return false
		}
	}
	return true
}

func sortedUIDs(pods map[types.UID]*podplan.PodStatus) []types.UID {
	uids := make([]types.UID, 0, len(pods))
	for uid := range pods {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	return uids
}

// removeDeadContainer removes one dead container that a relist saw, with
// its log file and that file's rotations. It reports false, without a
// runtime call, when the status cache has forgotten the container (it was
// removed since the snapshot), and false when the runtime no longer knows
// it either.
func (c *Collector) removeDeadContainer(ctx context.Context, id string) (bool, error) {
	logPath, termPath, known := c.manager.ContainerFiles(id)
	if !known {
		return false, nil
	}
	err := c.runtime.RemoveContainer(ctx, id)
	if err != nil && !isNotFound(err) {
		return false, fmt.Errorf("remove container %q: %w", id, err)
	}
	c.manager.Forget([]string{id}, nil)
	if err := removeLogFiles(logPath); err != nil {
		return false, fmt.Errorf("remove logs of container %q: %w", id, err)
	}
	// Each run gets a termination-message file of its own under the pod
	// directory; a crash loop would otherwise leave one per restart.
	if termPath != "" {
		if err := os.Remove(termPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("remove the termination-message file of container %q: %w", id, err)
		}
	}
	return err == nil, nil
}

// isNotFound reports whether the runtime said the object does not exist:
// removing what is already gone is success.
func isNotFound(err error) bool {
	return status.Code(err) == codes.NotFound
}

// removeLogFiles removes a container's log file and its rotations
// (<path>.<timestamp>[.gz], see logrotate.go): the runtime leaves them all
// behind, and a crash-looping container would otherwise fill the disk one
// attempt at a time.
func removeLogFiles(logPath string) error {
	if logPath == "" {
		return nil
	}
	rotated, err := filepath.Glob(globEscape(logPath) + ".*")
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range append([]string{logPath}, rotated...) {
		if err := os.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// globEscape quotes the pattern characters of a path, so a glob built on
// it matches that path literally.
func globEscape(path string) string {
	var b strings.Builder
	for _, r := range path {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
