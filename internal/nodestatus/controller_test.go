package nodestatus

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	testclock "k8s.io/utils/clock/testing"
)

type fixture struct {
	client   *fake.Clientset
	clock    *testclock.FakeClock
	reg      *prometheus.Registry
	log      *bytes.Buffer
	snap     Snapshot
	pressure Pressure
	c        *Controller
}

func newFixture(t *testing.T, objects ...k8sruntime.Object) *fixture {
	t.Helper()
	f := &fixture{
		client: fake.NewClientset(objects...),
		clock:  testclock.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)),
		reg:    prometheus.NewRegistry(),
		log:    &bytes.Buffer{},
		snap:   Snapshot{Ready: true},
	}
	// The API server gives every object a UID; the fake tracker does not.
	f.client.PrependReactor("create", "nodes", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		n := a.(k8stesting.CreateAction).GetObject().(*v1.Node)
		n.UID = "node-uid-1"
		return false, nil, nil
	})
	f.c = New(Config{
		Nodes:    f.client.CoreV1().Nodes(),
		Leases:   f.client.CoordinationV1().Leases(LeaseNamespace),
		NodeName: "edge-1",
		Labels:   map[string]string{"site": "north", LabelOS: "plan9"},
		Taints:   []v1.Taint{{Key: "berth.io/edge", Effect: v1.TaintEffectNoSchedule}},
		NodeIP:   "192.0.2.10",
		Capacity: v1.ResourceList{
			v1.ResourceCPU:              resource.MustParse("4"),
			v1.ResourceMemory:           resource.MustParse("8Gi"),
			v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		},
		MaxPods:        110,
		NodeInfo:       v1.NodeSystemInfo{ContainerRuntimeVersion: "containerd://1.6.20"},
		KubeletVersion: "v1.37.2+berth.1.0.0",
		Pressure:       func() Pressure { return f.pressure },
		Rand:           func() float64 { return 0.5 },
		Clock:          f.clock,
		Logger:         slog.New(slog.NewTextHandler(f.log, nil)),
		Metrics:        f.reg,
	}, func() Snapshot { return f.snap })
	return f
}

func (f *fixture) node(t *testing.T) *v1.Node {
	t.Helper()
	n, err := f.client.CoreV1().Nodes().Get(context.Background(), "edge-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func (f *fixture) lease(t *testing.T) *coordinationv1.Lease {
	t.Helper()
	l, err := f.client.CoordinationV1().Leases(LeaseNamespace).Get(context.Background(), "edge-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// writes counts the actions of verb (and subresource) on resource since
// the client was built.
func (f *fixture) writes(verb, resource, subresource string) int {
	n := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == verb && a.GetResource().Resource == resource && a.GetSubresource() == subresource {
			n++
		}
	}
	return n
}

func condition(n *v1.Node, t v1.NodeConditionType) v1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return v1.NodeCondition{}
}

func TestRegistersNodeAsTheKubelet(t *testing.T) {
	f := newFixture(t)
	if wait := f.c.step(context.Background()); wait != renewInterval {
		t.Fatalf("next round in %s, want %s; log:\n%s", wait, renewInterval, f.log)
	}
	n := f.node(t)
	wantLabels := map[string]string{"site": "north", LabelHostname: "edge-1", LabelOS: runtime.GOOS, LabelArch: runtime.GOARCH}
	for k, v := range wantLabels {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	if len(n.Spec.Taints) != 1 || n.Spec.Taints[0].Key != "berth.io/edge" {
		t.Errorf("taints = %v", n.Spec.Taints)
	}
	wantAddrs := []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.0.2.10"}, {Type: v1.NodeHostName, Address: "edge-1"}}
	if len(n.Status.Addresses) != 2 || n.Status.Addresses[0] != wantAddrs[0] || n.Status.Addresses[1] != wantAddrs[1] {
		t.Errorf("addresses = %v, want %v", n.Status.Addresses, wantAddrs)
	}
	for _, rl := range []v1.ResourceList{n.Status.Capacity, n.Status.Allocatable} {
		if q := rl[v1.ResourcePods]; q.Value() != 110 {
			t.Errorf("pods = %s, want 110", q.String())
		}
		if q := rl[v1.ResourceCPU]; q.Value() != 4 {
			t.Errorf("cpu = %s, want 4", q.String())
		}
		if _, ok := rl[v1.ResourceEphemeralStorage]; !ok {
			t.Errorf("no ephemeral-storage in %v", rl)
		}
	}
	info := n.Status.NodeInfo
	if info.KubeletVersion != "v1.37.2+berth.1.0.0" || info.ContainerRuntimeVersion != "containerd://1.6.20" || info.OperatingSystem != runtime.GOOS {
		t.Errorf("nodeInfo = %+v", info)
	}
	for _, ct := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		if c := condition(n, ct); c.Status != v1.ConditionFalse {
			t.Errorf("%s = %+v, want False", ct, c)
		}
	}
	if c := condition(n, v1.NodeReady); c.Status != v1.ConditionTrue || c.Reason != "KubeletReady" {
		t.Errorf("Ready = %+v, want True", c)
	}
	l := f.lease(t)
	if *l.Spec.HolderIdentity != "edge-1" || *l.Spec.LeaseDurationSeconds != 40 || !l.Spec.RenewTime.Time.Equal(f.clock.Now()) {
		t.Errorf("lease spec = %+v", l.Spec)
	}
	if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" || l.OwnerReferences[0].UID != "node-uid-1" {
		t.Errorf("lease owners = %+v, want the Node", l.OwnerReferences)
	}
	if v := testutil.ToFloat64(f.c.metrics.registered); v != 1 {
		t.Errorf("berth_node_registered = %v, want 1", v)
	}
}

