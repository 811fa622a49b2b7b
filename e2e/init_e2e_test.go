//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
)

// TestInitContainersInOrder runs two init containers that append to a file
// in an emptyDir, the first after a pause (so running them at once would
// reverse the order), then an app that prints the file: the app's CRI log
// file must show the init containers' lines in order, then the app's own.
func TestInitContainersInOrder(t *testing.T) {
	mount := []v1.VolumeMount{{Name: "work", MountPath: "/work"}}
	first := shContainer("first", "sleep 1; echo one >> /work/order")
	first.VolumeMounts = mount
	second := shContainer("second", "echo two >> /work/order")
	second.VolumeMounts = mount
	app := shContainer("main", "cat /work/order; echo app-done; "+sleepForever)
	app.VolumeMounts = mount
	pod := newPod("init", app)
	pod.Spec.InitContainers = []v1.Container{first, second}
	pod.Spec.Volumes = []v1.Volume{{Name: "work", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}

	b := newBerth(t, berthOptions{manifests: map[string]string{"init.yaml": podManifest(pod)}})
	b.waitReady()
	name := podName("init")
	p := b.waitRunning(name)

	if c := podCondition(p, v1.PodInitialized); c == nil || c.Status != v1.ConditionTrue {
		t.Errorf("Initialized condition = %+v, want True", c)
	}
	if len(p.Status.InitContainerStatuses) != 2 {
		t.Fatalf("initContainerStatuses: %d, want 2: %s", len(p.Status.InitContainerStatuses), describePod(p))
	}
	for i, want := range []string{"first", "second"} {
		cs := p.Status.InitContainerStatuses[i]
		if cs.Name != want {
			t.Errorf("initContainerStatuses[%d] is %s, want %s", i, cs.Name, want)
		}
		if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0 || cs.State.Terminated.Reason != "Completed" {
			t.Errorf("init container %s: state %s, want terminated 0 Completed", cs.Name, describeState(cs.State))
		}
		if cs.RestartCount != 0 {
			t.Errorf("init container %s restarted %d times", cs.Name, cs.RestartCount)
		}
	}
	// The first finished before the second started.
	f, s := p.Status.InitContainerStatuses[0].State.Terminated, p.Status.InitContainerStatuses[1].State.Terminated
	if f != nil && s != nil && s.StartedAt.Before(&f.FinishedAt) {
		t.Errorf("init container second started at %s, before first finished at %s", s.StartedAt, f.FinishedAt)
	}

	logPath := b.podLogPath(p, "main", 0)
	var lines []string
	b.waitFor("the app's log "+logPath+" to show app-done", waitTimeout, func() (bool, string) {
		var err error
		lines, err = criLogLines(logPath)
		if err != nil {
			return false, err.Error()
		}
		return slices.Contains(lines, "app-done"), fmt.Sprintf("%q", lines)
	})
	if want := []string{"one", "two", "app-done"}; !slices.Equal(lines, want) {
		t.Errorf("app log %s = %q, want %q", logPath, lines, want)
	}
	for _, c := range []string{"first", "second"} {
		if _, err := os.Stat(b.podLogPath(p, c, 0)); err != nil {
			t.Errorf("init container %s log: %v", c, err)
		}
	}
	raw, _ := os.ReadFile(logPath)
	if !strings.Contains(string(raw), " stdout F one\n") {
		t.Errorf("app log is not in the CRI format: %q", raw)
	}
}

// TestInitContainerFailure runs a pod whose init container exits 1: under
// restartPolicy Never the pod fails and its app never starts; under Always
// the init container is restarted (its restartCount grows) and the app
// still never starts.
func TestInitContainerFailure(t *testing.T) {
	tests := []struct {
		name   string
		policy v1.RestartPolicy
	}{
		{name: "initfail-never", policy: v1.RestartPolicyNever},
		{name: "initfail-always", policy: v1.RestartPolicyAlways},
	}
	manifests := map[string]string{}
	for _, tc := range tests {
		p := newPod(tc.name, shContainer("main", "echo app-started; "+sleepForever))
		p.Spec.InitContainers = []v1.Container{shContainer("setup", "echo failing; sleep 1; exit 1")}
		p.Spec.RestartPolicy = tc.policy
		manifests[tc.name+".yaml"] = podManifest(p)
	}
	b := newBerth(t, berthOptions{args: fastBackoff, manifests: manifests})
	b.waitReady()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer b.use(t)()
			name := podName(tc.name)
			var p *v1.Pod
			if tc.policy == v1.RestartPolicyNever {
				p = b.waitPod(name, "Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
			} else {
				p = b.waitPod(name, "init container restartCount >= 2", func(p *v1.Pod) bool {
					return len(p.Status.InitContainerStatuses) == 1 && p.Status.InitContainerStatuses[0].RestartCount >= 2
				})
				if p.Status.Phase != v1.PodPending {
					t.Errorf("phase %s while the init container keeps failing, want Pending", p.Status.Phase)
				}
			}
			if c := podCondition(p, v1.PodInitialized); c == nil || c.Status != v1.ConditionFalse {
				t.Errorf("Initialized condition = %+v, want False", c)
			}
			cs, err := containersOf(name)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cs {
				if c.Labels[labelContainerName] == "main" {
					t.Errorf("the app container was created although its init container failed: %s", describeContainers(cs))
				}
			}
			if st := containerStatus(p, "main"); st != nil && (st.State.Running != nil || st.State.Terminated != nil) {
				t.Errorf("/pods shows the app container %s", describeState(st.State))
			}
		})
	}
}
