package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/cli/apiclient"
	"github.com/berth-agent/berth/internal/cli/printers"
	"github.com/berth-agent/berth/internal/podstatus"
)

// cliT0 is when the fixture pods were first seen; the CLI's clock reads an
// hour later.
var cliT0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func fixAt(d time.Duration) metav1.Time { return metav1.NewTime(cliT0.Add(d)) }

func ptrTime(t metav1.Time) *metav1.Time { return &t }

// fixturePod is a static pod of node1 read from a manifest file.
func fixturePod(name, ns string, containers ...string) v1.Pod {
	p := v1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: name + "-node1", Namespace: ns, UID: types.UID("uid-" + name), Annotations: map[string]string{
			"kubernetes.io/config.source": "file",
			"kubernetes.io/config.seen":   cliT0.Format(time.RFC3339Nano),
			"kubernetes.io/config.hash":   "uid-" + name,
			"berth.io/config.origin":      "/etc/kubernetes/manifests/" + name + ".yaml",
		}},
		Spec: v1.PodSpec{NodeName: "node1", RestartPolicy: v1.RestartPolicyAlways},
		Status: v1.PodStatus{
			Phase: v1.PodRunning, HostIP: "192.0.2.10", StartTime: ptrTime(fixAt(time.Second)), QOSClass: v1.PodQOSBestEffort,
		},
	}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: c, Image: "docker.io/library/busybox:1.36"})
	}
	return p
}

func runningState(d time.Duration) v1.ContainerState {
	return v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: fixAt(d)}}
}

func terminatedState(code int32, reason, id string, start, end time.Duration) v1.ContainerState {
	return v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code, Reason: reason, ContainerID: id, StartedAt: fixAt(start), FinishedAt: fixAt(end)}}
}

func waitingState(reason, msg string) v1.ContainerState {
	return v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason, Message: msg}}
}

func fixConditions(initialized, ready bool) []v1.PodCondition {
	b := func(ok bool) v1.ConditionStatus {
		if ok {
			return v1.ConditionTrue
		}
		return v1.ConditionFalse
	}
	return []v1.PodCondition{
		{Type: v1.PodScheduled, Status: v1.ConditionTrue},
		{Type: v1.PodInitialized, Status: b(initialized)},
		{Type: v1.ContainersReady, Status: b(ready)},
		{Type: v1.PodReady, Status: b(ready)},
	}
}

