package prober

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/podplan"
)

// Options are what the probe manager needs from the agent.
type Options struct {
	// Exec runs exec probes (a handlers.Execer over the runtime).
	Exec Execer
	// Recorder takes Unhealthy events; nil drops them.
	Recorder kuberuntime.Recorder
	// Metrics is where the probe series are registered; nil keeps them
	// private.
	Metrics prometheus.Registerer
	// OnChange is told the pod whose probe results changed, so its lane
	// syncs (restart a failed container, publish readiness); it must not
	// block. May be nil.
	OnChange func(uid types.UID)
	Clock    clock.Clock
	Logger   *slog.Logger
}

// probeFunc runs one probe of a container; Manager.handle in berth.
type probeFunc func(ctx context.Context, w *worker, t target) (Result, string, error)

// Manager owns every probe worker and the results they report. It is safe
// for concurrent use: the agent's pod lanes feed it statuses and read
// readiness, the runtime manager asks it which containers failed.
type Manager struct {
	exec     Execer
	recorder kuberuntime.Recorder
	onChange func(uid types.UID)
	clock    clock.Clock
	log      *slog.Logger
	http     *http.Client
	metrics  *probeMetrics
	// start is when the manager was made: workers started within a period
	// of it jitter their first probe (berth restarted and adopts pods).
	start time.Time
	// rand draws the jitter; handle runs a probe. Tests replace both.
	rand   func() float64
	handle probeFunc

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // every worker goroutine

	mu      sync.Mutex // guards pods, results and each worker's containerID
	pods    map[types.UID]*podProbes
	results map[resultKey]Result
}

// podProbes is what the manager knows of one pod with probes.
type podProbes struct {
	pod  *v1.Pod
	host string // the pod's IP, or the node's on the host network
	// runs is the newest runtime container of each probed container.
	runs    map[string]containerRun
	workers map[workerKey]*worker
	// killed holds, per runtime container ID, why a failed probe had it
	// killed, for its terminated state; pruned to the IDs the runtime
	// still has.
	killed map[string]string
}

// containerRun is one runtime container as a worker needs to know it.
type containerRun struct {
	id        string
	running   bool
	exited    bool
	exitCode  int32
	startedAt time.Time
}

// target is what one probe run needs of its container.
type target struct {
	container   *v1.Container
	containerID string
	host        string
}

