//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestAdoptAfterSIGKILL runs 20 pods, kills berth with SIGKILL and starts
// it again on the same directories: the new berth adopts every pod, so the
// runtime holds exactly the same sandboxes and containers before and after
// (no restart, no duplicate), and /pods shows them all Running with 0
// restarts.
func TestAdoptAfterSIGKILL(t *testing.T) {
	const n = 20
	manifests := map[string]string{}
	var names []string
	for i := range n {
		m := fmt.Sprintf("adopt-%02d", i)
		p := sleeper(m)
		p.Spec.HostNetwork = i%2 == 1 // half on the host network, half on the pod network
		manifests[m+".yaml"] = podManifest(p)
		names = append(names, podName(m))
	}
	b := newBerth(t, berthOptions{manifests: manifests})
	b.waitReady()
	took := b.waitFor(fmt.Sprintf("all %d pods Running in /pods and through CRI", n), 3*waitTimeout, func() (bool, string) {
		return allRunning(b, names)
	})
	t.Logf("%d pods running %s after berth became ready", n, took.Round(time.Millisecond))
	before := managedSnapshot(t)
	if len(before.running) != n {
		t.Fatalf("runtime before the kill: %d running containers, want %d: %s", len(before.running), n, before)
	}

	b.kill()
	// The pods outlive berth.
	if now := managedSnapshot(t); now.String() != before.String() {
		t.Fatalf("berth's SIGKILL changed the runtime:\nbefore: %s\nafter:  %s", before, now)
	}

	restarted := time.Now()
	b.start()
	ready := b.waitReady()
	t.Logf("restart with %d pods: /readyz 200 after %s", n, ready.Round(time.Millisecond))
	b.waitFor(fmt.Sprintf("all %d pods Running in /pods", n), waitTimeout, func() (bool, string) {
		return allRunning(b, names)
	})
	t.Logf("restart with %d pods: /pods shows all Running %s after start", n, time.Since(restarted).Round(time.Millisecond))
	// Each adopted pod's lane began from the first relist's reading: the
	// restart listed the runtime only for relists (one may be under way),
	// not once more for each pod.
	lists := metricValue(t, b, `berth_runtime_operations_total{operation_type="list_podsandbox"}`)
	relists := metricValue(t, b, "berth_pleg_relist_duration_seconds_count")
	if lists == 0 || lists > relists+1 {
		t.Errorf("restart with %d pods listed sandboxes %v times over %v relists; want only the relists'", n, lists, relists)
	}

	list := b.mustPods()
	for _, p := range list.Items {
		cs := containerStatus(&p, "main")
		if cs == nil {
			t.Errorf("%s: no status of container main", p.Name)
			continue
		}
		if cs.RestartCount != 0 {
			t.Errorf("%s: restartCount %d after adoption, want 0", p.Name, cs.RestartCount)
		}
		if id := before.byPod[p.Name]; shortID(cs.ContainerID) != shortID(id) {
			t.Errorf("%s: /pods shows container %s, the adopted one is %s", p.Name, shortID(cs.ContainerID), shortID(id))
		}
	}
	// Let a few relists and housekeeping periods pass: still nothing new.
	time.Sleep(4 * time.Second)
	if after := managedSnapshot(t); after.String() != before.String() {
		t.Errorf("berth's restart changed the runtime (containers restarted or duplicated):\nbefore: %s\nafter:  %s", before, after)
	}
}

