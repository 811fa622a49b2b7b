//go:build e2e

package e2e

// The crash test's CRI watcher: it polls containerd directly (on its own
// connection, not through the proxy berth uses) and records every moment
// one of berth's promises is broken, with what the runtime held then.

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Kinds of violation, the three invariants of the crash test.
const (
	kindExclusive = "a: two UIDs of one full name at once"
	kindBroken    = "b: the pod of a broken manifest stopped"
	kindEndState  = "c: the runtime is not the manifests"
)

// violation is one episode of a broken invariant: from the first sample
// that shows it (whose snapshot it keeps) until a sample no longer does.
type violation struct {
	kind   string
	cycle  int
	key    string // what it is about: a full pod name, a container
	at     time.Time
	detail string
}

// crashWatch polls ListPodSandbox and ListContainers every period.
type crashWatch struct {
	conn   *grpc.ClientConn
	rt     runtimeapi.RuntimeServiceClient
	cycle  atomic.Int64 // the test's current cycle, stamped on violations
	done   chan struct{}
	once   sync.Once
	wg     sync.WaitGroup
	period time.Duration

	// mu guards the fields below.
	mu         sync.Mutex
	protected  map[string]string // full pod name -> container that must stay RUNNING
	open       map[string]bool   // episode keys violated at the last sample
	violations []violation
	samples    int
	errors     int
	lastErr    error
}

// startCrashWatch dials containerd and starts polling.
func startCrashWatch(period time.Duration) (*crashWatch, error) {
	conn, err := grpc.NewClient("unix://"+bed.Socket,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(redialBackoff),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(proxyMaxMsgSize)))
	if err != nil {
		return nil, fmt.Errorf("crash watch: dial containerd: %w", err)
	}
	w := &crashWatch{
		conn:      conn,
		rt:        runtimeapi.NewRuntimeServiceClient(conn),
		done:      make(chan struct{}),
		period:    period,
		protected: map[string]string{},
		open:      map[string]bool{},
	}
	w.wg.Add(1)
	go w.loop()
	return w, nil
}

func (w *crashWatch) loop() {
	defer w.wg.Done()
	tick := time.NewTicker(w.period)
	defer tick.Stop()
	for {
		w.sample()
		select {
		case <-w.done:
			return
		case <-tick.C:
		}
	}
}

// stop ends the polling (once) and closes the connection.
func (w *crashWatch) stop() {
	w.once.Do(func() {
		close(w.done)
		w.wg.Wait()
		w.conn.Close()
	})
}

// protect says that container (of the pod fullName) must be RUNNING in
// every sample from now on, until unprotect.
func (w *crashWatch) protect(fullName, container string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.protected[fullName] = container
}

func (w *crashWatch) unprotect(fullName string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.protected, fullName)
}

// lost reports whether the protected container of fullName was ever seen
// not running (a kindBroken violation): the pod is gone, and waiting for
// it to be back is pointless.
func (w *crashWatch) lost(fullName, container string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range w.violations {
		if v.kind == kindBroken && v.key == fullName+" "+container {
			return true
		}
	}
	return false
}

// record adds a violation that is not an episode of the samples (the
// end-state checks).
func (w *crashWatch) record(v violation) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violations = append(w.violations, v)
}

// since returns the violations recorded from index i on, and the count.
func (w *crashWatch) since(i int) ([]violation, int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if i > len(w.violations) {
		i = len(w.violations)
	}
	return append([]violation(nil), w.violations[i:]...), len(w.violations)
}

// stats is a one-line summary of the polling.
func (w *crashWatch) stats() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return fmt.Sprintf("%d samples, %d failed CRI polls (last: %v)", w.samples, w.errors, w.lastErr)
}

// samplesTaken is how many samples succeeded.
func (w *crashWatch) samplesTaken() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.samples
}

