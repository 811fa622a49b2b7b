package cri

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
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/utils/clock"
)

// GCPolicy is the kubelet's container GC policy (ContainerGCPolicy), from
// --minimum-container-ttl-duration, --maximum-dead-containers-per-container
// and --maximum-dead-containers.
type GCPolicy struct {
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

// DefaultGCPolicy is the kubelet's default policy: no minimum age, one dead
// container per evict unit, no global cap.
var DefaultGCPolicy = GCPolicy{MinAge: 0, MaxPerPodContainer: 1, MaxContainers: -1}

// createdGrace is how long a container that was created but never started
// is left alone in a pod that still exists: its pod worker may be between
// CreateContainer and StartContainer.
const createdGrace = time.Minute

// GC removal kinds, the label of berth_container_gc_removed_total.
const (
	GCKindContainer = "container"
	GCKindSandbox   = "sandbox"
	GCKindPodLogDir = "pod_log_dir"
	GCKindPodDir    = "pod_dir"
)

// Why a container or sandbox is collected, for logs and events.
const (
	GCReasonDeletedPod  = "pod deleted"
	GCReasonPerUnitCap  = "maximum-dead-containers-per-container"
	GCReasonGlobalCap   = "maximum-dead-containers"
	GCReasonInitPruned  = "older run of an init container"
	GCReasonOldSandbox  = "not the newest sandbox"
	GCReasonLeftoverDir = "pod no longer exists"
)

// GCInput is what one container GC pass decides on: the agent's latest
// relist snapshot and what it knows of each pod.
type GCInput struct {
	// Pods is a relist result (Manager.Relist); it is not modified.
	Pods   map[types.UID]*PodStatus
	Policy GCPolicy
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

// GCRemoval is one object a GC pass removed (or, in a plan, will remove).
type GCRemoval struct {
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
	status    *ContainerStatus
	pod       *PodStatus
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
func PlanContainerGC(in GCInput) []GCRemoval {
	units := map[evictUnit][]gcCandidate{}
	newestGC := in.Now.Add(-in.Policy.MinAge)
	for uid, p := range in.Pods {
		deleted := in.AllSourcesReady && in.PodDeleted != nil && in.PodDeleted(uid)
		// p.Containers is newest first, so the first dead run of each
		// name is the one to protect.
		seen := map[string]bool{}
		for _, c := range p.Containers {
			if c.State == ContainerStateRunning || !owned(c.Labels) {
				continue
			}
			if !deleted && c.State == ContainerStateCreated && in.Now.Sub(c.CreatedAt) < createdGrace {
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

	var out []GCRemoval
	remove := func(cands []gcCandidate, reason string) {
		for _, c := range cands {
			out = append(out, GCRemoval{
				Kind: GCKindContainer, UID: c.pod.UID, Pod: c.pod.Name, Namespace: c.pod.Namespace,
				Container: c.status.Name, ID: c.status.ID, Reason: reason, PodExists: reason != GCReasonDeletedPod,
			})
		}
	}
	// Deleted pods first, in a stable order so a plan reads the same
	// every time.
	for _, key := range sortedUnits(units) {
		if in.AllSourcesReady && in.PodDeleted != nil && in.PodDeleted(key.uid) {
			remove(oldestFirst(units[key]), GCReasonDeletedPod)
			delete(units, key)
		}
	}
	// Init containers keep only their newest run.
	for _, key := range sortedUnits(units) {
		if slices.Contains(in.InitContainers[key.uid], key.name) {
			var gone []gcCandidate
			units[key], gone = keepNewest(units[key], 1)
			remove(gone, GCReasonInitPruned)
		}
	}
	if in.Policy.MaxPerPodContainer >= 0 {
		for _, key := range sortedUnits(units) {
			var gone []gcCandidate
			units[key], gone = keepNewest(units[key], in.Policy.MaxPerPodContainer)
			remove(gone, GCReasonPerUnitCap)
		}
	}
	if in.Policy.MaxContainers >= 0 && countCandidates(units) > in.Policy.MaxContainers {
		perUnit := max(in.Policy.MaxContainers/max(len(units), 1), 1)
		for _, key := range sortedUnits(units) {
			var gone []gcCandidate
			units[key], gone = keepNewest(units[key], perUnit)
			remove(gone, GCReasonGlobalCap)
		}
		if n := countCandidates(units); n > in.Policy.MaxContainers {
			var flat []gcCandidate
			for _, key := range sortedUnits(units) {
				flat = append(flat, units[key]...)
			}
			sortNewestFirst(flat)
			_, gone := keepNewest(flat, len(flat)-(n-in.Policy.MaxContainers))
			remove(gone, GCReasonGlobalCap)
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

// GCResult is what one GarbageCollect pass did.
type GCResult struct {
	Removed []GCRemoval
	// Errors are the removals that failed; the next pass retries them.
	Errors []error
}

// GarbageCollect runs one container and sandbox GC pass over the agent's
// snapshot: it removes the dead containers PlanContainerGC picks, then the
// sandboxes PlanSandboxGC picks given what is left, and, for a deleted pod
// left with no runtime object at all, its log and state directories. It
// makes no list call: the snapshot says what exists, and an object the
// status cache no longer knows was removed since (by a pod worker or an
// earlier pass), so it is skipped without a runtime call.
func (m *Manager) GarbageCollect(ctx context.Context, in GCInput) GCResult {
	var res GCResult
	failures := m.gcFailures.get(m.clock)
	failures.GC()
	removedContainers := map[string]bool{}
	for _, r := range PlanContainerGC(in) {
		if failures.RemainingSinceLast(r.ID) > 0 {
			continue
		}
		done, err := m.removeDeadContainer(ctx, r.ID)
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
	for _, r := range PlanSandboxGC(in, removedContainers) {
		if failures.RemainingSinceLast(r.ID) > 0 {
			continue
		}
		done, err := m.removeDeadSandbox(ctx, r.ID)
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
		removed, err := m.removePodDirs(uid, m.podLogDirOf(p))
		res.Removed = append(res.Removed, removed...)
		if err != nil {
			res.Errors = append(res.Errors, err)
		}
	}
	return res
}

// removalBackoff holds off retrying a container or sandbox whose removal
// failed (10s doubling to 5m), so one the runtime refuses to remove costs
// neither a runtime call nor a warning every pass. Its zero value is ready.
type removalBackoff struct {
	once sync.Once
	b    *Backoff
}

func (r *removalBackoff) get(c clock.PassiveClock) *Backoff {
	r.once.Do(func() { r.b = NewBackoff(c, 10*time.Second, 5*time.Minute) })
	return r.b
}

// allGone reports whether every object of p was removed in this pass.
func allGone(p *PodStatus, containers, sandboxes map[string]bool) bool {
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

func sortedUIDs(pods map[types.UID]*PodStatus) []types.UID {
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
func (m *Manager) removeDeadContainer(ctx context.Context, id string) (bool, error) {
	logPath, known := m.statusCache.containerLogPath(id)
	if !known {
		return false, nil
	}
	termPath := m.statusCache.containerTermPath(id)
	err := m.runtime.RemoveContainer(ctx, id)
	if err != nil && !isNotFound(err) {
		return false, fmt.Errorf("remove container %q: %w", id, err)
	}
	m.statusCache.forget([]string{id}, nil)
	if err := removeLogFiles(logPath); err != nil {
		return false, fmt.Errorf("remove logs of container %q: %w", id, err)
	}
	// Each run gets a termination-message file of its own under the pod
	// directory; a crash loop would otherwise leave one per restart.
	if termPath := m.ownedTermPath(termPath); termPath != "" {
		if err := os.Remove(termPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, fmt.Errorf("remove the termination-message file of container %q: %w", id, err)
		}
	}
	return err == nil, nil
}

// containerTermPath is the host path of a cached container's
// termination-message file, "" when it has none or is not cached.
func (c *statusCache) containerTermPath(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.containers[id].termPath
}

// terminationMessageHostPath finds, among a container's mounts, the host
// file mounted at its termination-message path, but only one under berth's
// own pod directories layout (<pod dir>/containers/<name>/<file>), so a
// hostPath a manifest mounts there is never taken for it.
func terminationMessageHostPath(st *runtimeapi.ContainerStatus) string {
	want := st.GetAnnotations()[AnnotationTerminationMessagePath]
	if want == "" {
		return ""
	}
	for _, mnt := range st.GetMounts() {
		if mnt.GetContainerPath() != want {
			continue
		}
		host := mnt.GetHostPath()
		if filepath.Base(filepath.Dir(filepath.Dir(host))) == "containers" && filepath.Base(filepath.Dir(host)) == st.GetMetadata().GetName() {
			return host
		}
	}
	return ""
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

// removePodDirs removes the log directory (when known) and the state
// directory of a pod that no longer exists, reporting what was there.
func (m *Manager) removePodDirs(uid types.UID, logDir string) ([]GCRemoval, error) {
	var out []GCRemoval
	var errs []error
	if logDir != "" {
		if _, err := os.Lstat(logDir); err == nil {
			if err := os.RemoveAll(logDir); err != nil {
				errs = append(errs, fmt.Errorf("remove pod log directory: %w", err))
			} else {
				out = append(out, GCRemoval{Kind: GCKindPodLogDir, UID: uid, ID: logDir, Reason: GCReasonLeftoverDir})
			}
		}
	}
	dir, err := m.podDir(uid)
	if err != nil {
		// A UID that is no single path element (from a runtime's label)
		// never got a directory from berth: nothing to remove.
		return out, errors.Join(errs...)
	}
	if _, err := os.Lstat(dir); err == nil {
		if err := m.CleanupPodDir(uid); err != nil {
			errs = append(errs, err)
		} else {
			out = append(out, GCRemoval{Kind: GCKindPodDir, UID: uid, ID: dir, Reason: GCReasonLeftoverDir})
		}
	}
	return out, errors.Join(errs...)
}

// SweepPodDirs removes the state directories under RootDir/pods of pods
// for which keep is false, with their log directories under PodLogsDir: the
// leftovers of pods removed while berth was down or that a crash
// interrupted. A log directory is only ever removed together with a state
// directory of the same UID, which berth alone creates, so the logs of pods
// another agent runs on the same host are never touched. The agent calls
// it once all sources are ready, with keep true for every pod a source asks
// for, a pod worker handles or the runtime still has.
func (m *Manager) SweepPodDirs(keep func(types.UID) bool) ([]GCRemoval, error) {
	entries, err := os.ReadDir(filepath.Join(m.opts.RootDir, "pods"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sweep pod directories: %w", err)
	}
	var out []GCRemoval
	var errs []error
	for _, e := range entries {
		uid := types.UID(e.Name())
		if !e.IsDir() || keep(uid) {
			continue
		}
		logDirs, err := filepath.Glob(filepath.Join(globEscape(m.opts.PodLogsDir), "*_"+globEscape(string(uid))))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, d := range logDirs {
			removed, err := m.removePodDirs(uid, d)
			out = append(out, removed...)
			errs = append(errs, err)
		}
		if len(logDirs) == 0 {
			removed, err := m.removePodDirs(uid, "")
			out = append(out, removed...)
			errs = append(errs, err)
		}
	}
	return out, errors.Join(errs...)
}