// allRunning says whether /pods shows every pod of names Running and Ready
// and CRI shows each with one ready sandbox and one running container.
func allRunning(b *berth, names []string) (bool, string) {
	list, err := b.pods()
	if err != nil {
		return false, err.Error()
	}
	byName := map[string]*v1.Pod{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	var notYet []string
	for _, name := range names {
		p := byName[name]
		if p == nil || p.Status.Phase != v1.PodRunning || !podReady(p) {
			notYet = append(notYet, name)
			continue
		}
		if _, ok, _ := runtimeState(name, "main", p.UID); !ok {
			notYet = append(notYet, name+"(internal/kuberuntime)")
		}
	}
	return len(notYet) == 0, fmt.Sprintf("%d of %d not running yet: %v", len(notYet), len(names), notYet)
}

// snapshot is every berth-owned sandbox and container of the bed.
type snapshot struct {
	sandboxes []string          // "id state uid"
	running   []string          // running container ids
	all       []string          // "id state pod" of every container
	byPod     map[string]string // pod name -> running container id
}

func (s snapshot) String() string {
	return fmt.Sprintf("sandboxes %v; containers %v", s.sandboxes, s.all)
}

func managedSnapshot(t *testing.T) snapshot {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	managed := map[string]string{labelManaged: "true"}
	sbs, err := bed.Runtime().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{LabelSelector: managed}})
	if err != nil {
		t.Fatalf("ListPodSandbox: %v", err)
	}
	cs, err := bed.Runtime().ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{LabelSelector: managed}})
	if err != nil {
		t.Fatalf("ListContainers: %v", err)
	}
	s := snapshot{byPod: map[string]string{}}
	for _, sb := range sbs.Items {
		s.sandboxes = append(s.sandboxes, fmt.Sprintf("%s %s %s", shortID(sb.Id), strings.TrimPrefix(sb.State.String(), "SANDBOX_"), sb.Labels[labelPodName]))
	}
	for _, c := range cs.Containers {
		s.all = append(s.all, fmt.Sprintf("%s %s %s", shortID(c.Id), strings.TrimPrefix(c.State.String(), "CONTAINER_"), c.Labels[labelPodName]))
		if c.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			s.running = append(s.running, c.Id)
			s.byPod[c.Labels[labelPodName]] = c.Id
		}
	}
	sort.Strings(s.sandboxes)
	sort.Strings(s.all)
	sort.Strings(s.running)
	return s
}

// TestChangedWhileDown edits or removes a manifest while berth is stopped:
// the restarted berth replaces the edited pod (old uid stopped before the
// new one starts, never both ready at once, polled every 20 ms) and stops
// and removes the pod whose manifest is gone, while the untouched pod next
// to them keeps its container.
func TestChangedWhileDown(t *testing.T) {
	b := newBerth(t, berthOptions{manifests: map[string]string{
		"steady.yaml": podManifest(sleeper("steady")),
		"edited.yaml": podManifest(sleeper("edited")),
		"gone.yaml":   podManifest(sleeper("gone")),
	}})
	b.waitReady()
	names := []string{podName("steady"), podName("edited"), podName("gone")}
	b.waitFor("all pods running", waitTimeout, func() (bool, string) { return allRunning(b, names) })
	steady, _, _ := runtimeState(podName("steady"), "main", "")
	old, ok, detail := runtimeState(podName("edited"), "main", "")
	if !ok {
		t.Fatalf("edited: %s", detail)
	}
	oldUID := old.sandbox.Labels[labelPodUID]

	b.stop()
	edited := sleeper("edited")
	edited.Spec.Containers[0].Env = []v1.EnvVar{{Name: "VERSION", Value: "2"}}
	b.writeManifest("edited.yaml", podManifest(edited))
	b.removeManifest("gone.yaml")
	w := watchPod(podName("edited"), 20*time.Millisecond)
	defer w.stop()
	restarted := time.Now()
	b.start()
	b.waitReady()

	var cur runtimePod
	b.waitFor("the edited pod running with a new uid", waitTimeout, func() (bool, string) {
		rp, ok, detail := runtimeState(podName("edited"), "main", "")
		if ok && rp.sandbox.Labels[labelPodUID] != oldUID {
			cur = rp
			return true, detail
		}
		return false, detail
	})
	t.Logf("restart -> edited pod running with its new uid after %s", time.Since(restarted).Round(time.Millisecond))
	took := b.waitGone(podName("gone"))
	t.Logf("restart -> removed manifest's pod gone after %s (from then)", took.Round(time.Millisecond))
	b.waitFor("the old uid's objects removed", waitTimeout, func() (bool, string) {
		n, err := objectsOfUID(podName("edited"), types.UID(oldUID))
		return err == nil && n == 0, fmt.Sprintf("%d left (%v)", n, err)
	})
	r := w.stop()
	if r.maxReady > 1 || r.maxRunning > 1 {
		t.Errorf("old and new edited pod ran at once: %s %s", r.worst, r.worstContainers)
	}
	if !r.readyUIDs[cur.sandbox.Labels[labelPodUID]] {
		t.Errorf("the poll never saw the new uid ready: %v", r.readyUIDs)
	}
	if now, ok, detail := runtimeState(podName("steady"), "main", ""); !ok || now.container.Id != steady.container.Id {
		t.Errorf("the untouched pod was disturbed: %s (container %s, was %s)", detail, shortID(now.container.GetId()), shortID(steady.container.GetId()))
	}
	if p, _ := b.apiPod(podName("gone")); p != nil {
		t.Errorf("/pods still lists the removed pod: %s", describePod(p))
	}
}