// fixturePods is one pod for each STATUS berth pods shows.
func fixturePods() []v1.Pod {
	web := fixturePod("web", "default", "httpd")
	web.Labels = map[string]string{"app": "web", "tier": "edge"}
	web.Spec.HostNetwork = true
	web.Spec.Containers[0].Command = []string{"httpd", "-f", "-p", "18080", "-h", "/www"}
	web.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 18080, HostPort: 18080, Protocol: v1.ProtocolTCP}}
	web.Spec.Containers[0].Resources = v1.ResourceRequirements{
		Limits:   v1.ResourceList{v1.ResourceMemory: resource.MustParse("32Mi"), v1.ResourceCPU: resource.MustParse("100m")},
		Requests: v1.ResourceList{v1.ResourceMemory: resource.MustParse("16Mi"), v1.ResourceCPU: resource.MustParse("50m")},
	}
	web.Spec.Containers[0].Env = []v1.EnvVar{
		{Name: "GREETING", Value: "hello"},
		{Name: "POD_NAME", ValueFrom: &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}},
	}
	web.Spec.Volumes = []v1.Volume{{Name: "www", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/srv/www"}}}}
	web.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "www", MountPath: "/www", ReadOnly: true}}
	web.Status.QOSClass = v1.PodQOSBurstable
	web.Status.PodIP = "192.0.2.10"
	web.Status.PodIPs = []v1.PodIP{{IP: "192.0.2.10"}}
	// The daemon's /problems below says web.yaml's last edit is broken:
	// the pod runs its last good version and says so.
	web.Status.Conditions = append(fixConditions(true, true), v1.PodCondition{Type: podstatus.ConditionManifestValid, Status: v1.ConditionFalse, Reason: "Invalid",
		Message: "/etc/kubernetes/manifests/web.yaml:14: spec.containers[0].ports[0].containerPort: Invalid value: 0: must be between 1 and 65535"})
	web.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "httpd", Ready: true, ContainerID: "containerd://aaa1", Image: "docker.io/library/busybox:1.36", ImageID: "sha256:b1", State: runningState(2 * time.Second)}}

	crash := fixturePod("crash", "default", "app")
	crash.Spec.Containers[0].Command = []string{"sh", "-c", "echo starting\nsleep 2\nexit 3\n"}
	crash.Status.PodIP = "10.88.0.7"
	crash.Status.PodIPs = []v1.PodIP{{IP: "10.88.0.7"}}
	crash.Status.Conditions = fixConditions(true, false)
	crash.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "app", ContainerID: "containerd://ccc5", RestartCount: 5,
		State:                waitingState("CrashLoopBackOff", "back-off 2m40s restarting failed container=app pod=crash-node1_default(uid-crash)"),
		LastTerminationState: terminatedState(3, "Error", "containerd://ccc5", 59*time.Minute, 59*time.Minute+30*time.Second)}}

	pull := fixturePod("pull", "default", "app")
	pull.Spec.Containers[0].Image = "registry.example/app:2"
	pull.Status.Phase = v1.PodPending
	pull.Status.Conditions = fixConditions(true, false)
	pull.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "app", Image: "registry.example/app:2",
		State: waitingState("ImagePullBackOff", `Back-off pulling image "registry.example/app:2"`)}}

	creating := fixturePod("creating", "default", "app")
	creating.Status.Phase = v1.PodPending
	creating.Status.StartTime = nil
	creating.Status.Conditions = fixConditions(true, false)
	creating.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "app", State: waitingState("ContainerCreating", "")}}

	init := fixturePod("init", "default", "app")
	init.Spec.InitContainers = []v1.Container{{Name: "fetch", Image: "docker.io/library/busybox:1.36"}, {Name: "unpack", Image: "docker.io/library/busybox:1.36"}}
	init.Spec.Volumes = []v1.Volume{{Name: "work", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}}
	init.Status.Phase = v1.PodPending
	init.Status.PodIP = "10.88.0.8"
	init.Status.Conditions = fixConditions(false, false)
	init.Status.InitContainerStatuses = []v1.ContainerStatus{
		{Name: "fetch", Ready: true, ContainerID: "containerd://f1", State: terminatedState(0, "Completed", "containerd://f1", 2*time.Second, 3*time.Second)},
		{Name: "unpack", ContainerID: "containerd://u1", State: runningState(4 * time.Second)},
	}
	init.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "app", State: waitingState("PodInitializing", "")}}

	initCrash := fixturePod("initcrash", "default", "app")
	initCrash.Spec.InitContainers = []v1.Container{{Name: "migrate", Image: "docker.io/library/busybox:1.36"}}
	initCrash.Status.Phase = v1.PodPending
	initCrash.Status.Conditions = fixConditions(false, false)
	initCrash.Status.InitContainerStatuses = []v1.ContainerStatus{{Name: "migrate", ContainerID: "containerd://m3", RestartCount: 3,
		State:                waitingState("CrashLoopBackOff", "back-off 40s restarting failed container=migrate"),
		LastTerminationState: terminatedState(1, "Error", "containerd://m3", 58*time.Minute, 58*time.Minute+time.Second)}}
	initCrash.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "app", State: waitingState("PodInitializing", "")}}

	job := fixturePod("job", "default", "task")
	job.Spec.RestartPolicy = v1.RestartPolicyOnFailure
	job.Status.Phase = v1.PodSucceeded
	job.Status.Conditions = fixConditions(true, false)
	job.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "task", ContainerID: "containerd://j1", State: terminatedState(0, "Completed", "containerd://j1", 5*time.Second, 10*time.Second)}}

	failed := fixturePod("failed", "default", "task")
	failed.Spec.RestartPolicy = v1.RestartPolicyNever
	failed.Status.Phase = v1.PodFailed
	failed.Status.Conditions = fixConditions(true, false)
	failed.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "task", ContainerID: "containerd://e1", State: terminatedState(2, "Error", "containerd://e1", 5*time.Second, 6*time.Second)}}

	twoApps := fixturePod("sidecar", "default", "app", "log-shipper")
	twoApps.Status.Conditions = fixConditions(true, false)
	twoApps.Status.ContainerStatuses = []v1.ContainerStatus{
		{Name: "app", ContainerID: "containerd://s1", State: terminatedState(0, "Completed", "containerd://s1", 5*time.Second, 6*time.Second)},
		{Name: "log-shipper", ContainerID: "containerd://s2", Ready: true, State: runningState(5 * time.Second)},
	}

	waiting := fixturePod("web2", "default", "httpd")
	waiting.Status.Phase = v1.PodPending
	waiting.Status.Reason = "WaitingForPreviousPod"
	waiting.Status.Message = "waiting for pod web2-node1_default (uid uid-old) of the same name to terminate"
	waiting.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "httpd", State: waitingState("ContainerCreating", "")}}

	bad := v1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "bad-node1", Namespace: "default", Annotations: map[string]string{
			"kubernetes.io/config.source": "file", "berth.io/config.origin": "/etc/kubernetes/manifests/bad.yaml",
		}},
		Status: v1.PodStatus{Phase: v1.PodFailed, Reason: "Invalid",
			Message: "/etc/kubernetes/manifests/bad.yaml:9: spec.containers[0].image: Required value"},
	}

	stopping := fixturePod("etcd", "kube-system", "etcd")
	stopping.DeletionTimestamp = ptrTime(fixAt(59 * time.Minute))
	stopping.Annotations["kubernetes.io/config.source"] = "http"
	stopping.Annotations["berth.io/config.origin"] = "http://10.0.0.1:8000/pods.yaml"
	stopping.Status.PodIP = "10.88.0.2"
	stopping.Status.Conditions = fixConditions(true, false)
	stopping.Status.ContainerStatuses = []v1.ContainerStatus{{Name: "etcd", ContainerID: "containerd://e2", State: runningState(2 * time.Second)}}

	return []v1.Pod{bad, crash, creating, failed, init, initCrash, job, pull, twoApps, web, waiting, stopping}
}

