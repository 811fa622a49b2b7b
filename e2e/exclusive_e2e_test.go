//go:build e2e

package e2e

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestSameNameTwoSources gives berth the same pod name from the manifest
// directory and from --manifest-url (two different UIDs of one full name):
// polling CRI every 20 ms, there is never a moment with two ready sandboxes
// or two running containers of that name, exactly one of them runs and the
// other is shown waiting. Then either the running one's source drops it
// and the waiting one takes over, or the waiting one's source drops it and
// it never starts, not even once the running one is gone too.
func TestSameNameTwoSources(t *testing.T) {
	const emptyList = "apiVersion: v1\nkind: PodList\nitems: []\n"
	for _, tc := range []struct {
		name        string
		dropWaiting bool
	}{
		{name: "handover"},
		{name: "waiting-dropped", dropWaiting: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fromHTTP := sleeper("twin")
			fromHTTP.Spec.Containers[0].Env = []v1.EnvVar{{Name: "FROM", Value: "http"}}
			src := &manifestServer{code: http.StatusOK, body: podManifest(fromHTTP)}
			srv := httptest.NewServer(src)
			t.Cleanup(srv.Close)

			name := podName("twin")
			w := watchPod(name, 20*time.Millisecond)
			defer w.stop()
			b := newBerth(t, berthOptions{
				args:      []string{"--manifest-url", srv.URL + "/pods", "--http-check-frequency", "1s", "--sync-frequency", "2s"},
				manifests: map[string]string{"twin.yaml": podManifest(sleeper("twin"))},
			})
			b.waitReady()
			var running, waiting *v1.Pod
			b.waitFor("one "+name+" Running and the other waiting", waitTimeout, func() (bool, string) {
				list, err := b.pods()
				if err != nil {
					return false, err.Error()
				}
				running, waiting = nil, nil
				desc := ""
				for i := range list.Items {
					p := &list.Items[i]
					desc += describePod(p) + "; "
					switch {
					case p.Name != name:
					case p.Status.Phase == v1.PodRunning && podReady(p):
						running = p
					case p.Status.Phase == v1.PodPending:
						waiting = p
					}
				}
				return running != nil && waiting != nil, desc
			})
			b.waitRuntime(name, "main", running.UID)
			t.Logf("running: %s from %s; waiting: %s (%s: %s)", running.UID, running.Annotations["kubernetes.io/config.source"],
				waiting.UID, waiting.Status.Reason, waiting.Status.Message)

			time.Sleep(5 * time.Second) // relists, HTTP polls, resyncs
			r := w.stop()
			t.Logf("polled CRI %d times; ready sandboxes seen per uid: %v", r.samples, r.readyUIDs)
			if r.err != nil {
				t.Errorf("polling CRI: %v", r.err)
			}
			if r.maxReady > 1 || r.maxRunning > 1 {
				t.Errorf("both pods named %s ran at once: %s %s", name, r.worst, r.worstContainers)
			}
			if len(r.readyUIDs) != 1 || !r.readyUIDs[string(running.UID)] {
				t.Errorf("ready sandboxes were seen for uids %v, want only the running %s", r.readyUIDs, running.UID)
			}
			if _, ok, detail := runtimeState(name, "main", running.UID); !ok {
				t.Errorf("%s: %s", name, detail)
			}
			if p := podByUID(b, waiting.UID); p == nil || p.Status.Phase != v1.PodPending || podReady(p) {
				t.Errorf("the waiting twin %s: %v, want Pending", waiting.UID, p)
			}

			drop := func(p *v1.Pod) {
				if p.Annotations["kubernetes.io/config.source"] == "http" {
					src.set(http.StatusOK, emptyList)
				} else {
					b.removeManifest("twin.yaml")
				}
			}
			w = watchPod(name, 20*time.Millisecond)
			if !tc.dropWaiting {
				// The running one's source drops it: the waiting one takes
				// over, never together with the first.
				handover := time.Now()
				drop(running)
				b.waitRuntime(name, "main", waiting.UID)
				b.waitFor("the twin "+string(waiting.UID)+" Running in /pods", waitTimeout, func() (bool, string) {
					p := podByUID(b, waiting.UID)
					return p != nil && p.Status.Phase == v1.PodRunning, "not yet"
				})
				t.Logf("the waiting %s took over %s after its twin was dropped", waiting.UID, time.Since(handover).Round(time.Millisecond))
				r = w.stop()
				if r.maxReady > 1 || r.maxRunning > 1 {
					t.Errorf("during the handover both pods named %s ran at once: %s %s", name, r.worst, r.worstContainers)
				}
				return
			}
			// The waiting one's source drops it, then the running one's: the
			// waiting one never starts.
			drop(waiting)
			b.waitFor("the dropped waiting twin gone from /pods", waitTimeout, func() (bool, string) {
				return podByUID(b, waiting.UID) == nil, "still listed"
			})
			drop(running)
			b.waitGone(name)
			time.Sleep(3 * time.Second)
			r = w.stop()
			if r.readyUIDs[string(waiting.UID)] || r.maxReady > 1 {
				t.Errorf("the dropped waiting twin %s got a sandbox: %v %s", waiting.UID, r.readyUIDs, r.worst)
			}
			if n, err := objectsOfUID(name, waiting.UID); err != nil || n > 0 {
				t.Errorf("the dropped waiting twin has %d runtime objects (%v)", n, err)
			}
			for _, p := range b.mustPods().Items {
				t.Errorf("/pods still lists %s", describePod(&p))
			}
		})
	}
}

