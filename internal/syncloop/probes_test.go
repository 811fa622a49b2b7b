package syncloop

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podtest"
)

// probedPod is a pod "web" whose container "app" has the given probe kind
// (livenessProbe, readinessProbe) running `check` every second with
// failureThreshold 1.
func probedPod(t *testing.T, kind string) *v1.Pod {
	return podtest.Parse(t, "/m/web.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - name: app
    image: busybox:1.36
    command: ["sleep", "3600"]
    %s:
      exec: {command: ["check"]}
      periodSeconds: 1
      failureThreshold: 1
`, kind))
}

// failExec makes the next n ExecSync calls exit 1.
func (h *harness) failExec(n int) {
	for range n {
		h.rt.InjectError("ExecSync", utilexec.CodeExitError{Err: errors.New("exit 1"), Code: 1})
	}
}

// TestAgentReadinessProbe: the pod turns Ready once its readiness probe
// passes, unready when it fails, Ready again when it passes, and its
// container is never restarted for it.
func TestAgentReadinessProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOpts{})
		p := probedPod(t, "readinessProbe")
		h.apply(podspec.SourceFile, p)
		ready := func(want bool) func() bool {
			return func() bool {
				st := h.status(p.UID)
				if st == nil || st.Status.Phase != v1.PodRunning || len(st.Status.ContainerStatuses) != 1 {
					return false
				}
				cond := false
				for _, c := range st.Status.Conditions {
					if c.Type == v1.PodReady {
						cond = c.Status == v1.ConditionTrue
					}
				}
				return st.Status.ContainerStatuses[0].Ready == want && cond == want
			}
		}
		// Each state below holds until the test changes what the probe
		// answers, so stepping a probe period at a time cannot miss it.
		h.stepUntil("Ready", time.Second, 30, ready(true))
		h.failExec(1000)
		h.stepUntil("not Ready after a failed probe", time.Second, 30, ready(false))
		h.rt.FakeRuntimeService.Lock()
		delete(h.rt.Errors, "ExecSync")
		h.rt.FakeRuntimeService.Unlock()
		h.stepUntil("Ready again", time.Second, 30, ready(true))
		if rc := h.status(p.UID).Status.ContainerStatuses[0].RestartCount; rc != 0 {
			t.Errorf("restartCount = %d, want 0: readiness never restarts", rc)
		}
	})
}

// TestAgentLivenessProbe: a failed liveness probe restarts the container,
// with the kubelet's Killing event and the reason in its last state.
func TestAgentLivenessProbe(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, harnessOpts{})
		p := probedPod(t, "livenessProbe")
		h.apply(podspec.SourceFile, p)
		h.eventually("Running", func() bool { return h.phase(p.UID) == v1.PodRunning })
		h.failExec(1)
		h.stepUntil("restarted once", time.Second, 30, func() bool {
			st := h.status(p.UID)
			return st != nil && len(st.Status.ContainerStatuses) == 1 && st.Status.ContainerStatuses[0].RestartCount == 1 &&
				st.Status.ContainerStatuses[0].State.Running != nil
		})
		cs := h.status(p.UID).Status.ContainerStatuses[0]
		if term := cs.LastTerminationState.Terminated; term == nil || term.Message != "Container app failed liveness probe" {
			t.Errorf("lastState = %+v, want terminated with the liveness failure", cs.LastTerminationState)
		}
		var msgs []string
		for _, e := range h.agent.events.List(p.UID) {
			msgs = append(msgs, e.Reason+": "+e.Message)
		}
		joined := strings.Join(msgs, "\n")
		for _, want := range []string{"Unhealthy: Liveness probe failed: ", "Killing: Container app failed liveness probe, will be restarted"} {
			if !strings.Contains(joined, want) {
				t.Errorf("events lack %q:\n%s", want, joined)
			}
		}
	})
}