// NewManager returns a probe manager with no workers; they start as
// UpdatePod sees running containers with probes.
func NewManager(opts Options) *Manager {
	if opts.Recorder == nil {
		opts.Recorder = discard{}
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Metrics == nil {
		opts.Metrics = prometheus.NewRegistry()
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Manager{
		exec:     opts.Exec,
		recorder: opts.Recorder,
		onChange: opts.OnChange,
		clock:    opts.Clock,
		log:      opts.Logger,
		http:     newHTTPClient(),
		metrics:  newProbeMetrics(opts.Metrics),
		start:    opts.Clock.Now(),
		rand:     rand.Float64,
		ctx:      ctx,
		cancel:   cancel,
		pods:     map[types.UID]*podProbes{},
		results:  map[resultKey]Result{},
	}
	m.handle = m.runProbe
	return m
}

// discard is the Recorder of a manager built without one.
type discard struct{}

func (discard) Event(types.UID, string, string, kuberuntime.EventType, string, string) {}

var _ podplan.ContainerHealth = (*Manager)(nil)

// UpdatePod tells the manager a pod's spec and newest runtime status (after
// each sync): workers start for running containers with probes, follow
// their containers' new runs (and probe those at once), and stop when
// their probe left the spec. hostIP is the address of host-network pods
// (the loopback when berth knows no node IP).
func (m *Manager) UpdatePod(pod *v1.Pod, status *podplan.PodStatus, hostIP string) {
	specs := probedContainers(pod)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.ctx.Err() != nil {
		return
	}
	pp := m.pods[pod.UID]
	if pp == nil {
		if len(specs) == 0 {
			return
		}
		pp = &podProbes{workers: map[workerKey]*worker{}, killed: map[string]string{}}
		m.pods[pod.UID] = pp
	}
	pp.pod = pod
	pp.host = hostIP
	switch {
	case !pod.Spec.HostNetwork && status != nil && len(status.IPs) > 0:
		pp.host = status.IPs[0]
	case pod.Spec.HostNetwork && hostIP == "":
		// No node IP known: the host's loopback reaches a host-network pod.
		pp.host = "127.0.0.1"
	}
	pp.runs = map[string]containerRun{}
	live := map[string]bool{}
	if status != nil {
		for _, cs := range status.Containers {
			live[cs.ID] = true
		}
		for _, c := range specs {
			if cs := status.FindContainer(c.Name); cs != nil {
				pp.runs[c.Name] = containerRun{
					id: cs.ID, running: cs.State == podplan.ContainerStateRunning, exited: cs.State == podplan.ContainerStateExited,
					exitCode: cs.ExitCode, startedAt: cs.StartedAt,
				}
			}
		}
	}
	for id := range pp.killed {
		if !live[id] {
			delete(pp.killed, id)
		}
	}
	for key, w := range pp.workers {
		if spec := probeOf(findContainer(specs, key.container), key.kind); spec == nil || !apiequality.Semantic.DeepEqual(spec, w.spec) {
			m.stopWorkerLocked(pp, key, w)
		}
	}
	for _, c := range specs {
		run := pp.runs[c.Name]
		for _, k := range kinds {
			spec := probeOf(c, k)
			if spec == nil {
				continue
			}
			key := workerKey{container: c.Name, kind: k}
			if w, ok := pp.workers[key]; ok {
				if run.id != "" && run.id != w.containerID {
					w.poke()
				}
				continue
			}
			if run.running {
				m.startWorkerLocked(pp, pod, c.Name, k, spec)
			}
		}
	}
}

// RemovePod stops every worker of a pod and forgets its results, when its
// lane starts terminating it: a pod being stopped is neither probed nor
// restarted for a failed probe.
func (m *Manager) RemovePod(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pp := m.pods[uid]
	if pp == nil {
		return
	}
	for key, w := range pp.workers {
		m.stopWorkerLocked(pp, key, w)
	}
	delete(m.pods, uid)
	m.metrics.forget(pp.pod)
}

// Stop stops every worker and waits for their goroutines, when the agent
// stops.
func (m *Manager) Stop() {
	m.mu.Lock()
	m.cancel()
	m.mu.Unlock()
	m.wg.Wait()
}

// Ready reports whether a running container of a pod counts as ready: it
// started (startup probe passed, if any) and passed its readiness probe,
// if it has one. It is the agent's statusInput.ready.
func (m *Manager) Ready(uid types.UID, container string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	pp := m.pods[uid]
	if pp == nil {
		return true
	}
	c := findContainer(probedContainers(pp.pod), container)
	if c == nil {
		return true
	}
	id := pp.runs[container].id
	if !m.startedLocked(c, id) {
		return false
	}
	return c.ReadinessProbe == nil || m.results[resultKey{containerID: id, kind: Readiness}] == Success
}

// startedLocked reports whether a container run passed its startup probe,
// or has none.
func (m *Manager) startedLocked(c *v1.Container, id string) bool {
	return c.StartupProbe == nil || m.results[resultKey{containerID: id, kind: Startup}] == Success
}

// LivenessFailed implements podplan.ContainerHealth.
func (m *Manager) LivenessFailed(containerID string) bool {
	return m.result(containerID, Liveness) == Failure
}

// StartupFailed implements podplan.ContainerHealth.
func (m *Manager) StartupFailed(containerID string) bool {
	return m.result(containerID, Startup) == Failure
}

func (m *Manager) result(containerID string, k Kind) Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.results[resultKey{containerID: containerID, kind: k}]
}

// AnnotateStatus puts what the probes know into a pod's v1 status built
// from the runtime: a running container is started only once its startup
// probe passed, and a container a failed probe killed says so in its
// terminated state (unless it left a termination message of its own).
func (m *Manager) AnnotateStatus(uid types.UID, st *v1.PodStatus) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pp := m.pods[uid]
	if pp == nil {
		return
	}
	specs := probedContainers(pp.pod)
	for _, list := range [][]v1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for i := range list {
			cs := &list[i]
			if c := findContainer(specs, cs.Name); c != nil && cs.State.Running != nil && cs.Started != nil && *cs.Started &&
				!m.startedLocked(c, pp.runs[cs.Name].id) {
				started := false
				cs.Started = &started
			}
			for _, term := range []*v1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
				if term == nil || term.Message != "" {
					continue
				}
				if msg, ok := pp.killed[trimRuntime(term.ContainerID)]; ok {
					term.Message = msg
				}
			}
		}
	}
}

