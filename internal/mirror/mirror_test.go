package mirror

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"

	"github.com/berth-agent/berth/internal/podspec"
)

type event struct{ pod, reason, message string }

type fixture struct {
	client     *fake.Clientset
	clock      *testclock.FakeClock
	log        *bytes.Buffer
	mu         sync.Mutex // guards pods, which Run's goroutine reads
	pods       []*v1.Pod
	incomplete bool // the sources have not all delivered
	events     []event
	m          *Mirrorer
}

var node = &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge-1", UID: "node-uid"}}

func newFixture(t *testing.T, objects ...k8sruntime.Object) *fixture {
	t.Helper()
	f := &fixture{
		client: fake.NewClientset(append([]k8sruntime.Object{node}, objects...)...),
		clock:  testclock.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)),
		log:    &bytes.Buffer{},
	}
	// The API server gives each pod a UID and resets the status of a
	// pod created; the fake tracker does neither.
	n := 0
	f.client.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		p := a.(k8stesting.CreateAction).GetObject().(*v1.Pod)
		n++
		p.UID = types.UID(fmt.Sprintf("mirror-%d", n))
		p.Status = v1.PodStatus{Phase: v1.PodPending, QOSClass: v1.PodQOSBestEffort}
		return false, nil, nil
	})
	f.m = New(Config{
		Pods:     func(ns string) PodClient { return f.client.CoreV1().Pods(ns) },
		Nodes:    f.client.CoreV1().Nodes(),
		NodeName: "edge-1",
		Event: func(p *v1.Pod, reason, message string) {
			f.events = append(f.events, event{p.Name, reason, message})
		},
		Rand:    func() float64 { return 0.5 },
		Clock:   f.clock,
		Logger:  slog.New(slog.NewTextHandler(f.log, nil)),
		Metrics: prometheus.NewRegistry(),
	}, func() Snapshot {
		f.mu.Lock()
		defer f.mu.Unlock()
		return Snapshot{Pods: f.pods, Complete: !f.incomplete}
	})
	return f
}

func staticPod(name, hash string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name + "-edge-1", Namespace: "default", UID: types.UID(hash),
			Labels:      map[string]string{"app": name},
			Annotations: map[string]string{podspec.AnnotationHash: hash, podspec.AnnotationSource: "file"},
		},
		Spec:   v1.PodSpec{NodeName: "edge-1", Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
		Status: v1.PodStatus{Phase: v1.PodRunning, PodIP: "10.0.0.5", ContainerStatuses: []v1.ContainerStatus{{Name: "c", Ready: true, RestartCount: 2}}},
	}
}

func mirrorOf(name, hash string, uid types.UID) *v1.Pod {
	p := staticPod(name, hash)
	p.UID = uid
	p.Annotations[AnnotationMirror] = hash
	return p
}