// fixtureEvents are the events of crash-node1.
func fixtureEvents() v1.EventList {
	ev := func(typ, reason, msg string, count int32, first, last time.Duration) v1.Event {
		return v1.Event{Type: typ, Reason: reason, Message: msg, Count: count, FirstTimestamp: fixAt(first), LastTimestamp: fixAt(last),
			Source: v1.EventSource{Component: "berth", Host: "node1"}}
	}
	return v1.EventList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "EventList"}, Items: []v1.Event{
		ev("Normal", "Pulled", `Container image "docker.io/library/busybox:1.36" already present on machine`, 6, time.Second, 59*time.Minute),
		ev("Normal", "Created", "Created container app", 6, time.Second, 59*time.Minute),
		ev("Normal", "Started", "Started container app", 6, 2*time.Second, 59*time.Minute),
		ev("Warning", "BackOff", "Back-off restarting failed container app in pod crash-node1_default(uid-crash)", 12, 10*time.Second, 59*time.Minute+40*time.Second),
	}}
}

// fixtureAllEvents are what the fake daemon's /events serves: crash-node1's,
// one of etcd-node1 in kube-system, and one of a pod that is gone.
func fixtureAllEvents() v1.EventList {
	list := fixtureEvents()
	for i := range list.Items {
		e := &list.Items[i]
		e.Name = fmt.Sprintf("crash-node1.%d", i)
		e.Namespace = "default"
		e.InvolvedObject = v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: "crash-node1", UID: "uid-crash"}
	}
	list.Items = append(list.Items,
		v1.Event{ObjectMeta: metav1.ObjectMeta{Name: "etcd-node1.1", Namespace: "kube-system"},
			InvolvedObject: v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "kube-system", Name: "etcd-node1", UID: "uid-etcd"},
			Type:           "Normal", Reason: "Killing", Message: "Stopping container etcd", Count: 1,
			FirstTimestamp: fixAt(59 * time.Minute), LastTimestamp: fixAt(59 * time.Minute)},
		v1.Event{ObjectMeta: metav1.ObjectMeta{Name: "old-node1.1", Namespace: "default"},
			InvolvedObject: v1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "default", Name: "old-node1", UID: "uid-old"},
			Type:           "Warning", Reason: "Failed", Message: "Error: exit code 1", Count: 1,
			FirstTimestamp: fixAt(5 * time.Second), LastTimestamp: fixAt(5 * time.Second)},
	)
	return list
}

// fakeDaemon serves the fixtures on a unix socket as `berth run` would,
// records the log requests it gets, and streams the watch events a test
// sends on podWatch and eventWatch (after ADDED for what it lists, as the
// Kubernetes API's watch opens) until the test closes them.
type fakeDaemon struct {
	socket     string
	podWatch   chan apiclient.WatchEvent
	eventWatch chan apiclient.WatchEvent
	mu         sync.Mutex
	logReq     []string            // path?query of each log request
	podReplay  []v1.Pod            // when set, what the pod watch opens with in place of the list
	node       *printers.NodeState // what /node serves; nil answers 404 as a daemon without --kubeconfig
}

func (d *fakeDaemon) setNode(s *printers.NodeState) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.node = s
}