// trimRuntime strips the runtime prefix of a v1 container ID.
func trimRuntime(id string) string {
	if i := strings.Index(id, "://"); i >= 0 {
		return id[i+3:]
	}
	return id
}

func (m *Manager) startWorkerLocked(pp *podProbes, pod *v1.Pod, container string, k Kind, spec *v1.Probe) {
	ctx, cancel := context.WithCancel(m.ctx)
	w := &worker{
		m: m, uid: pod.UID, pod: pod.Namespace + "/" + pod.Name, name: pod.Name, namespace: pod.Namespace,
		container: container, kind: k, spec: spec.DeepCopy(),
		ctx: ctx, cancel: cancel, trigger: make(chan struct{}, 1),
	}
	pp.workers[workerKey{container: container, kind: k}] = w
	m.wg.Add(1)
	go w.run()
}

// stopWorkerLocked stops a worker and drops its result: the probe no
// longer exists for the container.
func (m *Manager) stopWorkerLocked(pp *podProbes, key workerKey, w *worker) {
	w.cancel()
	delete(pp.workers, key)
	delete(m.results, resultKey{containerID: w.containerID, kind: w.kind})
}

// workerExited forgets a worker that stopped on its own (its container
// exited for good), so a later run of the container gets a new one.
func (m *Manager) workerExited(w *worker) {
	m.mu.Lock()
	defer m.mu.Unlock()
	w.cancel()
	pp := m.pods[w.uid]
	key := workerKey{container: w.container, kind: w.kind}
	if pp != nil && pp.workers[key] == w {
		m.stopWorkerLocked(pp, key, w)
	}
}

// jitter is how long a new worker waits before its first probe: a random
// part of its period while berth has been up for less than a period (the
// workers of adopted pods all start at once), else nothing, so a new
// container is probed as soon as it runs.
func (m *Manager) jitter(period time.Duration) time.Duration {
	if m.clock.Since(m.start) >= period {
		return 0
	}
	return time.Duration(m.rand() * float64(period))
}

// snapshot is what a worker's turn starts from.
type snapshot struct {
	target
	run containerRun
	// newRun: the worker moved to a new container run.
	newRun bool
	// started: the run passed its startup probe, or has none.
	started bool
	// restarts: the container will run again after it exited.
	restarts bool
}

// snapshot reads what worker w needs for one turn, moving it to the
// container's newest run (whose result starts at the kind's initial
// value). ok is false when the worker was stopped.
func (m *Manager) snapshot(w *worker) (snapshot, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	pp := m.pods[w.uid]
	if pp == nil || w.ctx.Err() != nil {
		return snapshot{}, false
	}
	c := findContainer(probedContainers(pp.pod), w.container)
	if c == nil {
		return snapshot{}, false
	}
	run := pp.runs[w.container]
	s := snapshot{run: run, target: target{container: c, containerID: run.id, host: pp.host}}
	if run.id != w.containerID {
		delete(m.results, resultKey{containerID: w.containerID, kind: w.kind})
		w.containerID = run.id
		if run.id != "" {
			m.results[resultKey{containerID: run.id, kind: w.kind}] = initialResult(w.kind)
		}
		s.newRun = true
	}
	s.started = m.startedLocked(c, run.id)
	s.restarts = restarts(pp.pod, c, run.exitCode)
	return s, true
}

