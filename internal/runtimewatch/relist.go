package runtimewatch

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/podplan"
)

// statusCache keeps, per runtime object, what only a status call tells (exit
// code, times, reason, message, IPs, namespace options), together with the
// state it was read in. A cached entry stays valid as long as the object's
// listed state is the same: a running container's details do not change
// until it exits, and an exited container's never change. That keeps a
// relist at two list calls when nothing happened.
type statusCache struct {
	mu         sync.Mutex // guards containers and sandboxes
	containers map[string]cachedContainer
	sandboxes  map[string]cachedSandbox
}

type cachedContainer struct {
	state   runtimeapi.ContainerState
	status  podplan.ContainerStatus
	logPath string // for removing the log file with the container
	// termPath is the host file mounted as the container's termination
	// message, removed with the container by GC (cri/gc).
	termPath string
}

type cachedSandbox struct {
	state  runtimeapi.PodSandboxState
	status podplan.SandboxStatus
}

// container returns a copy of the cached status of id if it was read in
// state.
func (c *statusCache) container(id string, state runtimeapi.ContainerState) (*podplan.ContainerStatus, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.containers[id]
	if !ok || e.state != state {
		return nil, false
	}
	s := e.status
	return &s, true
}

// containerLogPath is the log file of a cached container, and whether the
// container is cached at all (only berth-owned containers ever are).
func (c *statusCache) containerLogPath(id string) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.containers[id]
	return e.logPath, ok
}

func (c *statusCache) putContainer(id string, state runtimeapi.ContainerState, s *podplan.ContainerStatus, logPath, termPath string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.containers == nil {
		c.containers = map[string]cachedContainer{}
	}
	c.containers[id] = cachedContainer{state: state, status: *s, logPath: logPath, termPath: termPath}
}

func (c *statusCache) sandbox(id string, state runtimeapi.PodSandboxState) (*podplan.SandboxStatus, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.sandboxes[id]
	if !ok || e.state != state {
		return nil, false
	}
	s := e.status
	return &s, true
}

func (c *statusCache) putSandbox(id string, state runtimeapi.PodSandboxState, s *podplan.SandboxStatus) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sandboxes == nil {
		c.sandboxes = map[string]cachedSandbox{}
	}
	c.sandboxes[id] = cachedSandbox{state: state, status: *s}
}

// forget drops the given objects, after they were removed.
func (c *statusCache) forget(containerIDs, sandboxIDs []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, id := range containerIDs {
		delete(c.containers, id)
	}
	for _, id := range sandboxIDs {
		delete(c.sandboxes, id)
	}
}

// retain drops every object not in a complete listing of berth's objects.
func (c *statusCache) retain(sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) {
	keepS := make(map[string]struct{}, len(sandboxes))
	for _, s := range sandboxes {
		keepS[s.Id] = struct{}{}
	}
	keepC := make(map[string]struct{}, len(containers))
	for _, ct := range containers {
		keepC[ct.Id] = struct{}{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.sandboxes {
		if _, ok := keepS[id]; !ok {
			delete(c.sandboxes, id)
		}
	}
	for id := range c.containers {
		if _, ok := keepC[id]; !ok {
			delete(c.containers, id)
		}
	}
}

// managedSelector selects berth's objects, optionally of one pod.
func managedSelector(uid types.UID) map[string]string {
	sel := map[string]string{criconfig.LabelManaged: "true"}
	if uid != "" {
		sel[criconfig.LabelPodUID] = string(uid)
	}
	return sel
}

// sandboxRelistPeriod bounds how stale Relist's sandbox listing may get while
// no container changes. Stopping or removing a sandbox by hand stops or
// removes its containers too, so nearly every sandbox change shows in the
// container listing first; the period covers the rest (a sandbox whose
// containers all exited long ago).
const sandboxRelistPeriod = 5 * time.Second

// sandboxListing is Relist's memory of its last sandbox listing, reused
// while the container listing stays the same.
type sandboxListing struct {
	mu         sync.Mutex // guards the fields below; held across one Relist
	containers string     // fingerprint of the container listing it goes with
	sandboxes  []*runtimeapi.PodSandbox
	listedAt   time.Time
	// stale is set by a container event (events.go), which may be about a
	// sandbox alone: the next Relist lists sandboxes whatever the
	// container listing says. Atomic: set without the mutex, from the
	// event stream's goroutine.
	stale atomic.Bool
}

// Relist returns the status of every berth-owned pod on the runtime, by
// UID. It costs one ListContainers call, one ListPodSandbox call when the
// container listing changed or the last sandbox listing is older than
// sandboxRelistPeriod, and one status call per object that is new or
// changed state since the last look: at idle about 1.2 calls a second
// however many pods run. The agent's PLEG calls it every second and
// compares. The returned statuses are the caller's; their Labels and
// Annotations maps are shared and must not be modified.
func (w *Watcher) Relist(ctx context.Context) (map[types.UID]*podplan.PodStatus, error) {
	w.lastSandboxes.mu.Lock()
	defer w.lastSandboxes.mu.Unlock()
	containers, err := w.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: managedSelector("")})
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	last := &w.lastSandboxes
	fp := containerListingFingerprint(containers)
	sandboxes := last.sandboxes
	stale := last.stale.Swap(false)
	if sandboxes == nil || stale || fp != last.containers || w.clock.Since(last.listedAt) >= sandboxRelistPeriod {
		listedAt := w.clock.Now()
		sandboxes, err = w.runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: managedSelector("")})
		if err != nil {
			if stale {
				last.stale.Store(true)
			}
			return nil, fmt.Errorf("list sandboxes: %w", err)
		}
		last.containers, last.sandboxes, last.listedAt = fp, sandboxes, listedAt
	}
	pods, err := w.podStatuses(ctx, sandboxes, containers)
	if err != nil {
		return nil, err
	}
	w.statusCache.retain(sandboxes, containers)
	return pods, nil
}