// podByUID returns the pod of uid from /pods, or nil.
func podByUID(b *berth, uid types.UID) *v1.Pod {
	list, err := b.pods()
	if err != nil {
		return nil
	}
	for i := range list.Items {
		if list.Items[i].UID == uid {
			return &list.Items[i]
		}
	}
	return nil
}

// TestNeverStartedContainerAfterKill mimics a SIGKILL of berth between
// CreateContainer and StartContainer of a pod's first container: the pod's
// sandbox is ready and its container is CREATED, never started. The next
// berth removes that container, and never counts it as a restart; when the
// manifest was edited meanwhile, the new version does not run while the
// old version's container exists (polled through CRI every 20 ms).
func TestNeverStartedContainerAfterKill(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit bool
	}{
		{name: "same manifest"},
		{name: "edited while down", edit: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := podName("unstarted")
			b := newBerth(t, berthOptions{manifests: map[string]string{"unstarted.yaml": podManifest(sleeper("unstarted"))}})
			b.waitReady()
			old := b.waitRuntime(name, "main", "")
			oldUID := old.sandbox.Labels[labelPodUID]
			b.kill()
			created := createNeverStarted(t, b, old)

			if tc.edit {
				edited := sleeper("unstarted")
				edited.Spec.Containers[0].Env = []v1.EnvVar{{Name: "VERSION", Value: "2"}}
				b.writeManifest("unstarted.yaml", podManifest(edited))
			}
			w := watchBeside(name, oldUID, created, 20*time.Millisecond)
			defer w.stop()
			b.start()
			b.waitReady()
			var cur runtimePod
			b.waitFor("the pod running again, the never-started container gone", waitTimeout, func() (bool, string) {
				rp, ok, detail := runtimeState(name, "main", "")
				if !ok || (tc.edit == (rp.sandbox.Labels[labelPodUID] == oldUID)) {
					return false, detail
				}
				cs, err := containersOf(name)
				if err != nil {
					return false, err.Error()
				}
				for _, c := range cs {
					if c.Id == created {
						return false, "the never-started container " + shortID(created) + " is still there"
					}
				}
				cur = rp
				return true, detail
			})
			if tc.edit {
				b.waitFor("the old uid's objects removed", waitTimeout, func() (bool, string) {
					n, err := objectsOfUID(name, types.UID(oldUID))
					return err == nil && n == 0, fmt.Sprintf("%d left (%v)", n, err)
				})
			}
			samples, beside := w.stop()
			t.Logf("polled CRI %d times", samples)
			if beside != "" {
				t.Errorf("the new version ran beside the old version's never-started container: %s", beside)
			}
			if n, err := restartCountAnnotation(cur.container); err != nil || n != 0 {
				t.Errorf("running container's restart count %d (%v); a container that never started is no restart (want 0)", n, err)
			}
			p := b.waitPod(name, "Running", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodRunning })
			if cs := containerStatus(p, "main"); cs == nil || cs.RestartCount != 0 {
				t.Errorf("/pods shows %s; want restartCount 0", describePod(p))
			}
		})
	}
}