func (f *fixture) apiPods(t *testing.T) map[string]*v1.Pod {
	t.Helper()
	list, err := f.client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*v1.Pod{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

func (f *fixture) actions(verb, subresource string) []k8stesting.Action {
	var out []k8stesting.Action
	for _, a := range f.client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == "pods" && a.GetSubresource() == subresource {
			out = append(out, a)
		}
	}
	return out
}

func (f *fixture) round(t *testing.T) {
	t.Helper()
	if wait := f.m.step(context.Background()); wait != checkPeriod {
		t.Fatalf("round failed (next in %s); log:\n%s", wait, f.log)
	}
}

func TestCreatesMirrorPodAsTheKubelet(t *testing.T) {
	f := newFixture(t)
	f.pods = []*v1.Pod{staticPod("web", "hash-1")}
	f.round(t)
	mp := f.apiPods(t)["web-edge-1"]
	if mp == nil {
		t.Fatal("no mirror pod")
	}
	if mp.Annotations[AnnotationMirror] != "hash-1" || mp.Annotations[podspec.AnnotationSource] != "file" || mp.Labels["app"] != "web" {
		t.Errorf("metadata = %+v", mp.ObjectMeta)
	}
	if mp.Spec.NodeName != "edge-1" {
		t.Errorf("nodeName = %q", mp.Spec.NodeName)
	}
	owners := mp.OwnerReferences
	if len(owners) != 1 || owners[0].Kind != "Node" || owners[0].APIVersion != "v1" || owners[0].Name != "edge-1" ||
		owners[0].UID != "node-uid" || owners[0].Controller == nil || !*owners[0].Controller {
		t.Errorf("ownerReferences = %+v, want one controller reference to the Node", owners)
	}
	if mp.Status.Phase != v1.PodRunning || mp.Status.PodIP != "10.0.0.5" || mp.Status.ContainerStatuses[0].RestartCount != 2 {
		t.Errorf("status = %+v, want the pod's", mp.Status)
	}
	patches := f.actions("patch", "status")
	if len(patches) != 1 {
		t.Fatalf("%d status patches, want 1", len(patches))
	}
	body := string(patches[0].(k8stesting.PatchAction).GetPatch())
	if !strings.Contains(body, `"uid":"mirror-1"`) {
		t.Errorf("status patch %s has no UID precondition", body)
	}
	if strings.Contains(body, "qosClass") {
		t.Errorf("status patch %s changes the QoS class the API server set", body)
	}

	f.round(t)
	if n := len(f.actions("patch", "status")); n != 1 {
		t.Errorf("%d status patches after an unchanged round, want still 1", n)
	}
	changed := staticPod("web", "hash-1")
	changed.Status.ContainerStatuses[0].RestartCount = 3
	f.pods = []*v1.Pod{changed}
	f.round(t)
	if n := len(f.actions("patch", "status")); n != 2 {
		t.Errorf("%d status patches after a restart, want 2", n)
	}
	if rc := f.apiPods(t)["web-edge-1"].Status.ContainerStatuses[0].RestartCount; rc != 3 {
		t.Errorf("restart count = %d, want 3", rc)
	}
	if len(f.actions("create", "")) != 1 {
		t.Errorf("mirror created %d times, want once", len(f.actions("create", "")))
	}
}

func TestEditReplacesAndRemovalDeletesTheMirror(t *testing.T) {
	f := newFixture(t)
	f.pods = []*v1.Pod{staticPod("web", "hash-1")}
	f.round(t)
	f.pods = []*v1.Pod{staticPod("web", "hash-2")}
	f.round(t)
	deletes := f.actions("delete", "")
	if len(deletes) != 1 {
		t.Fatalf("%d deletes on an edit, want 1", len(deletes))
	}
	opts := deletes[0].(k8stesting.DeleteActionImpl).DeleteOptions
	if opts.Preconditions == nil || opts.Preconditions.UID == nil || *opts.Preconditions.UID != "mirror-1" {
		t.Errorf("delete preconditions = %+v, want the old mirror's UID", opts.Preconditions)
	}
	mp := f.apiPods(t)["web-edge-1"]
	if mp == nil || mp.Annotations[AnnotationMirror] != "hash-2" || mp.UID != "mirror-2" {
		t.Fatalf("mirror after the edit = %+v", mp)
	}
	f.pods = nil
	f.round(t)
	if pods := f.apiPods(t); len(pods) != 0 {
		t.Errorf("pods left after the removal: %v", pods)
	}
}

func TestStartDeletesStaleMirrorsAndAdoptsCurrentOnes(t *testing.T) {
	current := mirrorOf("web", "hash-1", "m-web")
	stale := mirrorOf("old", "hash-9", "m-old")
	outdated := mirrorOf("db", "hash-3", "m-db")
	notMirror := staticPod("bound", "x")
	delete(notMirror.Annotations, AnnotationMirror)
	elsewhere := mirrorOf("far", "hash-4", "m-far")
	elsewhere.Spec.NodeName = "edge-2"
	f := newFixture(t, current, stale, outdated, notMirror, elsewhere)
	f.pods = []*v1.Pod{staticPod("web", "hash-1"), staticPod("db", "hash-5")}
	f.round(t)
	pods := f.apiPods(t)
	if pods["old-edge-1"] != nil {
		t.Error("the mirror of a pod berth no longer runs was kept")
	}
	if p := pods["web-edge-1"]; p == nil || p.UID != "m-web" {
		t.Errorf("the current mirror was not kept as it was: %+v", p)
	}
	if p := pods["db-edge-1"]; p == nil || p.Annotations[AnnotationMirror] != "hash-5" {
		t.Errorf("the outdated mirror was not replaced: %+v", p)
	}
	if pods["bound-edge-1"] == nil || pods["far-edge-1"] == nil {
		t.Error("a pod that is not this node's mirror was deleted")
	}
	if n := len(f.actions("create", "")); n != 1 {
		t.Errorf("%d creates, want 1 (db only)", n)
	}
}

func TestUnmirrorablePodGetsNoMirrorAndSaysWhy(t *testing.T) {
	older := mirrorOf("app", "hash-1", "m-app")
	f := newFixture(t, older)
	p := staticPod("app", "hash-2")
	p.Spec.Volumes = []v1.Volume{{Name: "creds", VolumeSource: v1.VolumeSource{Secret: &v1.SecretVolumeSource{SecretName: "token"}}}}
	f.pods = []*v1.Pod{p}
	f.round(t)
	f.round(t)
	if pods := f.apiPods(t); len(pods) != 0 {
		t.Errorf("pods in the API server: %v, want none (the older mirror deleted)", pods)
	}
	if len(f.events) != 1 || f.events[0].reason != ReasonNodeRestriction || !strings.Contains(f.events[0].message, `Secret "token"`) {
		t.Errorf("events = %+v, want one NodeRestriction event naming the Secret", f.events)
	}
	if c, ok := Condition(p, f.clock.Now()); !ok || c.Status != v1.ConditionFalse || c.Reason != ReasonNodeRestriction {
		t.Errorf("Condition = %+v, %v", c, ok)
	}
	if _, ok := Condition(staticPod("web", "h"), f.clock.Now()); ok {
		t.Error("a mirrorable pod has a Mirrored condition")
	}
}

func TestMirrorDeletedBySomeoneElseIsRecreated(t *testing.T) {
	f := newFixture(t)
	f.pods = []*v1.Pod{staticPod("web", "hash-1")}
	f.round(t)
	if err := f.client.CoreV1().Pods("default").Delete(context.Background(), "web-edge-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	changed := staticPod("web", "hash-1")
	changed.Status.Phase = v1.PodFailed
	f.pods = []*v1.Pod{changed}
	f.m.step(context.Background()) // the patch finds it gone
	f.round(t)
	if p := f.apiPods(t)["web-edge-1"]; p == nil || p.Status.Phase != v1.PodFailed {
		t.Errorf("mirror after it was deleted = %+v", p)
	}
}

func TestAPIServerFailuresBackOff(t *testing.T) {
	f := newFixture(t)
	f.pods = []*v1.Pod{staticPod("web", "hash-1")}
	down := true
	f.client.PrependReactor("*", "*", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		if down {
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	prev := time.Duration(0)
	for i := range 8 {
		w := f.m.step(context.Background())
		if w < prev || w > backoffMax {
			t.Errorf("wait %d = %s after %s", i, w, prev)
		}
		prev = w
	}
	if prev < backoffMax/2 {
		t.Errorf("back-off stopped at %s", prev)
	}
	if n := testutil.ToFloat64(f.m.errors.WithLabelValues("list")); n != 8 {
		t.Errorf("list errors = %v, want 8", n)
	}
	if n := strings.Count(f.log.String(), "mirror pods not up to date"); n != 1 {
		t.Errorf("%d warnings for one unchanged error; log:\n%s", n, f.log)
	}
	down = false
	f.round(t)
	if f.apiPods(t)["web-edge-1"] == nil {
		t.Error("no mirror after the API server came back")
	}
}

func TestRunChecksOnTheClockAndStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		f.m.clock = clock.RealClock{} // the bubble's fake time
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { f.m.Run(ctx); close(done) }()
		synctest.Wait()
		f.mu.Lock()
		f.pods = []*v1.Pod{staticPod("web", "hash-1")}
		f.mu.Unlock()
		if f.apiPods(t)["web-edge-1"] != nil {
			t.Fatal("mirror created before the pod existed")
		}
		time.Sleep(checkPeriod)
		synctest.Wait()
		if f.apiPods(t)["web-edge-1"] == nil {
			t.Error("no mirror a check period after the pod appeared")
		}
		cancel()
		<-done
	})
}

func TestUnmirrorable(t *testing.T) {
	secretEnv := v1.EnvVar{Name: "T", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "s"}}}}
	cmEnv := v1.EnvVar{Name: "C", ValueFrom: &v1.EnvVarSource{ConfigMapKeyRef: &v1.ConfigMapKeySelector{LocalObjectReference: v1.LocalObjectReference{Name: "cm"}}}}
	tests := []struct {
		name string
		edit func(*v1.PodSpec)
		want string // in the message; "" for a mirrorable pod
	}{
		{"plain", func(*v1.PodSpec) {}, ""},
		{"host path and plain env", func(s *v1.PodSpec) {
			s.Volumes = []v1.Volume{{Name: "h", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: "/x"}}}}
			s.Containers[0].Env = []v1.EnvVar{{Name: "A", Value: "b"}}
		}, ""},
		{"service account", func(s *v1.PodSpec) { s.ServiceAccountName = "sa" }, `service account "sa"`},
		{"pull secret", func(s *v1.PodSpec) { s.ImagePullSecrets = []v1.LocalObjectReference{{Name: "reg"}} }, `image pull Secret "reg"`},
		{"configmap volume", func(s *v1.PodSpec) {
			s.Volumes = []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{ConfigMap: &v1.ConfigMapVolumeSource{LocalObjectReference: v1.LocalObjectReference{Name: "cfg"}}}}}
		}, `ConfigMap "cfg" (volume v)`},
		{"projected secret", func(s *v1.PodSpec) {
			s.Volumes = []v1.Volume{{Name: "p", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{Sources: []v1.VolumeProjection{
				{Secret: &v1.SecretProjection{LocalObjectReference: v1.LocalObjectReference{Name: "ps"}}},
			}}}}}
		}, `Secret "ps" (volume p)`},
		{"pvc", func(s *v1.PodSpec) {
			s.Volumes = []v1.Volume{{Name: "d", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}
		}, `persistent volume claim "data"`},
		{"secret env", func(s *v1.PodSpec) { s.Containers[0].Env = []v1.EnvVar{secretEnv} }, `Secret "s" (container c, env T)`},
		{"configmap env in an init container", func(s *v1.PodSpec) {
			s.InitContainers = []v1.Container{{Name: "i", Env: []v1.EnvVar{cmEnv}}}
		}, `ConfigMap "cm" (container i, env C)`},
		{"envFrom secret", func(s *v1.PodSpec) {
			s.Containers[0].EnvFrom = []v1.EnvFromSource{{SecretRef: &v1.SecretEnvSource{LocalObjectReference: v1.LocalObjectReference{Name: "all"}}}}
		}, `Secret "all" (container c, envFrom)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := staticPod("x", "h")
			tc.edit(&p.Spec)
			got := Unmirrorable(p)
			if tc.want == "" {
				if got != "" {
					t.Errorf("Unmirrorable = %q, want mirrorable", got)
				}
				return
			}
			if !strings.Contains(got, tc.want) || !strings.Contains(got, "NodeRestriction") {
				t.Errorf("Unmirrorable = %q, want it to name %s and NodeRestriction", got, tc.want)
			}
		})
	}
}

func TestMergePatch(t *testing.T) {
	old := map[string]any{"phase": "Pending", "message": "waiting", "podIP": "10.0.0.1",
		"nested": map[string]any{"a": 1.0, "b": 2.0}, "list": []any{1.0, 2.0}}
	updated := map[string]any{"phase": "Running", "podIP": "10.0.0.1",
		"nested": map[string]any{"a": 1.0}, "list": []any{1.0}}
	got, err := json.Marshal(mergePatch(old, updated))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"list":[1],"message":null,"nested":{"b":null},"phase":"Running"}`
	if string(got) != want {
		t.Errorf("mergePatch = %s, want %s", got, want)
	}
}

// TestRestartKeepsMirrorsUntilPodsAreKnown is berth restarted: before its
// sources delivered, a mirror whose pod is not known yet is kept; a pod
// not synced yet keeps its mirror as it is, and once synced the same
// mirror is patched, never re-created.
func TestRestartKeepsMirrorsUntilPodsAreKnown(t *testing.T) {
	f := newFixture(t, mirrorOf("web", "hash-1", "m-web"), mirrorOf("gone", "hash-2", "m-gone"))
	f.incomplete = true
	f.round(t)
	unsynced := staticPod("web", "hash-1")
	unsynced.Status = v1.PodStatus{}
	f.pods = []*v1.Pod{unsynced}
	f.round(t)
	if pods := f.apiPods(t); len(pods) != 2 {
		t.Fatalf("pods before the sources delivered: %d, want both mirrors kept", len(pods))
	}
	f.incomplete = false
	f.round(t)
	pods := f.apiPods(t)
	if pods["gone-edge-1"] != nil || pods["web-edge-1"] == nil || pods["web-edge-1"].UID != "m-web" {
		t.Fatalf("pods once complete: %v, want gone deleted, web kept", pods)
	}
	if n := len(f.actions("patch", "status")); n != 0 {
		t.Errorf("%d status patches for a pod not synced yet", n)
	}
	f.pods = []*v1.Pod{staticPod("web", "hash-1")}
	f.round(t)
	if p := f.apiPods(t)["web-edge-1"]; p.UID != "m-web" || p.Status.Phase != v1.PodRunning {
		t.Errorf("web's mirror once synced = %s %s, want m-web Running", p.UID, p.Status.Phase)
	}
	if n := len(f.actions("create", "")); n != 0 {
		t.Errorf("%d mirrors created, want none", n)
	}
}