// containerListingFingerprint identifies a container listing by its objects
// and their states.
func containerListingFingerprint(containers []*runtimeapi.Container) string {
	parts := make([]string, len(containers))
	for i, c := range containers {
		parts[i] = c.Id + ":" + strconv.Itoa(int(c.State))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// PodStatus returns the status of one pod, read fresh from the runtime: a
// pod worker calls it right after acting on the pod. A UID without objects
// gives an empty status, not an error.
func (w *Watcher) PodStatus(ctx context.Context, uid types.UID) (*podplan.PodStatus, error) {
	sandboxes, containers, err := w.list(ctx, uid)
	if err != nil {
		return nil, err
	}
	pods, err := w.podStatuses(ctx, sandboxes, containers)
	if err != nil {
		return nil, err
	}
	if s, ok := pods[uid]; ok {
		return s, nil
	}
	return &podplan.PodStatus{UID: uid}, nil
}

// list lists berth's sandboxes and containers, of one pod if uid is set.
func (w *Watcher) list(ctx context.Context, uid types.UID) ([]*runtimeapi.PodSandbox, []*runtimeapi.Container, error) {
	sandboxes, err := w.runtime.ListPodSandbox(ctx, &runtimeapi.PodSandboxFilter{LabelSelector: managedSelector(uid)})
	if err != nil {
		return nil, nil, fmt.Errorf("list sandboxes: %w", err)
	}
	containers, err := w.runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{LabelSelector: managedSelector(uid)})
	if err != nil {
		return nil, nil, fmt.Errorf("list containers: %w", err)
	}
	return sandboxes, containers, nil
}

// podStatuses groups listed objects by pod UID, completing each from the
// cache or a status call. Objects without berth's labels are skipped even if
// a runtime ignored the label filter. Any failed status call fails the whole
// result: a status missing its exit code would make the caller decide wrong
// (restart a container that succeeded), while the next relist will retry.
func (w *Watcher) podStatuses(ctx context.Context, sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) (map[types.UID]*podplan.PodStatus, error) {
	sbs, cts, err := w.objectStatuses(ctx, sandboxes, containers)
	if err != nil {
		return nil, err
	}
	pods := map[types.UID]*podplan.PodStatus{}
	pod := func(labels map[string]string) *podplan.PodStatus {
		uid := types.UID(labels[criconfig.LabelPodUID])
		p, ok := pods[uid]
		if !ok {
			p = &podplan.PodStatus{UID: uid, Name: labels[criconfig.LabelPodName], Namespace: labels[criconfig.LabelPodNamespace]}
			pods[uid] = p
		}
		return p
	}
	for i, ss := range sbs {
		if ss != nil {
			p := pod(sandboxes[i].Labels)
			p.Sandboxes = append(p.Sandboxes, ss)
		}
	}
	for i, cs := range cts {
		if cs != nil {
			if cs.Runtime, err = w.name.get(ctx, w); err != nil {
				return nil, err
			}
			p := pod(containers[i].Labels)
			p.Containers = append(p.Containers, cs)
		}
	}
	for _, p := range pods {
		slices.SortFunc(p.Sandboxes, func(a, b *podplan.SandboxStatus) int {
			return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(a.ID, b.ID))
		})
		slices.SortFunc(p.Containers, func(a, b *podplan.ContainerStatus) int {
			return cmp.Or(b.CreatedAt.Compare(a.CreatedAt), cmp.Compare(a.ID, b.ID))
		})
		p.IPs = podIPs(p.Sandboxes)
	}
	return pods, nil
}