// createNeverStarted creates, through CRI, what a berth killed between
// CreateContainer and StartContainer leaves: the pod's running container
// gone, and a berth-labelled copy of it CREATED in the same sandbox, never
// started. It returns the new container's ID.
func createNeverStarted(t *testing.T, b *berth, rp runtimePod) string {
	t.Helper()
	ctx, cancel := criCtx()
	defer cancel()
	rt := bed.Runtime()
	if _, err := rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: rp.container.Id, Timeout: 0}); err != nil {
		t.Fatalf("stop container %s: %v", shortID(rp.container.Id), err)
	}
	if _, err := rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: rp.container.Id}); err != nil {
		t.Fatalf("remove container %s: %v", shortID(rp.container.Id), err)
	}
	l := rp.sandbox.Labels
	sandboxConfig := &runtimeapi.PodSandboxConfig{
		Metadata:     rp.sandbox.Metadata,
		Labels:       rp.sandbox.Labels,
		LogDirectory: filepath.Join(b.logs, l[labelPodNamespace]+"_"+l[labelPodName]+"_"+l[labelPodUID]),
	}
	// The runtime opens a container's log at its start: a container killed
	// before it has none.
	if err := os.Remove(filepath.Join(sandboxConfig.LogDirectory, "main", "0.log")); err != nil {
		t.Fatalf("remove the stopped container's log: %v", err)
	}
	c, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId: rp.sandbox.Id,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "main"},
			Image:    &runtimeapi.ImageSpec{Image: rp.container.Image.GetImage(), UserSpecifiedImage: bed.BusyboxImage},
			// The namespaces berth gave the pod, as the kubelet passes them:
			// CRI-O refuses a container whose PID namespace differs.
			Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD},
			}},
			Command:     []string{"sh", "-c", sleepForever},
			Labels:      rp.container.Labels,
			Annotations: rp.container.Annotations,
			LogPath:     "main/0.log",
		},
		SandboxConfig: sandboxConfig,
	})
	if err != nil {
		t.Fatalf("CreateContainer: %v", err)
	}
	st, err := rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: c.ContainerId})
	if err != nil || st.Status.State != runtimeapi.ContainerState_CONTAINER_CREATED {
		t.Fatalf("the new container: %v, %v; want CREATED", st, err)
	}
	return c.ContainerId
}

// besideWatch polls CRI for a moment where another UID of a pod name has a
// ready sandbox or a created or running container while one container of
// the old UID still exists.
type besideWatch struct {
	done    chan struct{}
	wg      sync.WaitGroup
	samples int
	beside  string
}

func watchBeside(name, oldUID, container string, period time.Duration) *besideWatch {
	w := &besideWatch{done: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			w.sample(name, oldUID, container)
			select {
			case <-w.done:
				return
			case <-tick.C:
			}
		}
	}()
	return w
}

func (w *besideWatch) sample(name, oldUID, container string) {
	sbs, err := sandboxesOf(name)
	if err != nil {
		return
	}
	cs, err := containersOf(name)
	if err != nil {
		return
	}
	w.samples++
	exists := false
	var others []string
	for _, c := range cs {
		if c.Id == container {
			exists = true
		}
		if c.Labels[labelPodUID] != oldUID && c.State != runtimeapi.ContainerState_CONTAINER_EXITED {
			others = append(others, fmt.Sprintf("container %s of uid %s %s", shortID(c.Id), c.Labels[labelPodUID], c.State))
		}
	}
	for _, s := range readySandboxes(sbs) {
		if s.Labels[labelPodUID] != oldUID {
			others = append(others, fmt.Sprintf("sandbox %s of uid %s ready", shortID(s.Id), s.Labels[labelPodUID]))
		}
	}
	if exists && len(others) > 0 && w.beside == "" {
		w.beside = fmt.Sprintf("%v while %s exists", others, shortID(container))
	}
}

func (w *besideWatch) stop() (int, string) {
	select {
	case <-w.done:
	default:
		close(w.done)
	}
	w.wg.Wait()
	return w.samples, w.beside
}