func TestExistingNodeKeepsItsLabelsButTheDefaults(t *testing.T) {
	existing := &v1.Node{ObjectMeta: metav1.ObjectMeta{
		Name: "edge-1", UID: "old-uid",
		Labels: map[string]string{"site": "south", LabelHostname: "other"},
	}}
	f := newFixture(t, existing)
	if wait := f.c.step(context.Background()); wait != renewInterval {
		t.Fatalf("next round in %s; log:\n%s", wait, f.log)
	}
	n := f.node(t)
	if n.Labels["site"] != "south" || n.Labels[LabelHostname] != "edge-1" || n.Labels[LabelArch] != runtime.GOARCH {
		t.Errorf("labels = %v: want site kept, the defaults put back", n.Labels)
	}
	if l := f.lease(t); len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != "old-uid" {
		t.Errorf("lease owners = %+v, want the existing Node's UID", l.OwnerReferences)
	}
}

func TestStatusWrittenOnChangeAndEveryReportFrequency(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.c.step(ctx)
	base := f.writes("update", "nodes", "status")
	firstTransition := condition(f.node(t), v1.NodeReady).LastTransitionTime

	tests := []struct {
		name    string
		advance time.Duration
		change  func()
		want    int // status writes this round
	}{
		{"unchanged within the report frequency", renewInterval, func() {}, 0},
		{"not ready", renewInterval, func() { f.snap = Snapshot{Ready: false, NotReadyMessage: "runtime down"} }, 1},
		{"unchanged again", renewInterval, func() {}, 0},
		{"disk pressure", renewInterval, func() { f.pressure.Disk = "full" }, 1},
		{"unchanged past the report frequency", DefaultReportFrequency, func() {}, 1},
	}
	for _, tc := range tests {
		f.clock.Step(tc.advance)
		tc.change()
		f.c.step(ctx)
		got := f.writes("update", "nodes", "status") - base
		base += got
		if got != tc.want {
			t.Errorf("%s: %d status writes, want %d", tc.name, got, tc.want)
		}
	}
	n := f.node(t)
	ready := condition(n, v1.NodeReady)
	if ready.Status != v1.ConditionFalse || ready.Message != "runtime down" {
		t.Errorf("Ready = %+v, want False: runtime down", ready)
	}
	if ready.LastTransitionTime.Equal(&firstTransition) || !ready.LastHeartbeatTime.Time.Equal(f.clock.Now()) {
		t.Errorf("Ready times = %+v: want a new transition and a heartbeat now", ready)
	}
	if c := condition(n, v1.NodeDiskPressure); c.Status != v1.ConditionTrue || c.Message != "full" {
		t.Errorf("DiskPressure = %+v", c)
	}
	if renewals := testutil.ToFloat64(f.c.metrics.renewals.WithLabelValues("ok")); renewals != 6 {
		t.Errorf("lease renewals = %v, want one a round (6)", renewals)
	}
}

func conflict(resource string) error {
	return apierrors.NewConflict(schema.GroupResource{Resource: resource}, "edge-1", errors.New("the object has been modified"))
}

func TestConflictsAreRetriedOnAFreshRead(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.c.step(ctx)
	leaseConflicts, statusConflicts := 2, 1
	f.client.PrependReactor("update", "leases", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		if leaseConflicts > 0 {
			leaseConflicts--
			return true, nil, conflict("leases")
		}
		return false, nil, nil
	})
	f.client.PrependReactor("update", "nodes", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		if a.GetSubresource() == "status" && statusConflicts > 0 {
			statusConflicts--
			return true, nil, conflict("nodes")
		}
		return false, nil, nil
	})
	f.client.ClearActions()
	f.clock.Step(renewInterval)
	f.snap.Ready = false
	if wait := f.c.step(ctx); wait != renewInterval {
		t.Fatalf("next round in %s, want %s: conflicts must be retried; log:\n%s", wait, renewInterval, f.log)
	}
	if got := f.writes("get", "leases", ""); got != 2 {
		t.Errorf("%d lease reads, want one after each conflict (2)", got)
	}
	var rvs []string
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "nodes" {
			rvs = append(rvs, a.(k8stesting.GetActionImpl).GetOptions.ResourceVersion)
		}
	}
	if strings.Join(rvs, ",") != "0," {
		t.Errorf("node reads with resourceVersion %q, want the cache first, then the latest (\"0,\")", rvs)
	}
	if c := condition(f.node(t), v1.NodeReady); c.Status != v1.ConditionFalse {
		t.Errorf("Ready = %+v after the retry, want False", c)
	}
	if l := f.lease(t); !l.Spec.RenewTime.Time.Equal(f.clock.Now()) {
		t.Errorf("lease renewed at %v, want %v", l.Spec.RenewTime, f.clock.Now())
	}
}

