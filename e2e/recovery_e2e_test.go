//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestOutOfBandRecovery breaks running pods behind berth's back, through
// CRI as an operator with crictl would, and checks berth brings them back:
// a killed container is replaced by a new one (restartCount +1), a stopped
// or removed sandbox by a new sandbox with the container running.
func TestOutOfBandRecovery(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(ctx context.Context, rp runtimePod) error
		// container: only the container was killed, the sandbox stays.
		container bool
	}{
		{
			name:      "container-stopped",
			container: true,
			break_: func(ctx context.Context, rp runtimePod) error {
				_, err := bed.Runtime().StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: rp.container.Id, Timeout: 0})
				return err
			},
		},
		{
			name: "sandbox-stopped",
			break_: func(ctx context.Context, rp runtimePod) error {
				// Once the runtime has stopped the sandbox's processes,
				// berth stops the sandbox too, and on containerd 2.1 one
				// of the two network teardowns can then fail ("failed to
				// delete "eth0": no such device").
				return retried(func() error {
					_, err := bed.Runtime().StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: rp.sandbox.Id})
					return err
				})
			},
		},
		{
			name: "sandbox-removed",
			break_: func(ctx context.Context, rp runtimePod) error {
				// Berth may be acting on the pod at that very moment
				// ("container is in starting state, can't be removed").
				return retried(func() error {
					if _, err := bed.Runtime().StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: rp.sandbox.Id}); err != nil {
						return err
					}
					_, err := bed.Runtime().RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: rp.sandbox.Id})
					return err
				})
			},
		},
	}
	manifests := map[string]string{}
	for _, tc := range tests {
		manifests[tc.name+".yaml"] = podManifest(sleeper(tc.name))
	}
	b := newBerth(t, berthOptions{args: fastBackoff, manifests: manifests})
	b.waitReady()

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer b.use(t)()
			name := podName(tc.name)
			api := b.waitRunning(name)
			before := b.waitRuntime(name, "main", api.UID)

			ctx, cancel := criCtx()
			defer cancel()
			logFrom := logSize(b)
			broken := time.Now()
			if err := tc.break_(ctx, before); err != nil {
				t.Fatalf("break the pod: %v", err)
			}
			t.Logf("%s: broken through CRI in %s", tc.name, time.Since(broken).Round(time.Millisecond))
			var after runtimePod
			b.waitFor("a new running container of "+name, waitTimeout, func() (bool, string) {
				rp, ok, detail := runtimeState(name, "main", api.UID)
				if !ok {
					return false, detail
				}
				if rp.container.Id == before.container.Id {
					return false, "the old container " + shortID(rp.container.Id) + " still runs"
				}
				after = rp
				return true, detail
			})
			took := time.Since(broken)
			t.Logf("%s: back with container %s (was %s) after %s", tc.name, shortID(after.container.Id), shortID(before.container.Id), took.Round(time.Millisecond))
			if took > 10*time.Second {
				t.Logf("slow recovery; berth's log meanwhile:\n%s", strings.Join(logLinesSince(b, logFrom, ""), "\n"))
			}

			if tc.container {
				if after.sandbox.Id != before.sandbox.Id {
					t.Errorf("a killed container got a new sandbox %s (was %s)", shortID(after.sandbox.Id), shortID(before.sandbox.Id))
				}
				if n, err := restartCountAnnotation(after.container); err != nil || n != 1 {
					t.Errorf("new container's restart count annotation = %d, %v; want 1", n, err)
				}
				p := b.waitPod(name, "restartCount 1 and Running", func(p *v1.Pod) bool {
					cs := containerStatus(p, "main")
					return cs != nil && cs.RestartCount == 1 && cs.State.Running != nil && p.Status.Phase == v1.PodRunning
				})
				cs := containerStatus(p, "main")
				if shortID(cs.ContainerID) != shortID(after.container.Id) {
					t.Errorf("/pods containerID %s, CRI's running container is %s", cs.ContainerID, after.container.Id)
				}
				if cs.LastTerminationState.Terminated == nil {
					t.Errorf("lastState of the killed container not shown: %+v", cs.LastTerminationState)
				}
			} else {
				if after.sandbox.Id == before.sandbox.Id {
					t.Errorf("the pod runs in the old sandbox %s", shortID(before.sandbox.Id))
				}
				b.waitPod(name, "Running and Ready with the new container", func(p *v1.Pod) bool {
					cs := containerStatus(p, "main")
					return p.Status.Phase == v1.PodRunning && podReady(p) && cs != nil && cs.State.Running != nil &&
						shortID(cs.ContainerID) == shortID(after.container.Id)
				})
			}
			// Exactly one of everything, a little later too.
			time.Sleep(2 * time.Second)
			rp, ok, detail := runtimeState(name, "main", api.UID)
			if !ok || rp.container.Id != after.container.Id {
				t.Errorf("2s after recovery: %s (running container %s, want %s)", detail, shortID(rp.container.GetId()), shortID(after.container.Id))
			}
			sbs, err := sandboxesOf(name)
			if err != nil {
				t.Fatal(err)
			}
			if len(sbs) > 2 || len(readySandboxes(sbs)) != 1 {
				t.Errorf("sandboxes of %s: %s, want one ready (and at most the old one stopped)", name, describeSandboxes(sbs))
			}
		})
	}
}

// retried runs op until it succeeds, at most 20 times half a second apart,
// as an operator repeats a crictl stopp or rmp that failed: berth may be
// acting on the same sandbox at that moment.
func retried(op func() error) error {
	var err error
	for range 20 {
		if err = op(); err == nil {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return err
}