// setResult records a worker's result for a container run and, when it
// changed, tells the pod's lane; a startup probe that passed wakes the
// container's other workers, which it held back. A failed liveness or
// startup probe has the run killed: why is recorded under the same lock, so
// the lane that kills it on this news finds the reason for its terminated
// state in every status it builds.
func (m *Manager) setResult(w *worker, containerID string, r Result) {
	m.mu.Lock()
	key := resultKey{containerID: containerID, kind: w.kind}
	prev, had := m.results[key]
	if w.containerID != containerID || w.ctx.Err() != nil {
		m.mu.Unlock()
		return
	}
	m.results[key] = r
	if r == Failure && (w.kind == Liveness || w.kind == Startup) {
		if pp := m.pods[w.uid]; pp != nil {
			pp.killed[containerID] = fmt.Sprintf("Container %s failed %s probe", w.container, strings.ToLower(w.kind.String()))
		}
	}
	changed := !had || prev != r
	if changed && w.kind == Startup && r == Success {
		if pp := m.pods[w.uid]; pp != nil {
			for key, other := range pp.workers {
				if key.container == w.container && other != w {
					other.poke()
				}
			}
		}
	}
	m.mu.Unlock()
	if changed {
		m.log.Debug("probe result changed", "pod", w.name, "namespace", w.namespace, "uid", w.uid, "container", w.container,
			"probe", w.kind.label(), "from", prev.String(), "to", r.String())
		if m.onChange != nil {
			m.onChange(w.uid)
		}
	}
}

// probe runs one probe for worker w and makes it visible: metrics, and an
// Unhealthy event for a failure or a broken probe, as the kubelet records
// them.
func (m *Manager) probe(w *worker, t target) (Result, error) {
	began := m.clock.Now()
	result, output, err := m.handle(w.ctx, w, t)
	if w.ctx.Err() != nil {
		return Unknown, w.ctx.Err()
	}
	m.metrics.observe(w, result, m.clock.Since(began))
	switch {
	case err != nil:
		m.log.Warn("probe errored", "pod", w.name, "namespace", w.namespace, "uid", w.uid, "container", w.container, "probe", w.kind.label(), "err", err)
		m.recorder.Event(w.uid, w.name, w.namespace, kuberuntime.EventWarning, "Unhealthy", fmt.Sprintf("%s probe errored: %v", w.kind, err))
	case result == Failure:
		m.log.Debug("probe failed", "pod", w.name, "namespace", w.namespace, "uid", w.uid, "container", w.container, "probe", w.kind.label(), "output", output)
		m.recorder.Event(w.uid, w.name, w.namespace, kuberuntime.EventWarning, "Unhealthy", fmt.Sprintf("%s probe failed: %s", w.kind, truncate(output, 512)))
	}
	return result, err
}

// runProbe dispatches a probe to its handler with the probe's timeout.
func (m *Manager) runProbe(ctx context.Context, w *worker, t target) (Result, string, error) {
	p, timeout := w.spec, w.timeout()
	switch {
	case p.Exec != nil:
		if m.exec == nil {
			return Unknown, "", errors.New("exec probe: no runtime to exec in")
		}
		return runExec(ctx, m.exec, p.Exec, t.containerID, timeout)
	case p.HTTPGet != nil:
		return runHTTP(ctx, m.http, p.HTTPGet, t, timeout)
	case p.TCPSocket != nil:
		return runTCP(ctx, p.TCPSocket, t, timeout)
	case p.GRPC != nil:
		return runGRPC(ctx, p.GRPC, t, timeout)
	}
	return Unknown, "", errors.New("probe has no handler")
}

// probedContainers are the containers that may have probes: app
// containers and sidecars (restartable init containers).
func probedContainers(pod *v1.Pod) []*v1.Container {
	var out []*v1.Container
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways && hasProbe(c) {
			out = append(out, c)
		}
	}
	for i := range pod.Spec.Containers {
		if c := &pod.Spec.Containers[i]; hasProbe(c) {
			out = append(out, c)
		}
	}
	return out
}

func hasProbe(c *v1.Container) bool {
	return c.LivenessProbe != nil || c.ReadinessProbe != nil || c.StartupProbe != nil
}

func findContainer(cs []*v1.Container, name string) *v1.Container {
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// probeOf is a container's probe of kind k, or nil.
func probeOf(c *v1.Container, k Kind) *v1.Probe {
	if c == nil {
		return nil
	}
	switch k {
	case Liveness:
		return c.LivenessProbe
	case Readiness:
		return c.ReadinessProbe
	}
	return c.StartupProbe
}

// restarts reports whether a container that exited with code runs again:
// sidecars always, others per their restart rules and policies and the
// pod's (podplan.ContainerShouldRestart, KEP-5307).
func restarts(pod *v1.Pod, c *v1.Container, exitCode int32) bool {
	return podplan.ContainerShouldRestart(c, &pod.Spec, exitCode)
}

// truncate shortens s to at most n bytes, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