// sample takes one look at the runtime. A violation of exclusivity is a
// moment where two UIDs of one full name each hold a READY sandbox or a
// CREATED/RUNNING container. The two lists are taken one after the other,
// so a sandbox list and a container list are combined only where that is
// sound: a live container that existed before the sandbox list began was
// live while that list was taken too (containers never go back to
// CREATED or RUNNING). Each list on its own is a snapshot.
func (w *crashWatch) sample() {
	managed := map[string]string{labelManaged: "true"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	t0 := time.Now()
	sbResp, err := w.rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: managed}})
	t1 := time.Now()
	var cResp *runtimeapi.ListContainersResponse
	if err == nil {
		cResp, err = w.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{LabelSelector: managed}})
	}
	t2 := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		// containerd is down (the test killed it) or too slow: no sample.
		w.errors++
		w.lastErr = err
		return
	}
	w.samples++
	snap := runtimeSnapshot{t0: t0, t1: t1, t2: t2, sandboxes: sbResp.Items, containers: cResp.Containers}
	violated := map[string]violation{}

	names := map[string]bool{}
	for _, s := range snap.sandboxes {
		names[fullName(s.Labels[labelPodName], s.Labels[labelPodNamespace])] = true
	}
	for _, c := range snap.containers {
		names[fullName(c.Labels[labelPodName], c.Labels[labelPodNamespace])] = true
	}
	for name := range names {
		inSandboxList, inContainerList := map[string]bool{}, map[string]bool{}
		for _, s := range snap.sandboxes {
			if fullName(s.Labels[labelPodName], s.Labels[labelPodNamespace]) == name && s.State == runtimeapi.PodSandboxState_SANDBOX_READY {
				inSandboxList[s.Labels[labelPodUID]] = true
			}
		}
		for _, c := range snap.containers {
			if fullName(c.Labels[labelPodName], c.Labels[labelPodNamespace]) != name || !containerLive(c) {
				continue
			}
			uid := c.Labels[labelPodUID]
			inContainerList[uid] = true
			if c.CreatedAt < t0.UnixNano() {
				inSandboxList[uid] = true
			}
		}
		if len(inSandboxList) > 1 || len(inContainerList) > 1 {
			key := "a " + name
			violated[key] = violation{kind: kindExclusive, key: name, detail: fmt.Sprintf(
				"UIDs holding %s: %v (by the sandbox list and the live containers older than it), %v (by the container list)\n%s",
				name, sortedKeys(inSandboxList), sortedKeys(inContainerList), snap.describe(name))}
		}
	}
	for name, id := range w.protected {
		var c *runtimeapi.Container
		for _, x := range snap.containers {
			if x.Id == id {
				c = x
			}
		}
		if c == nil || c.State != runtimeapi.ContainerState_CONTAINER_RUNNING {
			state := "gone"
			if c != nil {
				state = c.State.String()
			}
			key := name + " " + id
			violated["b "+key] = violation{kind: kindBroken, key: key, detail: fmt.Sprintf(
				"the last good container %s of %s, whose manifest is broken, is %s\n%s", shortID(id), name, state, snap.describe(name))}
		}
	}

	for key, v := range violated {
		if w.open[key] {
			continue
		}
		v.cycle, v.at = int(w.cycle.Load()), t0
		w.violations = append(w.violations, v)
	}
	w.open = map[string]bool{}
	for key := range violated {
		w.open[key] = true
	}
}

// containerLive is a container that runs or may still be started.
func containerLive(c *runtimeapi.Container) bool {
	return c.State == runtimeapi.ContainerState_CONTAINER_CREATED || c.State == runtimeapi.ContainerState_CONTAINER_RUNNING
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// runtimeSnapshot is one sample: the sandbox list taken in [t0, t1], the
// container list in [t1, t2].
type runtimeSnapshot struct {
	t0, t1, t2 time.Time
	sandboxes  []*runtimeapi.PodSandbox
	containers []*runtimeapi.Container
}

// describe lists the objects of the full pod name (all of them when name
// is ""), one per line, with ids, uids, states and creation times.
func (s runtimeSnapshot) describe(name string) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "  sandboxes listed %s..%s, containers listed ..%s\n", clock(s.t0), clock(s.t1), clock(s.t2))
	for _, x := range s.sandboxes {
		if n := fullName(x.Labels[labelPodName], x.Labels[labelPodNamespace]); name == "" || n == name {
			fmt.Fprintf(&sb, "  sandbox   %s uid %s %-14s created %s attempt %d  %s\n", shortID(x.Id), x.Labels[labelPodUID],
				strings.TrimPrefix(x.State.String(), "SANDBOX_"), clock(time.Unix(0, x.CreatedAt)), x.GetMetadata().GetAttempt(), n)
		}
	}
	for _, x := range s.containers {
		if n := fullName(x.Labels[labelPodName], x.Labels[labelPodNamespace]); name == "" || n == name {
			fmt.Fprintf(&sb, "  container %s uid %s %-14s created %s in sandbox %s  %s/%s restart %s\n", shortID(x.Id), x.Labels[labelPodUID],
				strings.TrimPrefix(x.State.String(), "CONTAINER_"), clock(time.Unix(0, x.CreatedAt)), shortID(x.PodSandboxId), n,
				x.Labels[labelContainerName], x.Annotations[annoRestartCount])
		}
	}
	return strings.TrimRight(sb.String(), "\n")
}

// clock is a wall-clock time to the millisecond, as berth's log has them.
func clock(t time.Time) string { return t.Format("15:04:05.000") }
