//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// registryPod is a sleeper named name whose container runs image from
// the bed's registry (pulled at every start, with the registry's
// credentials), as a manifest with its image pull Secret; env marks a
// version.
func registryPod(name, image, env string) string {
	p := sleeper(name)
	p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "regcred"}}
	p.Spec.Containers[0].Image = image
	p.Spec.Containers[0].ImagePullPolicy = v1.PullAlways
	p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "VERSION", Value: env}}
	return pullSecret("regcred", registryPassword) + "---\n" + podManifest(p)
}

// localPod is registryPod's pod on the bed's local busybox, never pulled.
func localPod(name, env string) string {
	p := sleeper(name)
	p.Spec.ImagePullSecrets = []v1.LocalObjectReference{{Name: "regcred"}}
	p.Spec.Containers[0].ImagePullPolicy = v1.PullNever
	p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "VERSION", Value: env}}
	return pullSecret("regcred", registryPassword) + "---\n" + podManifest(p)
}

// allEvents reads every event berth keeps, oldest first.
func (b *berth) allEvents() ([]v1.Event, error) {
	code, body, err := b.getUnix("/events")
	if err != nil {
		return nil, err
	}
	if code != 200 {
		return nil, fmt.Errorf("GET /events: %d %s", code, body)
	}
	var list v1.EventList
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// eventIndex is the index in events of the first event of uid with
// reason whose message contains msg, or -1.
func eventIndex(events []v1.Event, uid types.UID, reason, msg string) int {
	return slices.IndexFunc(events, func(e v1.Event) bool {
		return e.InvolvedObject.UID == uid && e.Reason == reason && strings.Contains(e.Message, msg)
	})
}

// logLine is the index of the first line of berth's log that match
// accepts, or -1.
func (b *berth) logLine(match func(string) bool) int {
	data, err := os.ReadFile(b.logFile)
	if err != nil {
		b.t.Fatal(err)
	}
	return slices.IndexFunc(strings.Split(string(data), "\n"), match)
}

// namedPod is the pod /pods/default/name shows for the name.
func (b *berth) namedPod(name string) (*v1.Pod, error) {
	code, body, err := b.getUnix("/pods/default/" + name)
	if err != nil {
		return nil, err
	}
	if code != 200 {
		return nil, fmt.Errorf("GET /pods/default/%s: %d %s", name, code, body)
	}
	var p v1.Pod
	if err := json.Unmarshal(body, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// versionOf is the pod of /pods named name with a UID other than old, or
// nil.
func (b *berth) versionOf(name string, old types.UID) *v1.Pod {
	list, err := b.pods()
	if err != nil {
		return nil
	}
	for i, p := range list.Items {
		if p.Name == name && p.UID != old {
			return &list.Items[i]
		}
	}
	return nil
}

// TestEditPullsBeforeStop edits a running pod to an image only the bed's
// registry has: berth pulls it while the old version runs, and stops the
// old version only once the image is there; the old container is still
// running when the new image's Pulled event is recorded (berth records
// the old version's Killing after it), and the two versions never run at
// once.
func TestEditPullsBeforeStop(t *testing.T) {
	b := newBerth(t, berthOptions{})
	b.waitReady()
	name := podName("prepull")
	b.writeManifest("prepull.yaml", localPod("prepull", "1"))
	old := b.waitRunning(name)
	oldRT := b.waitRuntime(name, "main", old.UID)

	w := watchPod(name, 20*time.Millisecond)
	b.writeManifest("prepull.yaml", registryPod("prepull", bed.RegistryBusyboxImage, "2"))
	var cur *v1.Pod
	b.waitFor("the edited pod (a new uid) running", waitTimeout, func() (bool, string) {
		cur = b.versionOf(name, old.UID)
		if cur == nil {
			return false, "no new version yet"
		}
		return cur.Status.Phase == v1.PodRunning, describePod(cur)
	})
	newRT := b.waitRuntime(name, "main", cur.UID)
	if newRT.container.Id == oldRT.container.Id {
		t.Fatal("the new version runs the old container")
	}
	r := w.stop()
	if r.err != nil {
		t.Errorf("polling CRI: %v", r.err)
	}
	if r.maxRunning > 1 || r.maxReady > 1 {
		t.Errorf("two versions ran at once: %s %s", r.worst, r.worstContainers)
	}

	events, err := b.allEvents()
	if err != nil {
		t.Fatal(err)
	}
	pulling := eventIndex(events, cur.UID, "PullingBeforeStop", string(old.UID))
	pulled := eventIndex(events, cur.UID, "Pulled", "Successfully pulled image")
	prePulled := eventIndex(events, cur.UID, "PulledBeforeStop", string(old.UID))
	t.Logf("events of the new version: PullingBeforeStop #%d, Pulled #%d, PulledBeforeStop #%d", pulling, pulled, prePulled)
	if pulling < 0 || pulled < 0 || prePulled < 0 || !(pulling < pulled && pulled < prePulled) {
		t.Errorf("events of the new version out of order or missing (PullingBeforeStop %d, Pulled %d, PulledBeforeStop %d):\n%+v", pulling, pulled, prePulled, events)
	}
	// The old version's events go with it; berth's log keeps them in the
	// order they were recorded.
	pulledLine := b.logLine(func(l string) bool {
		return strings.Contains(l, "event=Pulled") && strings.Contains(l, "uid="+string(cur.UID)) && strings.Contains(l, "Successfully pulled")
	})
	killingLine := b.logLine(func(l string) bool {
		return strings.Contains(l, "event=Killing") && strings.Contains(l, "uid="+string(old.UID))
	})
	t.Logf("log: new image Pulled at line %d, old container Killing at line %d", pulledLine, killingLine)
	if pulledLine < 0 || killingLine < 0 || pulledLine > killingLine {
		t.Errorf("the old container was not running when the new image was pulled: Pulled at log line %d, Killing at %d", pulledLine, killingLine)
	}
	b.waitFor("the old uid's objects removed", waitTimeout, func() (bool, string) {
		n, err := objectsOfUID(name, old.UID)
		if err != nil {
			return false, err.Error()
		}
		return n == 0, fmt.Sprintf("%d objects of uid %s left", n, old.UID)
	})
}

// TestEditUnpullableImageKeepsOld edits a running pod to a tag the
// registry does not have: the old version keeps running (same container,
// no restart), the new version shows the failed pull (status, condition,
// event, berth describe), and retries; a fixed manifest then replaces the
// old version.
func TestEditUnpullableImageKeepsOld(t *testing.T) {
	b := newBerth(t, berthOptions{})
	b.waitReady()
	name := podName("badtag")
	b.writeManifest("badtag.yaml", localPod("badtag", "1"))
	old := b.waitRunning(name)
	oldRT := b.waitRuntime(name, "main", old.UID)

	missing := bed.Registry + "/library/busybox:no-such-tag"
	b.writeManifest("badtag.yaml", registryPod("badtag", missing, "2"))
	var pending *v1.Pod
	b.waitFor("the new version showing its failed pull", waitTimeout, func() (bool, string) {
		pending = b.versionOf(name, old.UID)
		if pending == nil {
			return false, "no new version yet"
		}
		return pending.Status.Reason == "PullBeforeStopFailed", describePod(pending)
	})
	if c := podCondition(pending, "PulledBeforeStop"); c == nil || c.Status != v1.ConditionFalse || !strings.Contains(c.Message, "no-such-tag") {
		t.Errorf("condition PulledBeforeStop of the new version = %+v, want False naming the image", c)
	}
	if !strings.Contains(pending.Status.Message, string(old.UID)+") keeps running") {
		t.Errorf("status message %q does not say the old version keeps running", pending.Status.Message)
	}
	// A second failure, after the pull back-off: the old version still
	// runs, as it did.
	b.waitFor("a retried pull", waitTimeout, func() (bool, string) {
		events, err := b.allEvents()
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, e := range events {
			if e.InvolvedObject.UID == pending.UID && e.Reason == "PullBeforeStopFailed" {
				n += int(max(e.Count, 1))
			}
		}
		return n >= 2, fmt.Sprintf("%d failed pulls", n)
	})
	rt, ok, detail := runtimeState(name, "main", old.UID)
	if !ok || rt.container.Id != oldRT.container.Id {
		t.Fatalf("the old version is not running its first container any more: %s", detail)
	}
	if cur, err := b.namedPod(name); err != nil || cur.UID != old.UID || containerStatus(cur, "main") == nil || containerStatus(cur, "main").RestartCount != 0 {
		t.Errorf("/pods/default/%s shows %v (%v), want the old version, not restarted", name, cur, err)
	}
	out, err := exec.Command(berthBin, "describe", "badtag", "--socket", b.socket).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "PulledBeforeStop") || !strings.Contains(string(out), "no-such-tag") {
		t.Errorf("berth describe badtag (%v) does not show the failed pull:\n%s", err, out)
	}

	b.writeManifest("badtag.yaml", localPod("badtag", "3"))
	var fixed *v1.Pod
	b.waitFor("the fixed version running", waitTimeout, func() (bool, string) {
		fixed = b.versionOf(name, old.UID)
		if fixed == nil || fixed.UID == pending.UID {
			return false, "no fixed version yet"
		}
		return fixed.Status.Phase == v1.PodRunning, describePod(fixed)
	})
	b.waitRuntime(name, "main", fixed.UID)
	b.waitFor("only the fixed version left", waitTimeout, func() (bool, string) {
		list, err := b.pods()
		if err != nil {
			return false, err.Error()
		}
		var uids []string
		for _, p := range list.Items {
			if p.Name == name {
				uids = append(uids, string(p.UID))
			}
		}
		return len(uids) == 1 && uids[0] == string(fixed.UID), fmt.Sprintf("%v", uids)
	})
}

// TestEditPrePullSurvivesRestart kills berth while an edit's image cannot
// be pulled: the restarted berth finds the old version as an orphan whose
// name a new version claims, and keeps it running (same container) while
// the new version's pull keeps failing; a fixed manifest then replaces it.
func TestEditPrePullSurvivesRestart(t *testing.T) {
	b := newBerth(t, berthOptions{})
	b.waitReady()
	name := podName("restartpull")
	b.writeManifest("restartpull.yaml", localPod("restartpull", "1"))
	old := b.waitRunning(name)
	oldRT := b.waitRuntime(name, "main", old.UID)

	b.writeManifest("restartpull.yaml", registryPod("restartpull", bed.Registry+"/library/busybox:no-such-tag", "2"))
	b.waitFor("the new version showing its failed pull", waitTimeout, func() (bool, string) {
		p := b.versionOf(name, old.UID)
		if p == nil {
			return false, "no new version yet"
		}
		return p.Status.Reason == "PullBeforeStopFailed", describePod(p)
	})
	b.kill()
	b.start()
	b.waitReady()
	orphanLine := -1
	b.waitFor("the restarted berth finding the old version replaced", waitTimeout, func() (bool, string) {
		orphanLine = b.logLine(func(l string) bool {
			return strings.Contains(l, "orphaned pod replaced by a new version") && strings.Contains(l, "uid="+string(old.UID))
		})
		return orphanLine >= 0, "not yet"
	})
	// Two failed pulls after it, the second after the image's back-off:
	// an orphan stopped at once would be gone by then.
	b.waitFor("two failed pulls after that", waitTimeout, func() (bool, string) {
		data, err := os.ReadFile(b.logFile)
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, l := range strings.Split(string(data), "\n")[orphanLine+1:] {
			if strings.Contains(l, "event=PullBeforeStopFailed") {
				n++
			}
		}
		return n >= 2, fmt.Sprintf("%d failed pulls", n)
	})
	if rt, ok, detail := runtimeState(name, "main", old.UID); !ok || rt.container.Id != oldRT.container.Id {
		t.Fatalf("the old version is not running its first container any more after the restart: %s", detail)
	}
	if l := b.logLine(func(l string) bool {
		return strings.Contains(l, "event=Killing") && strings.Contains(l, "uid="+string(old.UID))
	}); l >= 0 {
		t.Fatalf("berth stopped the old version (log line %d) while the new one had no image", l)
	}

	b.writeManifest("restartpull.yaml", localPod("restartpull", "3"))
	var fixed *v1.Pod
	b.waitFor("the fixed version running", waitTimeout, func() (bool, string) {
		fixed = b.versionOf(name, old.UID)
		if fixed == nil || fixed.Status.Phase != v1.PodRunning {
			return false, "not yet"
		}
		return true, ""
	})
	b.waitRuntime(name, "main", fixed.UID)
	b.waitFor("the old uid's objects removed", waitTimeout, func() (bool, string) {
		n, err := objectsOfUID(name, old.UID)
		if err != nil {
			return false, err.Error()
		}
		return n == 0, fmt.Sprintf("%d objects of uid %s left", n, old.UID)
	})
}