func startFakeDaemon(t *testing.T) *fakeDaemon {
	t.Helper()
	d := &fakeDaemon{socket: filepath.Join(t.TempDir(), "berth.sock"), podWatch: make(chan apiclient.WatchEvent), eventWatch: make(chan apiclient.WatchEvent)}
	mux := http.NewServeMux()
	pods := fixturePods()
	events := fixtureAllEvents()
	writeJSON := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(v)
	}
	stream := func(w http.ResponseWriter, r *http.Request, initial []any, ch chan apiclient.WatchEvent) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		for _, obj := range initial {
			b, _ := json.Marshal(obj)
			enc.Encode(apiclient.WatchEvent{Type: "ADDED", Object: b})
		}
		w.(http.Flusher).Flush()
		for {
			select {
			case ev, ok := <-ch:
				if !ok {
					return
				}
				enc.Encode(ev)
				w.(http.Flusher).Flush()
			case <-r.Context().Done():
				return
			}
		}
	}
	mux.HandleFunc("GET /pods", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "true" {
			d.mu.Lock()
			replay := pods
			if d.podReplay != nil {
				replay = d.podReplay
			}
			d.mu.Unlock()
			var initial []any
			for i := range replay {
				initial = append(initial, &replay[i])
			}
			stream(w, r, initial, d.podWatch)
			return
		}
		writeJSON(w, v1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, Items: pods})
	})
	mux.HandleFunc("GET /events", func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") == "true" {
			var initial []any
			for i := range events.Items {
				initial = append(initial, &events.Items[i])
			}
			stream(w, r, initial, d.eventWatch)
			return
		}
		writeJSON(w, events)
	})
	mux.HandleFunc("GET /version", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, map[string]string{"gitVersion": "v0.9.0", "gitCommit": "0123abc", "goVersion": "go1.26.0", "platform": "linux/amd64"})
	})
	mux.HandleFunc("GET /node", func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		node := d.node
		d.mu.Unlock()
		if node == nil {
			http.Error(w, "berth joins no cluster: it runs without --kubeconfig (see docs/joining-a-cluster.md)", http.StatusNotFound)
			return
		}
		writeJSON(w, node)
	})
	mux.HandleFunc("GET /problems", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, manifestProblems{Items: []manifestProblem{
			{Name: "bad-node1", Namespace: "default", Error: "/etc/kubernetes/manifests/bad.yaml:9: spec.containers[0].image: Required value"},
			{Error: "/etc/kubernetes/manifests/mangled.yaml:3: yaml: line 3: mapping values are not allowed in this context"},
			{Name: "web-node1", Namespace: "default", Error: "/etc/kubernetes/manifests/web.yaml:14: spec.containers[0].ports[0].containerPort: Invalid value: 0: must be between 1 and 65535"},
			{Name: "etcd-node1", Namespace: "kube-system", Error: "http://10.0.0.1:8000/pods.yaml:20: spec.containers[0].image: Required value"},
		}})
	})
	mux.HandleFunc("GET /pods/{ns}/{name}/events", func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("name") == "crash-node1" {
			writeJSON(w, fixtureEvents())
			return
		}
		writeJSON(w, v1.EventList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "EventList"}, Items: []v1.Event{}})
	})
	mux.HandleFunc("GET /pods/{ns}/{name}/log", func(w http.ResponseWriter, r *http.Request) {
		d.mu.Lock()
		d.logReq = append(d.logReq, r.URL.Path+"?"+r.URL.RawQuery)
		d.mu.Unlock()
		if r.URL.Query().Get("container") == "missing" {
			http.Error(w, "container missing is not valid for pod "+r.PathValue("name"), http.StatusBadRequest)
			return
		}
		w.Write([]byte(r.URL.Query().Get("container") + " line 1\n" + r.URL.Query().Get("container") + " line 2\n"))
	})
	l, err := net.Listen("unix", d.socket)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Shutdown(context.Background()) })
	return d
}

func (d *fakeDaemon) logRequests() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]string(nil), d.logReq...)
}

// golden compares got with testdata/name, or rewrites the file when
// UPDATE_GOLDEN=1 (an environment variable, so it never clashes with
// another test file's flags).
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if os.Getenv("UPDATE_GOLDEN") == "1" {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with UPDATE_GOLDEN=1 to create it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (UPDATE_GOLDEN=1 rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// pinClock makes AGE columns read an hour after the fixtures' start.
func pinClock(t *testing.T) {
	old := now
	now = func() time.Time { return cliT0.Add(time.Hour) }
	t.Cleanup(func() { now = old })
}
