//go:build e2e

package e2e

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// TestMaxPods starts berth with --max-pods 1 and two manifests: one pod
// runs, the other is shown Failed with reason OutOfpods and never gets a
// sandbox, not even over several resync periods.
func TestMaxPods(t *testing.T) {
	names := []string{podName("cap-a"), podName("cap-b")}
	b := newBerth(t, berthOptions{
		args: []string{"--max-pods", "1", "--sync-frequency", "2s"},
		manifests: map[string]string{
			"cap-a.yaml": podManifest(sleeper("cap-a")),
			"cap-b.yaml": podManifest(sleeper("cap-b")),
		},
		noStart: true,
	})
	watches := map[string]*podWatch{}
	for _, name := range names {
		watches[name] = watchPod(name, 50*time.Millisecond)
	}
	stopWatches := func() map[string]watchResult {
		out := map[string]watchResult{}
		for name, w := range watches {
			if w != nil {
				out[name] = w.stop()
				watches[name] = nil
			}
		}
		return out
	}
	defer stopWatches()
	b.start()
	b.waitReady()

	var running, rejected *v1.Pod
	b.waitFor("one pod Running and the other Failed", waitTimeout, func() (bool, string) {
		list, err := b.pods()
		if err != nil {
			return false, err.Error()
		}
		running, rejected = nil, nil
		var desc string
		for i := range list.Items {
			p := &list.Items[i]
			desc += describePod(p) + "; "
			switch p.Status.Phase {
			case v1.PodRunning:
				running = p
			case v1.PodFailed:
				rejected = p
			}
		}
		return len(list.Items) == 2 && running != nil && rejected != nil && podReady(running), desc
	})
	t.Logf("admitted %s, rejected %s: %s %q", running.Name, rejected.Name, rejected.Status.Reason, rejected.Status.Message)
	if rejected.Status.Reason != "OutOfpods" {
		t.Errorf("rejected pod's reason = %q, want OutOfpods (message %q)", rejected.Status.Reason, rejected.Status.Message)
	}
	if rejected.Status.Message == "" {
		t.Errorf("rejected pod has no message")
	}
	b.waitRuntime(running.Name, "main", running.UID)

	time.Sleep(5 * time.Second) // relists, housekeeping and two resyncs
	seen := stopWatches()
	if r := seen[rejected.Name]; len(r.readyUIDs) > 0 || r.maxRunning > 0 {
		t.Errorf("the rejected pod %s got a sandbox or a container: ready uids %v, %s", rejected.Name, r.readyUIDs, r.worst)
	}
	sbs, err := sandboxesOf(rejected.Name)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := containersOf(rejected.Name)
	if err != nil {
		t.Fatal(err)
	}
	if len(sbs)+len(cs) > 0 {
		t.Errorf("the rejected pod %s has runtime objects: %s %s", rejected.Name, describeSandboxes(sbs), describeContainers(cs))
	}
	p, err := b.apiPod(rejected.Name)
	if err != nil || p == nil || p.Status.Phase != v1.PodFailed || p.Status.Reason != "OutOfpods" {
		t.Errorf("rejected pod later: %v %s", err, func() string {
			if p == nil {
				return "absent"
			}
			return describePod(p)
		}())
	}
	if _, ok, detail := runtimeState(running.Name, "main", running.UID); !ok {
		t.Errorf("the admitted pod %s: %s", running.Name, detail)
	}
}
