//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	podsv1alpha1 "k8s.io/kubelet/pkg/apis/pods/v1alpha1"
)

// podsAPISocket is where berth serves the kubelet's pods API: the
// kubelet's path under its root directory, under --root-dir.
func (b *berth) podsAPISocket() string { return filepath.Join(b.root, "pods-api", "pods-api.sock") }

// podsWatch is one WatchPods stream of the kubelet module's client, read
// on its own goroutine so that a test waits on events with a deadline.
type podsWatch struct {
	t      *testing.T
	events chan *podsv1alpha1.WatchPodsEvent
	err    error // the stream's end, once events is closed
}

func openPodsWatch(t *testing.T, client podsv1alpha1.PodsClient) *podsWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := client.WatchPods(ctx, &podsv1alpha1.WatchPodsRequest{})
	if err != nil {
		t.Fatalf("WatchPods: %v", err)
	}
	w := &podsWatch{t: t, events: make(chan *podsv1alpha1.WatchPodsEvent, 1024)}
	go func() {
		defer close(w.events)
		for {
			ev, err := stream.Recv()
			if err != nil {
				w.err = err
				return
			}
			w.events <- ev
		}
	}()
	return w
}

// wait waits for an event of type typ whose pod satisfies cond (nil for
// INITIAL_SYNC_COMPLETE, which has none) and returns its pod.
func (w *podsWatch) wait(what string, typ podsv1alpha1.EventType, cond func(*v1.Pod) bool) *v1.Pod {
	w.t.Helper()
	deadline := time.After(waitTimeout)
	last := "none"
	for {
		select {
		case ev, ok := <-w.events:
			if !ok {
				w.t.Fatalf("the watch ended waiting for %s: %v; last event %s", what, w.err, last)
			}
			var pod *v1.Pod
			if ev.Pod != nil {
				pod = &v1.Pod{}
				if err := pod.Unmarshal(ev.Pod); err != nil {
					w.t.Fatalf("%s event: v1.Pod#Unmarshal: %v", ev.Type, err)
				}
			}
			last = ev.Type.String()
			if pod != nil {
				last += " " + describePod(pod)
			}
			if ev.Type == typ && (cond == nil && pod == nil || cond != nil && pod != nil && cond(pod)) {
				return pod
			}
		case <-deadline:
			w.t.Fatalf("no %s within %s; last event %s", what, waitTimeout, last)
		}
	}
}

// TestPodsAPI runs berth on the real runtime and reads its pods through
// the kubelet's pods API with the k8s.io/kubelet generated client, on the
// kubelet's socket path under --root-dir (0600 in a 0700 directory): a
// watch opened on no pods says INITIAL_SYNC_COMPLETE; a pod started is
// ADDED, then listed and got Running with its IP and restart count 0; a
// crash of its container is MODIFIED with restart count 1, Running again;
// removing its manifest is DELETED with its UID; an unknown UID is
// NotFound.
func TestPodsAPI(t *testing.T) {
	b := newBerth(t, berthOptions{args: fastBackoff})
	b.waitReady()
	socket := b.podsAPISocket()
	for path, want := range map[string]os.FileMode{socket: os.ModeSocket | 0o600, filepath.Dir(socket): os.ModeDir | 0o700} {
		if info, err := os.Lstat(path); err != nil || info.Mode() != want {
			t.Errorf("%s: %v %v, want %v", path, info.Mode(), err, want)
		}
	}
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := podsv1alpha1.NewPodsClient(conn)

	watch := openPodsWatch(t, client)
	watch.wait("INITIAL_SYNC_COMPLETE with no pods", podsv1alpha1.EventType_INITIAL_SYNC_COMPLETE, nil)

	// The container crashes (exit 1) each time the test creates the
	// trigger file, which it removes.
	trigger := filepath.Join(b.dir, "trigger")
	if err := os.MkdirAll(trigger, 0o755); err != nil {
		t.Fatal(err)
	}
	pod := newPod("podsapi", shContainer("main",
		"echo started; while [ ! -e /trigger/crash ]; do sleep 0.2; done; rm /trigger/crash; exit 1"))
	pod.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "trigger", MountPath: "/trigger"}}
	pod.Spec.Volumes = []v1.Volume{{Name: "trigger", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: trigger}}}}
	b.writeManifest("podsapi.yaml", podManifest(pod))
	name := podName("podsapi")
	added := watch.wait("ADDED of the pod", podsv1alpha1.EventType_ADDED, func(p *v1.Pod) bool { return p.Name == name })
	running := func(restarts int32) func(*v1.Pod) bool {
		return func(p *v1.Pod) bool {
			c := containerStatus(p, "main")
			return p.UID == added.UID && p.Status.Phase == v1.PodRunning && c != nil && c.State.Running != nil && c.RestartCount == restarts
		}
	}
	if !running(0)(added) {
		watch.wait("MODIFIED up to Running", podsv1alpha1.EventType_MODIFIED, running(0))
	}

	ctx := context.Background()
	list, err := client.ListPods(ctx, &podsv1alpha1.ListPodsRequest{})
	if err != nil || len(list.Pods) != 1 {
		t.Fatalf("ListPods: %v, %d pods, want 1", err, len(list.Pods))
	}
	var listed v1.Pod
	if err := listed.Unmarshal(list.Pods[0]); err != nil {
		t.Fatal(err)
	}
	if !running(0)(&listed) || listed.Name != name || listed.Namespace != "default" || listed.Status.PodIP == "" ||
		listed.Spec.Containers[0].Image != "busybox:1.36" || podCondition(&listed, v1.PodReady) == nil {
		t.Errorf("ListPods: %s, want %s Running with an IP, restart count 0 and its spec", describePod(&listed), name)
	}
	got, err := client.GetPod(ctx, &podsv1alpha1.GetPodRequest{PodUID: string(added.UID)})
	if err != nil {
		t.Fatalf("GetPod(%s): %v", added.UID, err)
	}
	var one v1.Pod
	if err := one.Unmarshal(got.Pod); err != nil || one.UID != added.UID || one.Name != name {
		t.Errorf("GetPod(%s): %s %v", added.UID, describePod(&one), err)
	}
	if _, err := client.GetPod(ctx, &podsv1alpha1.GetPodRequest{PodUID: "no-such-uid"}); status.Code(err) != codes.NotFound {
		t.Errorf("GetPod of an unknown UID: %v, want NotFound", err)
	}

	if err := os.WriteFile(filepath.Join(trigger, "crash"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	watch.wait("MODIFIED: restarted after the crash, Running", podsv1alpha1.EventType_MODIFIED, running(1))

	b.removeManifest("podsapi.yaml")
	gone := watch.wait("DELETED of the pod", podsv1alpha1.EventType_DELETED, func(p *v1.Pod) bool { return p.UID == added.UID })
	if gone.Name != name || gone.Namespace != "default" {
		t.Errorf("DELETED %s/%s, want default/%s", gone.Namespace, gone.Name, name)
	}
	b.waitGone(name)
	if list, err := client.ListPods(ctx, &podsv1alpha1.ListPodsRequest{}); err != nil || len(list.Pods) != 0 {
		t.Errorf("ListPods after the removal: %v, %d pods", err, len(list.Pods))
	}
}
