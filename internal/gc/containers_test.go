package gc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeapi "k8s.io/cri-api/pkg/apis/testing"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/podpath/podpathtest"
	"github.com/berth-agent/berth/internal/podplan"
)

var gcNow = time.Unix(1_700_000_000, 0)

// gcC is a container of a GC table: name, ID, state and age (since
// creation, relative to gcNow).
type gcC struct {
	name  string
	id    string
	state podplan.ContainerState
	age   time.Duration
}

// gcPod builds a pod status with one sandbox and the given containers,
// sorted newest first as Relist does.
func gcPod(uid string, cs ...gcC) *podplan.PodStatus {
	p := &podplan.PodStatus{UID: types.UID(uid), Name: uid + "-node", Namespace: "default",
		Sandboxes: []*podplan.SandboxStatus{{ID: "s-" + uid, State: podplan.SandboxStateReady, Labels: podLabels(uid, uid)}}}
	for _, c := range cs {
		p.Containers = append(p.Containers, &podplan.ContainerStatus{
			ID: c.id, SandboxID: "s-" + uid, Name: c.name, State: c.state, CreatedAt: gcNow.Add(-c.age),
			Labels: podLabels(uid, uid),
		})
	}
	slices.SortFunc(p.Containers, func(a, b *podplan.ContainerStatus) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return p
}

// dead is an exited container created age ago.
func dead(name, id string, age time.Duration) gcC {
	return gcC{name: name, id: id, state: podplan.ContainerStateExited, age: age}
}

func running(name, id string, age time.Duration) gcC {
	return gcC{name: name, id: id, state: podplan.ContainerStateRunning, age: age}
}

func pods(ps ...*podplan.PodStatus) map[types.UID]*podplan.PodStatus {
	out := map[types.UID]*podplan.PodStatus{}
	for _, p := range ps {
		out[p.UID] = p
	}
	return out
}

// TestPlanContainerGC mirrors the kubelet's TestContainerGC cases
// (kuberuntime_gc_test.go), with berth's one change: the newest dead run
// of each unit of a pod that still exists is kept.
func TestPlanContainerGC(t *testing.T) {
	m := time.Minute
	tests := []struct {
		name         string
		pods         map[types.UID]*podplan.PodStatus
		policy       Policy
		sourcesReady bool
		deleted      []types.UID
		init         map[types.UID][]string
		want         []string // removed IDs, in removal order
	}{
		{
			name:   "no dead containers",
			pods:   pods(gcPod("a", running("app", "a0", m))),
			policy: DefaultPolicy,
		},
		{
			name:   "running containers are never candidates",
			pods:   pods(gcPod("a", running("app", "a0", m), running("app", "a1", 2*m))),
			policy: Policy{MaxPerPodContainer: 0, MaxContainers: 0},
		},
		{
			name:   "per-unit cap keeps the newest, removes oldest first",
			pods:   pods(gcPod("a", running("app", "a0", 0), dead("app", "a1", 1*m), dead("app", "a2", 2*m), dead("app", "a3", 3*m), dead("app", "a4", 4*m))),
			policy: Policy{MaxPerPodContainer: 2, MaxContainers: -1},
			want:   []string{"a4", "a3"},
		},
		{
			name:   "default policy keeps one dead per unit",
			pods:   pods(gcPod("a", dead("app", "a1", 1*m), dead("app", "a2", 2*m), dead("side", "b1", 1*m), dead("side", "b2", 2*m))),
			policy: DefaultPolicy,
			want:   []string{"a2", "b2"},
		},
		{
			name:   "per-unit cap 0 still keeps the newest dead of an existing pod",
			pods:   pods(gcPod("a", dead("app", "a1", 1*m), dead("app", "a2", 2*m))),
			policy: Policy{MaxPerPodContainer: 0, MaxContainers: -1},
			want:   []string{"a2"},
		},
		{
			name:   "no per-unit cap",
			pods:   pods(gcPod("a", dead("app", "a1", 1*m), dead("app", "a2", 2*m), dead("app", "a3", 3*m))),
			policy: Policy{MaxPerPodContainer: -1, MaxContainers: -1},
		},
		{
			name:   "min age protects young dead containers",
			pods:   pods(gcPod("a", dead("app", "a1", 1*m), dead("app", "a2", 2*m), dead("app", "a3", 3*m), dead("app", "a4", 4*m))),
			policy: Policy{MinAge: 150 * time.Second, MaxPerPodContainer: 0, MaxContainers: -1},
			// a1, a2 are too young to be candidates; a3 and a4 are old
			// enough, and the newest dead (a1) is not among them.
			want: []string{"a4", "a3"},
		},
		{
			name: "global cap spread evenly across units",
			pods: pods(
				gcPod("a", dead("app", "a1", 1*m), dead("app", "a2", 2*m), dead("app", "a3", 3*m), dead("app", "a4", 4*m)),
				gcPod("b", dead("app", "b1", 1*m), dead("app", "b2", 2*m), dead("app", "b3", 3*m), dead("app", "b4", 4*m)),
			),
			policy: Policy{MaxPerPodContainer: -1, MaxContainers: 4},
			want:   []string{"a4", "a3", "b4", "b3"},
		},
		{
			name: "global cap below the unit count keeps one per unit, then the oldest go",
			pods: pods(
				gcPod("a", dead("app", "a1", 1*m), dead("app", "a2", 2*m)),
				gcPod("b", dead("app", "b1", 5*m), dead("app", "b2", 6*m)),
				gcPod("c", dead("app", "c1", 3*m)),
			),
			policy: Policy{MaxPerPodContainer: -1, MaxContainers: 1},
			// One per unit leaves a1, b1, c1; all three are their unit's
			// newest of an existing pod, so none goes further.
			want: []string{"a2", "b2"},
		},
		{
			name: "global cap uneven share: oldest across units go",
			pods: pods(
				gcPod("a", dead("app", "a1", 1*m), dead("app", "a2", 2*m), dead("app", "a3", 3*m)),
				gcPod("b", dead("app", "b1", 4*m), dead("app", "b2", 5*m), dead("app", "b3", 6*m)),
			),
			policy: Policy{MaxPerPodContainer: -1, MaxContainers: 3},
			// Share is 1 per unit: a1 and b1 stay, 2 under the cap.
			want: []string{"a3", "a2", "b3", "b2"},
		},
		{
			name: "global cap with a large unit and small ones",
			pods: pods(
				gcPod("a", dead("app", "a1", 1*m), dead("app", "a2", 2*m), dead("app", "a3", 3*m), dead("app", "a4", 4*m), dead("app", "a5", 5*m)),
				gcPod("b", dead("app", "b1", 1*m)),
				gcPod("c", dead("app", "c1", 1*m)),
			),
			policy: Policy{MaxPerPodContainer: -1, MaxContainers: 6},
			want:   []string{"a5", "a4", "a3"},
		},
		{
			name: "deleted pod loses every dead container once sources are ready",
			pods: pods(
				gcPod("gone", dead("app", "g1", 1*m), dead("app", "g2", 2*m)),
				gcPod("kept", dead("app", "k1", 1*m)),
			),
			policy:       DefaultPolicy,
			sourcesReady: true,
			deleted:      []types.UID{"gone"},
			want:         []string{"g2", "g1"},
		},
		{
			name: "deleted pod is left alone until sources are ready",
			pods: pods(
				gcPod("gone", dead("app", "g1", 1*m), dead("app", "g2", 2*m)),
			),
			policy:  Policy{MaxPerPodContainer: -1, MaxContainers: -1},
			deleted: []types.UID{"gone"},
		},
		{
			name:         "deleted pod keeps its running container",
			pods:         pods(gcPod("gone", running("app", "g0", 0), dead("app", "g1", 1*m))),
			policy:       DefaultPolicy,
			sourcesReady: true,
			deleted:      []types.UID{"gone"},
			want:         []string{"g1"},
		},
		{
			name:   "init containers keep only their newest run",
			pods:   pods(gcPod("a", dead("init", "i1", 1*m), dead("init", "i2", 2*m), dead("init", "i3", 3*m), running("app", "a0", 0))),
			policy: Policy{MaxPerPodContainer: 5, MaxContainers: -1},
			init:   map[types.UID][]string{"a": {"init"}},
			want:   []string{"i3", "i2"},
		},
		{
			name:   "init container's last run survives the global cap",
			pods:   pods(gcPod("a", dead("init", "i1", 10*m), running("app", "a0", 0), dead("app", "a1", 1*m), dead("app", "a2", 2*m))),
			policy: Policy{MaxPerPodContainer: -1, MaxContainers: 1},
			init:   map[types.UID][]string{"a": {"init"}},
			want:   []string{"a2"},
		},
		{
			name:   "a container created but not started is left to its worker",
			pods:   pods(gcPod("a", gcC{name: "app", id: "a0", state: podplan.ContainerStateCreated, age: time.Second}, dead("app", "a1", 1*m), dead("app", "a2", 2*m))),
			policy: DefaultPolicy,
			want:   []string{"a2"},
		},
		{
			name:   "a container created long ago and never started is dead",
			pods:   pods(gcPod("a", gcC{name: "app", id: "a0", state: podplan.ContainerStateCreated, age: 2 * m}, dead("app", "a1", 3*m))),
			policy: DefaultPolicy,
			want:   []string{"a1"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan := PlanContainers(Input{
				Pods: tc.pods, Policy: tc.policy, AllSourcesReady: tc.sourcesReady, Now: gcNow,
				PodDeleted:     func(uid types.UID) bool { return slices.Contains(tc.deleted, uid) },
				InitContainers: tc.init,
			})
			var got []string
			for _, r := range plan {
				if r.Kind != KindContainer {
					t.Errorf("planned a %s", r.Kind)
				}
				got = append(got, r.ID)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("removed %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPlanContainerGCSkipsForeignContainers(t *testing.T) {
	p := gcPod("a", dead("app", "a1", time.Minute), dead("app", "a2", 2*time.Minute))
	delete(p.Containers[1].Labels, criconfig.LabelManaged)
	p.Containers[1].Labels = map[string]string{criconfig.LabelPodUID: "a"}
	plan := PlanContainers(Input{Pods: pods(p), Policy: Policy{MaxPerPodContainer: 0, MaxContainers: 0}, Now: gcNow})
	if len(plan) != 0 {
		t.Errorf("planned %+v for a container without berth's label", plan)
	}
}

func TestPlanSandboxGC(t *testing.T) {
	sb := func(id string, state podplan.SandboxState) *podplan.SandboxStatus {
		return &podplan.SandboxStatus{ID: id, State: state, Labels: podLabels("a", "a")}
	}
	withSandboxes := func(p *podplan.PodStatus, ss ...*podplan.SandboxStatus) *podplan.PodStatus {
		p.Sandboxes = ss
		return p
	}
	tests := []struct {
		name    string
		pod     *podplan.PodStatus
		removed []string // containers removed in this pass
		deleted bool
		want    []string
	}{
		{
			name: "existing pod keeps its newest sandbox even not ready",
			pod:  withSandboxes(gcPod("a"), sb("s3", podplan.SandboxStateNotReady), sb("s2", podplan.SandboxStateNotReady), sb("s1", podplan.SandboxStateNotReady)),
			want: []string{"s1", "s2"},
		},
		{
			name: "ready sandboxes are never removed",
			pod:  withSandboxes(gcPod("a"), sb("s2", podplan.SandboxStateReady), sb("s1", podplan.SandboxStateReady)),
		},
		{
			name: "a sandbox holding a container stays until the container goes",
			pod: func() *podplan.PodStatus {
				p := withSandboxes(gcPod("a", dead("app", "a1", time.Minute), dead("app", "a2", 2*time.Minute)),
					sb("s2", podplan.SandboxStateReady), sb("s1", podplan.SandboxStateNotReady), sb("s0", podplan.SandboxStateNotReady))
				p.Containers[0].SandboxID, p.Containers[1].SandboxID = "s1", "s0"
				return p
			}(),
			removed: []string{"a2"},
			want:    []string{"s0"},
		},
		{
			name:    "deleted pod loses every sandbox once empty",
			pod:     withSandboxes(gcPod("a", dead("app", "a1", time.Minute)), sb("s-a", podplan.SandboxStateNotReady), sb("s0", podplan.SandboxStateNotReady)),
			removed: []string{"a1"},
			deleted: true,
			want:    []string{"s0", "s-a"},
		},
		{
			name:    "deleted pod keeps a sandbox whose container could not be removed",
			pod:     withSandboxes(gcPod("a", dead("app", "a1", time.Minute)), sb("s-a", podplan.SandboxStateNotReady)),
			deleted: true,
		},
		{
			name: "foreign sandboxes are never removed",
			pod:  withSandboxes(gcPod("a"), sb("s2", podplan.SandboxStateNotReady), &podplan.SandboxStatus{ID: "s1", State: podplan.SandboxStateNotReady}),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			removed := map[string]bool{}
			for _, id := range tc.removed {
				removed[id] = true
			}
			plan := PlanSandboxes(Input{
				Pods: pods(tc.pod), AllSourcesReady: true, Now: gcNow,
				PodDeleted: func(types.UID) bool { return tc.deleted },
			}, removed)
			var got []string
			for _, r := range plan {
				got = append(got, r.ID)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("removed %v, want %v", got, tc.want)
			}
		})
	}
}

// gcFakeContainer is an exited container of pod uid on the fake runtime,
// with a log file and two rotations of it.
func gcFakeContainer(t *testing.T, env *gcTestEnv, uid, sandbox, id string, created time.Duration) string {
	t.Helper()
	logDir := filepath.Join(env.logs, "default_"+uid+"-node_"+uid, "app")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(logDir, id+".log")
	for _, f := range []string{logPath, logPath + ".20260101-120000.gz", logPath + ".20260101-130000"} {
		if err := os.WriteFile(f, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	termPath := filepath.Join(mustPath(t)(env.m.PodDir(types.UID(uid))), "containers", "app", id+"-msg")
	if err := os.MkdirAll(filepath.Dir(termPath), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(termPath, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	labels := podLabels(uid, uid+"-node")
	labels[criconfig.LabelContainerName] = "app"
	env.rs.SetFakeContainers(append(fakeContainers(env), &fakeapi.FakeContainer{ContainerStatus: runtimeapi.ContainerStatus{
		Id: id, Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, State: runtimeapi.ContainerState_CONTAINER_EXITED,
		CreatedAt: baseTime.Add(created).UnixNano(), FinishedAt: baseTime.Add(created + time.Second).UnixNano(),
		Labels: labels, LogPath: logPath,
		Annotations: map[string]string{criconfig.AnnotationTerminationMessagePath: "/dev/termination-log"},
		Mounts: []*runtimeapi.Mount{
			{ContainerPath: "/data", HostPath: "/srv/data"},
			{ContainerPath: "/dev/termination-log", HostPath: termPath},
		},
	}, SandboxID: sandbox}))
	return logPath
}

func fakeContainers(env *gcTestEnv) []*fakeapi.FakeContainer {
	env.rs.Lock()
	defer env.rs.Unlock()
	var out []*fakeapi.FakeContainer
	for _, c := range env.rs.Containers {
		out = append(out, c)
	}
	return out
}

// TestGarbageCollect runs passes over the fake runtime: old dead runs go
// with their rotated logs, a repeat pass over the same snapshot makes no
// runtime call, and a deleted pod leaves nothing behind.
func TestGarbageCollect(t *testing.T) {
	env := newGCTestEnv(t)
	ctx := context.Background()
	sandbox := fakeSandbox("s-a", "a", 0)
	sandbox.Labels = podLabels("a", "a-node")
	sandbox.Metadata.Name = "a-node"
	sandbox.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	env.rs.SetFakeSandboxes([]*fakeapi.FakePodSandbox{sandbox})
	var logs []string
	for i := range 3 {
		logs = append(logs, gcFakeContainer(t, env, "a", "s-a", fmt.Sprintf("c%d", i), time.Duration(i)*time.Minute))
	}
	if err := os.MkdirAll(mustPath(t)(env.m.PodDir("a")), 0o750); err != nil {
		t.Fatal(err)
	}
	snap, err := env.m.Relist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	env.calls()

	in := Input{Pods: snap, Policy: DefaultPolicy, AllSourcesReady: true, Now: baseTime.Add(time.Hour),
		PodDeleted: func(types.UID) bool { return false }}
	res := env.gc.GarbageCollect(ctx, in)
	if len(res.Errors) > 0 {
		t.Fatal(res.Errors)
	}
	if got, want := removedIDs(res), []string{"c0", "c1"}; !slices.Equal(got, want) {
		t.Errorf("removed %v, want %v", got, want)
	}
	if calls, want := env.calls(), []string{"RemoveContainer", "RemoveContainer"}; !slices.Equal(calls, want) {
		t.Errorf("calls = %v, want %v", calls, want)
	}
	for i, l := range logs {
		matches, _ := filepath.Glob(l + "*")
		if want := map[bool]int{true: 0, false: 3}[i < 2]; len(matches) != want {
			t.Errorf("log files of c%d: %v, want %d", i, matches, want)
		}
	}
	if msgs, _ := filepath.Glob(filepath.Join(mustPath(t)(env.m.PodDir("a")), "containers", "app", "*")); len(msgs) != 1 || filepath.Base(msgs[0]) != "c2-msg" {
		t.Errorf("termination-message files left: %v, want c2's only", msgs)
	}

	// The same (now stale) snapshot again: nothing left to do, no call.
	res = env.gc.GarbageCollect(ctx, in)
	if len(res.Removed) != 0 || len(res.Errors) != 0 {
		t.Errorf("second pass over a stale snapshot: %+v", res)
	}
	if calls := env.calls(); len(calls) != 0 {
		t.Errorf("second pass called the runtime: %v", calls)
	}

	// The pod is deleted: its last container, its sandbox and its
	// directories go.
	if snap, err = env.m.Relist(ctx); err != nil {
		t.Fatal(err)
	}
	in.Pods = snap
	in.PodDeleted = func(uid types.UID) bool { return uid == "a" }
	res = env.gc.GarbageCollect(ctx, in)
	if len(res.Errors) > 0 {
		t.Fatal(res.Errors)
	}
	var kinds []string
	for _, r := range res.Removed {
		kinds = append(kinds, r.Kind+":"+r.Reason)
	}
	want := []string{"container:" + ReasonDeletedPod, "sandbox:" + ReasonDeletedPod, "pod_log_dir:" + ReasonLeftoverDir, "pod_dir:" + ReasonLeftoverDir}
	if !slices.Equal(kinds, want) {
		t.Errorf("removed %v, want %v", kinds, want)
	}
	for _, dir := range []string{filepath.Dir(filepath.Dir(logs[0])), mustPath(t)(env.m.PodDir("a"))} {
		if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s left behind: %v", dir, err)
		}
	}
	if snap, _ := env.m.Relist(ctx); len(snap) != 0 {
		t.Errorf("runtime still has %v", snap)
	}
}

func removedIDs(res Result) []string {
	var out []string
	for _, r := range res.Removed {
		out = append(out, r.ID)
	}
	return out
}

func TestSweepPodDirs(t *testing.T) {
	env := newGCTestEnv(t)
	for _, uid := range []types.UID{"keep", "gone", "gone-nologs"} {
		if err := os.MkdirAll(filepath.Join(mustPath(t)(env.m.PodDir(uid)), "volumes"), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"default_keep-node_keep", "default_gone-node_gone", "default_other-node_other"} {
		if err := os.MkdirAll(filepath.Join(env.logs, d, "app"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := env.gc.SweepPodDirs(func(uid types.UID) bool { return uid == "keep" })
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range removed {
		got = append(got, r.Kind+":"+filepath.Base(r.ID))
	}
	slices.Sort(got)
	want := []string{"pod_dir:gone", "pod_dir:gone-nologs", "pod_log_dir:default_gone-node_gone"}
	if !slices.Equal(got, want) {
		t.Errorf("removed %v, want %v", got, want)
	}
	for _, keep := range []string{mustPath(t)(env.m.PodDir("keep")), filepath.Join(env.logs, "default_keep-node_keep"),
		filepath.Join(env.logs, "default_other-node_other")} {
		if _, err := os.Stat(keep); err != nil {
			t.Errorf("%s: %v", keep, err)
		}
	}
}

// TestGarbageCollectBacksOffFailedRemovals: a container the runtime
// refuses to remove is retried after a back-off, not on every pass.
func TestGarbageCollectBacksOffFailedRemovals(t *testing.T) {
	env := newGCTestEnv(t)
	ctx := context.Background()
	env.rs.SetFakeSandboxes([]*fakeapi.FakePodSandbox{fakeSandbox("s-a", "a", 0)})
	for i := range 2 {
		gcFakeContainer(t, env, "a", "s-a", fmt.Sprintf("c%d", i), time.Duration(i)*time.Minute)
	}
	snap, err := env.m.Relist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	env.calls()
	in := Input{Pods: snap, Policy: DefaultPolicy, Now: baseTime.Add(time.Hour)}

	env.rs.InjectError("RemoveContainer", errors.New("device or resource busy"))
	if res := env.gc.GarbageCollect(ctx, in); len(res.Errors) != 1 || len(res.Removed) != 0 {
		t.Fatalf("first pass: %+v", res)
	}
	env.calls()
	if res := env.gc.GarbageCollect(ctx, in); len(res.Errors) != 0 || len(res.Removed) != 0 {
		t.Errorf("pass within the back-off: %+v", res)
	}
	if calls := env.calls(); len(calls) != 0 {
		t.Errorf("pass within the back-off called %v", calls)
	}
	env.clock.Step(11 * time.Second)
	if res := env.gc.GarbageCollect(ctx, in); len(res.Errors) != 0 || !slices.Equal(removedIDs(res), []string{"c0"}) {
		t.Errorf("pass after the back-off: %+v", res)
	}
}

// TestGarbageCollectHostileRuntimeObjects: an orphan sandbox and container
// carrying berth's ownership label but a UID label, a log path and a
// termination-message mount that climb out of berth's roots (a hostile
// runtime object, or one a second berth made) are removed from the runtime,
// and nothing outside the roots is touched.
func TestGarbageCollectHostileRuntimeObjects(t *testing.T) {
	b := podpathtest.NewVictimBed(t)
	env := newGCTestEnvIn(t, b.Root, b.Logs)
	ctx := context.Background()
	const uid = "../../victim"
	sandbox := fakeSandbox("s-evil", uid, 0)
	sandbox.State = runtimeapi.PodSandboxState_SANDBOX_NOTREADY
	sandbox.Labels[criconfig.LabelPodNamespace] = ".."
	sandbox.Metadata.Namespace = ".."
	env.rs.SetFakeSandboxes([]*fakeapi.FakePodSandbox{sandbox})
	labels := podLabels(uid, "web-node")
	labels[criconfig.LabelContainerName] = "app"
	env.rs.SetFakeContainers([]*fakeapi.FakeContainer{{SandboxID: "s-evil", ContainerStatus: runtimeapi.ContainerStatus{
		Id: "c-evil", Metadata: &runtimeapi.ContainerMetadata{Name: "app"}, State: runtimeapi.ContainerState_CONTAINER_EXITED,
		CreatedAt: baseTime.UnixNano(), FinishedAt: baseTime.Add(time.Second).UnixNano(),
		Labels: labels, LogPath: filepath.Join(b.Logs, "..", "victim", "keep"),
		Annotations: map[string]string{criconfig.AnnotationTerminationMessagePath: "/dev/termination-log"},
		Mounts: []*runtimeapi.Mount{
			{ContainerPath: "/dev/termination-log", HostPath: filepath.Join(b.Root, "pods", "..", "..", "victim", "containers", "app", "msg")},
		},
	}}})
	snap, err := env.m.Relist(ctx)
	if err != nil {
		t.Fatal(err)
	}
	in := Input{Pods: snap, Policy: DefaultPolicy, AllSourcesReady: true, Now: baseTime.Add(time.Hour),
		PodDeleted: func(types.UID) bool { return true }}
	res := env.gc.GarbageCollect(ctx, in)
	if len(res.Errors) > 0 {
		t.Fatal(res.Errors)
	}
	if got, want := removedIDs(res), []string{"c-evil", "s-evil"}; !slices.Equal(got, want) {
		t.Errorf("removed %v, want %v", got, want)
	}
	if snap, _ := env.m.Relist(ctx); len(snap) != 0 {
		t.Errorf("runtime still has %v", snap)
	}
	b.Check(t)
}

// TestSweepPodDirsLeavesLinks: the sweep of RootDir/pods skips what is no
// directory of its own, such as a link planted there to a victim.
func TestSweepPodDirsLeavesLinks(t *testing.T) {
	b := podpathtest.NewVictimBed(t)
	env := newGCTestEnvIn(t, b.Root, b.Logs)
	if err := os.MkdirAll(filepath.Join(b.Root, "pods", "gone"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(b.Victim, filepath.Join(b.Root, "pods", "gone", "volumes")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(b.Victim, filepath.Join(b.Root, "pods", "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(b.Victim, filepath.Join(b.Logs, "default_web-node_gone")); err != nil {
		t.Fatal(err)
	}
	removed, err := env.gc.SweepPodDirs(func(types.UID) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range removed {
		got = append(got, r.Kind+":"+filepath.Base(r.ID))
	}
	if want := []string{"pod_log_dir:default_web-node_gone", "pod_dir:gone"}; !slices.Equal(got, want) {
		t.Errorf("removed %v, want %v", got, want)
	}
	b.Check(t)
}
