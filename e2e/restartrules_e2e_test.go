//go:build e2e

package e2e

import (
	"testing"

	v1 "k8s.io/api/core/v1"
)

// withEmptyDir mounts an emptyDir named data at /data in every container of
// p: it outlives container restarts, so scripts can count their runs.
func withEmptyDir(p *v1.Pod) *v1.Pod {
	p.Spec.Volumes = append(p.Spec.Volumes, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}})
	for _, list := range [][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range list {
			list[i].VolumeMounts = append(list[i].VolumeMounts, v1.VolumeMount{Name: "data", MountPath: "/data"})
		}
	}
	return p
}

func onExitCodes(action v1.ContainerRestartRuleAction, codes ...int32) []v1.ContainerRestartRule {
	return []v1.ContainerRestartRule{{Action: action, ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: codes}}}
}

// TestContainerRestartRules runs two pods on the real runtime:
//   - retry (KEP-5307): restartPolicy Never, its container restarted on exit
//     code 42 only. It exits 42, is restarted once, exits 3 and the pod
//     ends Failed with one restart (restartCount 1 says the rule fired).
//   - reset (KEP-5532): a container that exits 88 on its first run asks for
//     RestartAllContainers. The init container runs again, the other app
//     container is restarted, all in the same sandbox, and the pod ends
//     Running with every container restarted once.
func TestContainerRestartRules(t *testing.T) {
	never := v1.ContainerRestartPolicyNever
	always := v1.ContainerRestartPolicyAlways

	retry := shContainer("main", "if [ -f /data/ran ]; then exit 3; fi; touch /data/ran; sleep 1; exit 42")
	retry.RestartPolicy, retry.RestartPolicyRules = &never, onExitCodes(v1.ContainerRestartRuleActionRestart, 42)
	retryPod := withEmptyDir(newPod("rules-retry", retry))
	retryPod.Spec.RestartPolicy = v1.RestartPolicyNever

	trigger := shContainer("trigger", "echo run | tee -a /data/trigger; if [ $(wc -l < /data/trigger) -lt 2 ]; then sleep 2; exit 88; fi; "+sleepForever)
	trigger.RestartPolicy, trigger.RestartPolicyRules = &always, onExitCodes(v1.ContainerRestartRuleActionRestartAllContainers, 88)
	resetPod := withEmptyDir(newPod("rules-reset", trigger, shContainer("other", "echo run >> /data/other; "+sleepForever)))
	resetPod.Spec.InitContainers = []v1.Container{shContainer("init", "echo run >> /data/init")}
	resetPod.Spec.InitContainers[0].VolumeMounts = []v1.VolumeMount{{Name: "data", MountPath: "/data"}}

	b := newBerth(t, berthOptions{args: append([]string{"--listen-pods", "full"}, fastBackoff...), manifests: map[string]string{
		"retry.yaml": podManifest(retryPod),
		"reset.yaml": podManifest(resetPod),
	}})
	b.waitReady()

	t.Run("retry", func(t *testing.T) {
		defer b.use(t)()
		p := b.waitPod(podName("rules-retry"), "phase Failed", func(p *v1.Pod) bool { return p.Status.Phase == v1.PodFailed })
		cs := containerStatus(p, "main")
		if cs == nil || cs.RestartCount != 1 || cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 3 {
			t.Errorf("main = %+v, want terminated with exit code 3 after 1 restart", cs)
		}
	})

	t.Run("reset", func(t *testing.T) {
		defer b.use(t)()
		name := podName("rules-reset")
		p := b.waitPod(name, "running with every container restarted once", func(p *v1.Pod) bool {
			for _, n := range []string{"trigger", "other"} {
				cs := containerStatus(p, n)
				if cs == nil || cs.State.Running == nil || cs.RestartCount < 1 {
					return false
				}
			}
			return p.Status.Phase == v1.PodRunning
		})
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if cs.RestartCount != 1 {
				t.Errorf("%s: restartCount %d, want 1 (one reset)", cs.Name, cs.RestartCount)
			}
		}
		sbs, err := sandboxesOf(name)
		if err != nil {
			t.Fatal(err)
		}
		if len(sbs) != 1 || len(readySandboxes(sbs)) != 1 {
			t.Errorf("sandboxes: %s, want the one sandbox kept ready", describeSandboxes(sbs))
		}
		cs, err := containersOf(name)
		if err != nil {
			t.Fatal(err)
		}
		// The reset removed the first run of every container; the init
		// container's second run stays exited.
		if len(cs) != 3 || len(runningContainers(cs)) != 2 {
			t.Errorf("containers: %s, want init (exited) and 2 running", describeContainers(cs))
		}
		// The first run's log stays readable: the reset keeps logs.
		lines, err := criLogLines(b.podLogPath(p, "trigger", 0))
		if err != nil || len(lines) == 0 {
			t.Errorf("log of the run that asked for the reset: %v, %v", lines, err)
		}
		if !b.logContains("RestartAllContainers") {
			t.Errorf("berth's log has no RestartAllContainers event")
		}
		if b.findEvent(name, "RestartAllContainers", "exited with code 88") == nil {
			t.Errorf("no RestartAllContainers event naming exit code 88")
		}
	})
}
