//go:build e2e

package e2e

import (
	"fmt"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestEditStopsOldBeforeNew edits a running pod's manifest (a new UID for
// the same full name) while polling CRI every 20 ms: there must never be a
// moment with two ready sandboxes (or two running containers) of that pod
// name, and the new UID must run in the end.
func TestEditStopsOldBeforeNew(t *testing.T) {
	b := newBerth(t, berthOptions{})
	b.waitReady()

	for _, tc := range []struct {
		name        string
		hostNetwork bool
	}{
		{name: "edit-podnet"},
		{name: "edit-hostnet", hostNetwork: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			defer b.use(t)()
			name := podName(tc.name)
			pod := sleeper(tc.name)
			pod.Spec.HostNetwork = tc.hostNetwork
			b.writeManifest(tc.name+".yaml", podManifest(pod))
			old := b.waitRunning(name)
			oldRT := b.waitRuntime(name, "main", old.UID)

			w := watchPod(name, 20*time.Millisecond)
			edited := sleeper(tc.name)
			edited.Spec.HostNetwork = tc.hostNetwork
			edited.Spec.Containers[0].Env = []v1.EnvVar{{Name: "VERSION", Value: "2"}}
			written := time.Now()
			b.writeManifest(tc.name+".yaml", podManifest(edited))

			var newRT runtimePod
			b.waitFor("the edited pod (a new uid) running through CRI", waitTimeout, func() (bool, string) {
				rp, ok, detail := runtimeState(name, "main", "")
				if ok && rp.sandbox.Labels[labelPodUID] != string(old.UID) {
					newRT = rp
					return true, detail
				}
				return false, detail
			})
			took := time.Since(written)
			t.Logf("manifest edited -> new container RUNNING (seen through CRI) in %s", took.Round(time.Millisecond))

			cur := b.waitRunning(name)
			if cur.UID == old.UID {
				t.Fatalf("/pods still shows the old uid %s", old.UID)
			}
			if got := newRT.sandbox.Labels[labelPodUID]; got != string(cur.UID) {
				t.Errorf("running sandbox has uid %s, /pods shows %s", got, cur.UID)
			}
			if cs := containerStatus(cur, "main"); cs == nil || cs.RestartCount != 0 {
				t.Errorf("new pod's container status = %+v, want restartCount 0", cs)
			}
			// The old pod's objects go away; keep polling meanwhile.
			b.waitFor("the old uid's containers and sandbox removed", waitTimeout, func() (bool, string) {
				n, err := objectsOfUID(name, old.UID)
				if err != nil {
					return false, err.Error()
				}
				return n == 0, fmt.Sprintf("%d objects of uid %s left", n, old.UID)
			})
			time.Sleep(500 * time.Millisecond) // a few more samples in the steady state
			r := w.stop()

			t.Logf("polled CRI %d times during the edit; ready sandboxes seen per uid: %v", r.samples, r.readyUIDs)
			if r.err != nil {
				t.Errorf("polling CRI: %v", r.err)
			}
			if r.maxReady > 1 {
				t.Errorf("there was a moment with %d ready sandboxes of %s: %s", r.maxReady, name, r.worst)
			}
			if r.maxRunning > 1 {
				t.Errorf("there was a moment with %d running containers of %s: %s", r.maxRunning, name, r.worstContainers)
			}
			if !r.readyUIDs[string(old.UID)] || !r.readyUIDs[string(cur.UID)] {
				t.Errorf("the poll did not see both the old (%s) and the new (%s) sandbox ready: %v", old.UID, cur.UID, r.readyUIDs)
			}
			if newRT.container.Id == oldRT.container.Id || newRT.sandbox.Id == oldRT.sandbox.Id {
				t.Errorf("the edited pod reuses the old sandbox %s or container %s", shortID(oldRT.sandbox.Id), shortID(oldRT.container.Id))
			}
			list := b.mustPods()
			n := 0
			for _, p := range list.Items {
				if p.Name == name {
					n++
				}
			}
			if n != 1 {
				t.Errorf("/pods lists %s %d times, want once", name, n)
			}
		})
	}
}

// podWatch polls CRI for one pod name in the background.
type podWatch struct {
	done chan struct{}
	once sync.Once
	wg   sync.WaitGroup
	res  watchResult
}

// watchResult is what a podWatch saw.
type watchResult struct {
	samples         int
	maxReady        int             // most ready sandboxes at one moment
	maxRunning      int             // most running containers at one moment
	worst           string          // the sandboxes at the worst moment
	worstContainers string          // the containers at the worst moment
	readyUIDs       map[string]bool // uids seen with a ready sandbox
	err             error
}

// watchPod starts polling the sandboxes and containers of the pod name
// every period.
func watchPod(name string, period time.Duration) *podWatch {
	w := &podWatch{done: make(chan struct{}), res: watchResult{readyUIDs: map[string]bool{}}}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			w.sample(name)
			select {
			case <-w.done:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *podWatch) sample(name string) {
	sbs, err := sandboxesOf(name)
	if err != nil {
		if w.res.err == nil {
			w.res.err = err
		}
		return
	}
	cs, err := containersOf(name)
	if err != nil {
		if w.res.err == nil {
			w.res.err = err
		}
		return
	}
	w.res.samples++
	ready := readySandboxes(sbs)
	for _, s := range ready {
		w.res.readyUIDs[s.Labels[labelPodUID]] = true
	}
	if len(ready) > w.res.maxReady {
		w.res.maxReady = len(ready)
		w.res.worst = describeSandboxes(ready)
	}
	running := runningContainers(cs)
	if len(running) > w.res.maxRunning {
		w.res.maxRunning = len(running)
		w.res.worstContainers = describeContainers(running)
	}
}

// stop ends the polling (once) and returns what it saw.
func (w *podWatch) stop() watchResult {
	w.once.Do(func() { close(w.done) })
	w.wg.Wait()
	return w.res
}

func describeSandboxes(sbs []*runtimeapi.PodSandbox) string {
	s := ""
	for _, sb := range sbs {
		s += fmt.Sprintf("[sandbox %s uid %s %s] ", shortID(sb.Id), sb.Labels[labelPodUID], sb.State)
	}
	return s
}

func describeContainers(cs []*runtimeapi.Container) string {
	s := ""
	for _, c := range cs {
		s += fmt.Sprintf("[container %s %s uid %s %s] ", shortID(c.Id), c.Labels[labelContainerName], c.Labels[labelPodUID], c.State)
	}
	return s
}

// objectsOfUID counts the sandboxes and containers of pod name with uid.
func objectsOfUID(name string, uid types.UID) (int, error) {
	sbs, err := sandboxesOf(name)
	if err != nil {
		return 0, err
	}
	cs, err := containersOf(name)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, s := range sbs {
		if s.Labels[labelPodUID] == string(uid) {
			n++
		}
	}
	for _, c := range cs {
		if c.Labels[labelPodUID] == string(uid) {
			n++
		}
	}
	return n, nil
}