// statusReadsInFlight bounds the status calls one listing makes at once.
// After a restart or a power cut every object is new to the cache: read
// one after the other, the statuses of every dead pod hold the first start
// back. A few in flight read them in a fraction of that time without
// flooding a loaded runtime.
const statusReadsInFlight = 8

// objectStatuses completes the listed objects berth owns, by index: nil
// for an object not berth's or removed since the listing. Cached entries
// are taken as they are; the others are read statusReadsInFlight at a
// time. The first failed read fails the result and cancels the others.
func (w *Watcher) objectStatuses(ctx context.Context, sandboxes []*runtimeapi.PodSandbox, containers []*runtimeapi.Container) ([]*podplan.SandboxStatus, []*podplan.ContainerStatus, error) {
	sbs := make([]*podplan.SandboxStatus, len(sandboxes))
	cts := make([]*podplan.ContainerStatus, len(containers))
	var reads []func(context.Context) error
	for i, s := range sandboxes {
		if !podplan.Owned(s.Labels) || s.Labels[criconfig.LabelPodUID] == "" {
			continue
		}
		if cached, ok := w.statusCache.sandbox(s.Id, s.State); ok {
			sbs[i] = cached
			continue
		}
		reads = append(reads, func(ctx context.Context) (err error) {
			sbs[i], err = w.sandboxStatus(ctx, s)
			return err
		})
	}
	for i, c := range containers {
		if !podplan.Owned(c.Labels) || c.Labels[criconfig.LabelPodUID] == "" {
			continue
		}
		if cached, ok := w.statusCache.container(c.Id, c.State); ok {
			cts[i] = cached
			continue
		}
		reads = append(reads, func(ctx context.Context) (err error) {
			cts[i], err = w.containerStatus(ctx, c)
			return err
		})
	}
	return sbs, cts, runBounded(ctx, reads, statusReadsInFlight)
}

// runBounded runs fns with at most n at once, inline when there is only
// one, and returns the first error; a failure cancels the context the
// others run with. It returns nil only if every fn ran and returned nil.
func runBounded(ctx context.Context, fns []func(context.Context) error, n int) error {
	if len(fns) == 1 {
		return fns[0](ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	next := make(chan func(context.Context) error)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range min(n, len(fns)) {
		wg.Go(func() {
			for fn := range next {
				if ctx.Err() != nil {
					continue
				}
				if err := fn(ctx); err != nil {
					once.Do(func() { first = err })
					cancel()
				}
			}
		})
	}
	for _, fn := range fns {
		next <- fn
	}
	close(next)
	wg.Wait()
	if first == nil && ctx.Err() != nil {
		// Cancelled from outside: what was skipped must not pass for
		// objects removed since the listing.
		return ctx.Err()
	}
	return first
}

// podIPs are the IPs of the newest ready sandbox, primary first; none on the
// host network, where the pod's IP is the node's and the agent fills it.
func podIPs(sandboxes []*podplan.SandboxStatus) []string {
	for _, s := range sandboxes {
		if s.State != podplan.SandboxStateReady {
			continue
		}
		if s.HostNetwork || s.IP == "" {
			return nil
		}
		return append([]string{s.IP}, s.AdditionalIPs...)
	}
	return nil
}

// sandboxStatus reads a listed sandbox's status from the runtime and
// caches it (objectStatuses looks in the cache first). A sandbox removed
// since the listing gives nil, nil.
func (w *Watcher) sandboxStatus(ctx context.Context, s *runtimeapi.PodSandbox) (*podplan.SandboxStatus, error) {
	resp, err := w.runtime.PodSandboxStatus(ctx, s.Id, false)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("status of sandbox %q: %w", s.Id, err)
	}
	return w.RememberSandbox(s.Id, resp.Status), nil
}

// RememberSandbox converts a sandbox status from the runtime and caches it
// under the state it was read in, so whoever read it (a relist, or SyncPod
// right after creating the sandbox) spares the next relist the call.
func (w *Watcher) RememberSandbox(id string, st *runtimeapi.PodSandboxStatus) *podplan.SandboxStatus {
	ss := &podplan.SandboxStatus{
		ID:          id,
		State:       sandboxState(st.GetState()),
		CreatedAt:   unixNanoTime(st.GetCreatedAt()),
		Attempt:     st.GetMetadata().GetAttempt(),
		IP:          st.GetNetwork().GetIp(),
		HostNetwork: st.GetLinux().GetNamespaces().GetOptions().GetNetwork() == runtimeapi.NamespaceMode_NODE,
		Labels:      st.GetLabels(),
		Annotations: st.GetAnnotations(),
	}
	for _, ip := range st.GetNetwork().GetAdditionalIps() {
		ss.AdditionalIPs = append(ss.AdditionalIPs, ip.GetIp())
	}
	w.statusCache.putSandbox(id, st.GetState(), ss)
	return ss
}

// containerStatus reads a listed container's status from the runtime and
// caches it (objectStatuses looks in the cache first). A container removed
// since the listing gives nil, nil.
func (w *Watcher) containerStatus(ctx context.Context, c *runtimeapi.Container) (*podplan.ContainerStatus, error) {
	resp, err := w.runtime.ContainerStatus(ctx, c.Id, false)
	if isNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("status of container %q: %w", c.Id, err)
	}
	st := resp.Status
	cs := &podplan.ContainerStatus{
		ID:           c.Id,
		SandboxID:    c.PodSandboxId,
		Name:         st.GetMetadata().GetName(),
		State:        containerState(st.State),
		CreatedAt:    unixNanoTime(st.CreatedAt),
		StartedAt:    unixNanoTime(st.StartedAt),
		FinishedAt:   unixNanoTime(st.FinishedAt),
		ExitCode:     st.ExitCode,
		Reason:       st.Reason,
		Message:      st.Message,
		Image:        specImage(st),
		ImageRef:     st.ImageRef,
		Labels:       st.Labels,
		Annotations:  st.Annotations,
		RestartCount: restartCount(st.Annotations),
		Hash:         specHash(st.Annotations),
	}
	if cs.Name == "" {
		cs.Name = st.Labels[criconfig.LabelContainerName]
	}
	w.statusCache.putContainer(c.Id, st.State, cs, w.OwnedLogPath(st.LogPath), w.ownedTermPath(terminationMessageHostPath(st)))
	return cs, nil
}

