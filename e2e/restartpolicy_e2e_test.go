//go:build e2e

package e2e

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestRestartPolicies runs a container that exits 0 or 1 under each
// restart policy: restart counts grow where the policy restarts (Always:
// both; OnFailure: exit 1 only) and stay 0 where it does not, terminal pods
// reach Succeeded or Failed and stay there, and a crashing Always container
// is shown waiting in CrashLoopBackOff between its restarts.
func TestRestartPolicies(t *testing.T) {
	tests := []struct {
		name      string
		policy    v1.RestartPolicy
		exit      int
		restarts  bool        // the policy restarts this exit
		wantPhase v1.PodPhase // terminal phase, when !restarts
	}{
		{name: "always-exit0", policy: v1.RestartPolicyAlways, exit: 0, restarts: true},
		{name: "always-exit1", policy: v1.RestartPolicyAlways, exit: 1, restarts: true},
		{name: "onfailure-exit0", policy: v1.RestartPolicyOnFailure, exit: 0, wantPhase: v1.PodSucceeded},
		{name: "onfailure-exit1", policy: v1.RestartPolicyOnFailure, exit: 1, restarts: true},
		{name: "never-exit0", policy: v1.RestartPolicyNever, exit: 0, wantPhase: v1.PodSucceeded},
		{name: "never-exit1", policy: v1.RestartPolicyNever, exit: 1, wantPhase: v1.PodFailed},
	}
	manifests := map[string]string{}
	for _, tc := range tests {
		p := newPod(tc.name, shContainer("main", fmt.Sprintf("echo run; sleep 1; exit %d", tc.exit)))
		p.Spec.RestartPolicy = tc.policy
		manifests[tc.name+".yaml"] = podManifest(p)
	}
	b := newBerth(t, berthOptions{args: fastBackoff, manifests: manifests})
	b.waitReady()
	h := watchAPI(b)
	defer h.stop()

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer b.use(t)()
			name := podName(tc.name)
			if tc.restarts {
				p := b.waitPod(name, "restartCount >= 2", func(p *v1.Pod) bool {
					cs := containerStatus(p, "main")
					return cs != nil && cs.RestartCount >= 2
				})
				if p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed {
					t.Errorf("a restarting pod is in the terminal phase %s", p.Status.Phase)
				}
				cs := containerStatus(p, "main")
				if cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != int32(tc.exit) {
					t.Errorf("lastState = %+v, want terminated with exit code %d", cs.LastTerminationState, tc.exit)
				}
				checkRuntimeRestarts(t, name, 2)
				return
			}
			p := b.waitPod(name, "phase "+string(tc.wantPhase), func(p *v1.Pod) bool {
				return p.Status.Phase == tc.wantPhase
			})
			cs := containerStatus(p, "main")
			if cs == nil || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != int32(tc.exit) {
				t.Errorf("container status = %+v, want terminated with exit code %d", cs, tc.exit)
			} else if cs.RestartCount != 0 {
				t.Errorf("restartCount = %d, want 0", cs.RestartCount)
			}
			if podReady(p) {
				t.Errorf("a %s pod is Ready", p.Status.Phase)
			}
		})
	}

	// Past the longest back-off the terminal pods must not have restarted,
	// and the restarting ones must still be restarting.
	time.Sleep(6 * time.Second)
	seen := h.stop()
	for _, tc := range tests {
		name := podName(tc.name)
		s := seen[name]
		if s == nil {
			t.Errorf("%s: never seen in /pods", name)
			continue
		}
		t.Logf("%s: phases %v, max restartCount %d, waiting reasons %v", name, keys(s.phases), s.maxRestarts, keys(s.waiting))
		if tc.restarts {
			continue
		}
		if s.maxRestarts != 0 {
			t.Errorf("%s: restartCount reached %d under restartPolicy %s with exit %d, want 0", name, s.maxRestarts, tc.policy, tc.exit)
		}
		p, err := b.apiPod(name)
		if err != nil || p == nil {
			t.Errorf("%s: gone from /pods after finishing (%v): a terminal pod's status must stay visible", name, err)
		} else if p.Status.Phase != tc.wantPhase {
			t.Errorf("%s: phase %s, want it to stay %s", name, p.Status.Phase, tc.wantPhase)
		}
		cs, err := containersOf(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(cs) > 1 || len(runningContainers(cs)) > 0 {
			t.Errorf("%s: CRI has %s, want at most the one exited container", name, describeContainers(cs))
		}
		sbs, err := sandboxesOf(name)
		if err != nil {
			t.Fatal(err)
		}
		if ready := readySandboxes(sbs); len(ready) > 0 {
			t.Errorf("%s: sandbox still ready after the pod finished: %s", name, describeSandboxes(ready))
		}
	}
	if s := seen[podName("always-exit1")]; s == nil || !s.waiting["CrashLoopBackOff"] {
		t.Errorf("the crashing Always container was never shown waiting in CrashLoopBackOff")
	}
}

// checkRuntimeRestarts checks through CRI that the pod's newest container
// carries a restart count annotation of at least min, and that no two of
// its containers run at once.
func checkRuntimeRestarts(t *testing.T, name string, min int) {
	t.Helper()
	cs, err := containersOf(name)
	if err != nil {
		t.Fatal(err)
	}
	if len(runningContainers(cs)) > 1 {
		t.Errorf("%s: several containers running: %s", name, describeContainers(cs))
	}
	max := -1
	for _, c := range cs {
		n, err := restartCountAnnotation(c)
		if err != nil {
			t.Error(err)
			continue
		}
		if n > max {
			max = n
		}
	}
	if max < min {
		t.Errorf("%s: highest restart count annotation through CRI is %d, want >= %d (%s)", name, max, min, describeContainers(cs))
	}
}

// apiWatch polls /pods in the background and records what each pod went
// through.
type apiWatch struct {
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once
	mu   sync.Mutex
	seen map[string]*podHistory
}

// podHistory is what /pods showed of one pod over time.
type podHistory struct {
	phases      map[string]bool
	waiting     map[string]bool // waiting reasons of any container
	maxRestarts int32
}

func watchAPI(b *berth) *apiWatch {
	w := &apiWatch{done: make(chan struct{}), seen: map[string]*podHistory{}}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for {
			if list, err := b.pods(); err == nil {
				w.record(list)
			}
			select {
			case <-w.done:
				return
			case <-time.After(pollEvery):
			}
		}
	}()
	return w
}

func (w *apiWatch) record(list *v1.PodList) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range list.Items {
		h := w.seen[p.Name]
		if h == nil {
			h = &podHistory{phases: map[string]bool{}, waiting: map[string]bool{}}
			w.seen[p.Name] = h
		}
		h.phases[string(p.Status.Phase)] = true
		for _, cs := range append(append([]v1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...) {
			if cs.State.Waiting != nil {
				h.waiting[cs.State.Waiting.Reason] = true
			}
			if cs.RestartCount > h.maxRestarts {
				h.maxRestarts = cs.RestartCount
			}
		}
	}
}

// stop ends the polling (once) and returns the histories.
func (w *apiWatch) stop() map[string]*podHistory {
	w.once.Do(func() { close(w.done) })
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seen
}

func keys(m map[string]bool) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}