func TestUnreachableAPIServerBacksOffAndLogsOnChange(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	down := true
	f.client.PrependReactor("*", "*", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		if down {
			return true, nil, errors.New("connection refused")
		}
		return false, nil, nil
	})
	var waits []time.Duration
	for range 12 {
		waits = append(waits, f.c.step(ctx))
	}
	for i, w := range waits {
		if w < backoffMin/2 || w > backoffMax {
			t.Errorf("wait %d = %s, outside the back-off [%s, %s]", i, w, backoffMin/2, backoffMax)
		}
		if i > 0 && w < waits[i-1] {
			t.Errorf("wait %d = %s shrank from %s", i, w, waits[i-1])
		}
	}
	if waits[len(waits)-1] < backoffMax/2 {
		t.Errorf("last wait %s: back-off never reached its cap", waits[len(waits)-1])
	}
	if n := strings.Count(f.log.String(), "node not kept up to date"); n != 1 {
		t.Errorf("%d warnings for one unchanged error, want 1; log:\n%s", n, f.log)
	}
	if v := testutil.ToFloat64(f.c.metrics.registered); v != 0 {
		t.Errorf("berth_node_registered = %v while down", v)
	}
	down = false
	if w := f.c.step(ctx); w != renewInterval {
		t.Errorf("after recovery next round in %s", w)
	}
	if !strings.Contains(f.log.String(), "node up to date again") {
		t.Errorf("recovery not logged:\n%s", f.log)
	}
}

func TestDeletedNodeIsRegisteredAgain(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	f.c.step(ctx)
	if err := f.client.CoreV1().Nodes().Delete(ctx, "edge-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.clock.Step(renewInterval)
	f.c.step(ctx) // finds the Node gone
	if v := testutil.ToFloat64(f.c.metrics.registered); v != 0 {
		t.Errorf("berth_node_registered = %v with the Node gone", v)
	}
	f.c.step(ctx)
	if n := f.node(t); n.UID != "node-uid-1" || condition(n, v1.NodeReady).Status != v1.ConditionTrue {
		t.Errorf("node after re-registration = %+v", n.Status.Conditions)
	}
}

func TestRunRenewsOnTheClockAndStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t)
		f.c.clock = clock.RealClock{} // the bubble's fake time
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { f.c.Run(ctx); close(done) }()
		for want := 1.0; want <= 3; want++ {
			synctest.Wait() // Run waits for its next round
			if got := testutil.ToFloat64(f.c.metrics.renewals.WithLabelValues("ok")); got != want {
				t.Fatalf("renewals = %v, want %v", got, want)
			}
			time.Sleep(renewInterval)
		}
		cancel()
		<-done
	})
}

func TestKubeletVersion(t *testing.T) {
	tests := []struct{ berth, want string }{
		{"v1.4.0", "+berth.1.4.0"},
		{"1.4.0-rc.1", "+berth.1.4.0-rc.1"},
		{"v0.9.0-12-gabc123+dirty", "+berth.0.9.0-12-gabc123-dirty"},
		{"", "+berth.unknown"},
		{"dev/build..x", "+berth.dev-build.x"},
	}
	for _, tc := range tests {
		got := KubeletVersion(tc.berth)
		if !strings.HasPrefix(got, "v1.") || !strings.HasSuffix(got, tc.want) {
			t.Errorf("KubeletVersion(%q) = %q, want v1.*%s", tc.berth, got, tc.want)
		}
	}
}

func TestStatusChangedIgnoresHeartbeats(t *testing.T) {
	now := metav1.NewTime(time.Unix(100, 0))
	later := metav1.NewTime(time.Unix(200, 0))
	a := v1.NodeStatus{Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: now}}}
	b := *a.DeepCopy()
	b.Conditions[0].LastHeartbeatTime = later
	if statusChanged(&a, &b) {
		t.Error("a heartbeat alone counts as a change")
	}
	b.Conditions[0].Status = v1.ConditionFalse
	if !statusChanged(&a, &b) {
		t.Error("a status change is not a change")
	}
}