// specImage is the image as the manifest named it: berth's annotation, else
// what the runtime echoes of the create request, else its normalized name.
func specImage(st *runtimeapi.ContainerStatus) string {
	if img := st.Annotations[criconfig.AnnotationContainerImage]; img != "" {
		return img
	}
	if img := st.GetImage().GetUserSpecifiedImage(); img != "" {
		return img
	}
	return st.GetImage().GetImage()
}

// restartCount parses the restart count annotation; 0 when absent or
// unreadable, as the kubelet.
func restartCount(annotations map[string]string) int {
	n, err := strconv.Atoi(annotations[criconfig.AnnotationContainerRestartCount])
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// specHash parses the spec hash annotation (base 16); 0 when absent or
// unreadable, which never matches a real spec and so leads to a restart
// rather than adopting a container berth cannot vouch for.
func specHash(annotations map[string]string) uint64 {
	h, err := strconv.ParseUint(annotations[criconfig.AnnotationContainerHash], 16, 64)
	if err != nil {
		return 0
	}
	return h
}

// unixNanoTime is the time of a CRI timestamp, zero for 0 (not reached).
func unixNanoTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}

func containerState(s runtimeapi.ContainerState) podplan.ContainerState {
	switch s {
	case runtimeapi.ContainerState_CONTAINER_CREATED:
		return podplan.ContainerStateCreated
	case runtimeapi.ContainerState_CONTAINER_RUNNING:
		return podplan.ContainerStateRunning
	case runtimeapi.ContainerState_CONTAINER_EXITED:
		return podplan.ContainerStateExited
	default:
		return podplan.ContainerStateUnknown
	}
}

func sandboxState(s runtimeapi.PodSandboxState) podplan.SandboxState {
	if s == runtimeapi.PodSandboxState_SANDBOX_READY {
		return podplan.SandboxStateReady
	}
	return podplan.SandboxStateNotReady
}

// terminationMessageHostPath finds, among a container's mounts, the host
// file mounted at its termination-message path, but only one under berth's
// own pod directories layout (<pod dir>/containers/<name>/<file>), so a
// hostPath a manifest mounts there is never taken for it.
func terminationMessageHostPath(st *runtimeapi.ContainerStatus) string {
	want := st.GetAnnotations()[criconfig.AnnotationTerminationMessagePath]
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

// containerTermPath is the host path of a cached container's
// termination-message file, "" when it has none or is not cached.
func (c *statusCache) containerTermPath(id string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.containers[id].termPath
}

// knowsSandbox reports whether the sandbox is cached, that is, seen by the
// latest relist and not removed since.
func (c *statusCache) knowsSandbox(id string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.sandboxes[id]
	return ok
}
