package store

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/berth-agent/berth/internal/podsnapshot"
	"github.com/berth-agent/berth/internal/podspec"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
)

// testPod is a minimal accepted pod; image and origin stand for "spec" and
// "bookkeeping" changes.
func testPod(name, uid, image, origin string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", UID: types.UID(uid),
			Annotations: map[string]string{podspec.AnnotationHash: uid, podspec.AnnotationSource: podspec.SourceFile, podspec.AnnotationOrigin: origin},
		},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "c", Image: image}}},
	}
}

// drain reads what the store has emitted so far, as "OP name/uid" lines.
func drain(s *Store) []string {
	var out []string
	for {
		select {
		case u := <-s.Updates():
			for _, p := range u.Pods {
				out = append(out, fmt.Sprintf("%s %s %s/%s", u.Op, u.Source, p.Name, p.UID))
			}
		default:
			return out
		}
	}
}

func TestStoreOps(t *testing.T) {
	a1 := testPod("a", "ua", "img:1", "/m/a.yaml")
	a1edit := testPod("a", "ua", "img:2", "/m/a.yaml")
	a1moved := testPod("a", "ua", "img:1", "/m/z.yaml")
	a2 := testPod("a", "ua2", "img:2", "/m/a.yaml")
	b := testPod("b", "ub", "img:1", "/m/b.yaml")
	c := testPod("c", "uc", "img:1", "/m/c.yaml")
	tests := []struct {
		name  string
		steps [][]*v1.Pod // successive snapshots of the file source
		want  [][]string  // updates after each step
	}{
		{"add then same again is silent", [][]*v1.Pod{{a1, b}, {a1, b}},
			[][]string{{"ADD file a/ua", "ADD file b/ub"}, nil}},
		{"remove one", [][]*v1.Pod{{a1, b}, {b}},
			[][]string{{"ADD file a/ua", "ADD file b/ub"}, {"REMOVE file a/ua"}}},
		{"edit with new UID is remove then add", [][]*v1.Pod{{a1}, {a2}},
			[][]string{{"ADD file a/ua"}, {"REMOVE file a/ua", "ADD file a/ua2"}}},
		{"edit with fixed UID is update", [][]*v1.Pod{{a1}, {a1edit}},
			[][]string{{"ADD file a/ua"}, {"UPDATE file a/ua"}}},
		{"moved with fixed UID is reconcile", [][]*v1.Pod{{a1}, {a1moved}},
			[][]string{{"ADD file a/ua"}, {"RECONCILE file a/ua"}}},
		{"everything at once, removals first", [][]*v1.Pod{{a1, b}, {a1edit, c}},
			[][]string{{"ADD file a/ua", "ADD file b/ub"}, {"REMOVE file b/ub", "ADD file c/uc", "UPDATE file a/ua"}}},
		{"empty snapshot removes all", [][]*v1.Pod{{a1, b}, {}},
			[][]string{{"ADD file a/ua", "ADD file b/ub"}, {"REMOVE file a/ua", "REMOVE file b/ub"}}},
		{"duplicate UID in a snapshot counts once", [][]*v1.Pod{{a1, a1}},
			[][]string{{"ADD file a/ua"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(podspec.SourceFile)
			for i, pods := range tt.steps {
				if err := s.Apply(context.Background(), podsnapshot.Snapshot{Source: podspec.SourceFile, Pods: pods}); err != nil {
					t.Fatal(err)
				}
				got := drain(s)
				if strings.Join(got, "\n") != strings.Join(tt.want[i], "\n") {
					t.Errorf("step %d: updates\n%s\nwant\n%s", i, strings.Join(got, "\n"), strings.Join(tt.want[i], "\n"))
				}
			}
		})
	}
}

func TestStoreSeenIsStableAcrossRereads(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC))
	s := NewWithClock(clk, podspec.SourceFile)
	ctx := context.Background()
	if err := s.Apply(ctx, podsnapshot.Snapshot{Source: podspec.SourceFile, Pods: []*v1.Pod{testPod("a", "ua", "img:1", "o")}}); err != nil {
		t.Fatal(err)
	}
	u := <-s.Updates()
	seen := u.Pods[0].Annotations[podspec.AnnotationSeen]
	if seen != "2026-01-02T03:04:05.000000006Z" {
		t.Fatalf("config.seen = %q", seen)
	}
	clk.SetTime(clk.Now().Add(time.Hour))
	for _, p := range []*v1.Pod{testPod("a", "ua", "img:1", "o"), testPod("a", "ua", "img:2", "o")} {
		if err := s.Apply(ctx, podsnapshot.Snapshot{Source: podspec.SourceFile, Pods: []*v1.Pod{p}}); err != nil {
			t.Fatal(err)
		}
	}
	u = <-s.Updates()
	if u.Op != OpUpdate || u.Pods[0].Annotations[podspec.AnnotationSeen] != seen {
		t.Errorf("got %s with seen %q, want UPDATE keeping %q", u.Op, u.Pods[0].Annotations[podspec.AnnotationSeen], seen)
	}
	if got := s.Pods()[0].Annotations[podspec.AnnotationSeen]; got != seen {
		t.Errorf("Pods() seen = %q, want %q", got, seen)
	}
}

func TestStoreSourcesReady(t *testing.T) {
	tests := []struct {
		name      string
		required  []string
		snapshots []podsnapshot.Snapshot
		want      bool
	}{
		{"no sources", nil, nil, true},
		{"nothing delivered", []string{podspec.SourceFile}, nil, false},
		{"file delivered", []string{podspec.SourceFile}, []podsnapshot.Snapshot{{Source: podspec.SourceFile}}, true},
		{"http only failed", []string{podspec.SourceFile, podspec.SourceHTTP},
			[]podsnapshot.Snapshot{{Source: podspec.SourceFile}, {Source: podspec.SourceHTTP, Failed: true}}, false},
		{"http failed then answered", []string{podspec.SourceHTTP},
			[]podsnapshot.Snapshot{{Source: podspec.SourceHTTP, Failed: true}, {Source: podspec.SourceHTTP}}, true},
		{"answered then failed stays ready", []string{podspec.SourceHTTP},
			[]podsnapshot.Snapshot{{Source: podspec.SourceHTTP}, {Source: podspec.SourceHTTP, Failed: true}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New(tt.required...)
			for _, snap := range tt.snapshots {
				if err := s.Apply(context.Background(), snap); err != nil {
					t.Fatal(err)
				}
			}
			if got := s.SourcesReady(); got != tt.want {
				t.Errorf("SourcesReady() = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStoreProblemsPerSource(t *testing.T) {
	s := New()
	ctx := context.Background()
	p1 := podspec.Problem{Source: podspec.SourceFile, Origin: "/m/b.yaml", Line: 3, Reason: "Invalid", Message: "x"}
	p2 := podspec.Problem{Source: podspec.SourceFile, Origin: "/m/a.yaml", Line: 9, Reason: "Invalid", Message: "y"}
	h := podspec.Problem{Source: podspec.SourceHTTP, Origin: "http://x", Reason: "Unreachable", Message: "down"}
	for _, snap := range []podsnapshot.Snapshot{
		{Source: podspec.SourceFile, Problems: []podspec.Problem{p1, p2}},
		{Source: podspec.SourceHTTP, Problems: []podspec.Problem{h}, Failed: true},
	} {
		if err := s.Apply(ctx, snap); err != nil {
			t.Fatal(err)
		}
	}
	got := s.Problems()
	want := []podspec.Problem{p2, p1, h}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Problems() = %v, want %v", got, want)
	}
	if err := s.Apply(ctx, podsnapshot.Snapshot{Source: podspec.SourceFile}); err != nil {
		t.Fatal(err)
	}
	if got := s.Problems(); len(got) != 1 || got[0] != h {
		t.Errorf("after file fixed, Problems() = %v, want only %v", got, h)
	}
}

// TestStoreApplyHonoursContext checks a source blocked on a slow agent can
// still stop, and that what it could not send is delivered later, in order.
func TestStoreApplyHonoursContext(t *testing.T) {
	s := New()
	var pods []*v1.Pod
	for i := range updatesBuffer + 1 {
		pods = append(pods, testPod(fmt.Sprint("p", i), fmt.Sprint("u", i), "img", "o"))
	}
	ctx := context.Background()
	for i := range updatesBuffer {
		if err := s.Apply(ctx, podsnapshot.Snapshot{Source: podspec.SourceFile, Pods: pods[:i+1]}); err != nil {
			t.Fatal(err)
		}
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := s.Apply(cctx, podsnapshot.Snapshot{Source: podspec.SourceFile, Pods: pods}); err != context.Canceled {
		t.Fatalf("Apply on a full channel with a done context = %v, want context.Canceled", err)
	}
	if n := len(s.Pods()); n != len(pods) {
		t.Errorf("Pods() has %d pods while blocked, want %d", n, len(pods))
	}
	got := drain(s)
	if err := s.Apply(ctx, podsnapshot.Snapshot{Source: podspec.SourceFile, Pods: pods}); err != nil {
		t.Fatal(err)
	}
	got = append(got, drain(s)...)
	if len(got) != len(pods) {
		t.Fatalf("got %d updates, want %d", len(got), len(pods))
	}
	for i, line := range got {
		if want := fmt.Sprintf("ADD file p%d/u%d", i, i); line != want {
			t.Errorf("update %d = %q, want %q", i, line, want)
		}
	}
}

// TestStoreDuplicateUIDAcrossSources checks a UID runs from one source
// only: the file source's copy wins whatever order the sources delivered
// in, the other is refused with a problem naming it, and it takes over,
// as an update rather than a stop and a start, when the file's goes.
func TestStoreDuplicateUIDAcrossSources(t *testing.T) {
	file := testPod("a", "u1", "img:1", "/m/a.yaml")
	web := testPod("web-a", "u1", "img:1", "http://h/pods")
	web.Annotations[podspec.AnnotationSource] = podspec.SourceHTTP
	other := testPod("b", "u2", "img:1", "http://h/pods")
	const refused = "http DuplicateUID web-a /m/a.yaml"
	tests := []struct {
		name     string
		steps    []podsnapshot.Snapshot
		want     [][]string
		problems []string // after each step
	}{
		{"file first", []podsnapshot.Snapshot{
			{Source: podspec.SourceFile, Pods: []*v1.Pod{file}},
			{Source: podspec.SourceHTTP, Pods: []*v1.Pod{web, other}},
			{Source: podspec.SourceFile},
		}, [][]string{
			{"ADD file a/u1"},
			{"ADD http b/u2"},
			{"UPDATE http web-a/u1"},
		}, []string{"", refused, ""}},
		{"http first", []podsnapshot.Snapshot{
			{Source: podspec.SourceHTTP, Pods: []*v1.Pod{web, other}},
			{Source: podspec.SourceFile, Pods: []*v1.Pod{file}},
			{Source: podspec.SourceFile},
		}, [][]string{
			{"ADD http b/u2", "ADD http web-a/u1"},
			{"UPDATE file a/u1"},
			{"UPDATE http web-a/u1"},
		}, []string{"", refused, ""}},
		{"both go", []podsnapshot.Snapshot{
			{Source: podspec.SourceFile, Pods: []*v1.Pod{file}},
			{Source: podspec.SourceHTTP, Pods: []*v1.Pod{web}},
			{Source: podspec.SourceHTTP},
			{Source: podspec.SourceFile},
		}, [][]string{
			{"ADD file a/u1"},
			nil,
			nil,
			{"REMOVE file a/u1"},
		}, []string{"", refused, "", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New()
			for i, snap := range tt.steps {
				if err := s.Apply(context.Background(), snap); err != nil {
					t.Fatal(err)
				}
				if got := strings.Join(drain(s), ", "); got != strings.Join(tt.want[i], ", ") {
					t.Errorf("step %d: got %q, want %q", i, got, strings.Join(tt.want[i], ", "))
				}
				var probs []string
				for _, p := range s.Problems() {
					line := p.Source + " " + p.Reason + " " + p.Name
					if strings.Contains(p.Message, "/m/a.yaml") {
						line += " /m/a.yaml"
					}
					probs = append(probs, line)
				}
				if got := strings.Join(probs, ", "); got != tt.problems[i] {
					t.Errorf("step %d: problems %q, want %q", i, got, tt.problems[i])
				}
			}
		})
	}
}

// TestStoreChanged: every merged snapshot closes the channel Changed
// returned before it, problems alone included.
func TestStoreChanged(t *testing.T) {
	s := New(podspec.SourceFile)
	c := s.Changed()
	if err := s.Apply(context.Background(), podsnapshot.Snapshot{Source: podspec.SourceFile, Problems: []podspec.Problem{{Source: podspec.SourceFile, Reason: podspec.ReasonInvalid}}}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c:
	default:
		t.Fatal("a merge left Changed open")
	}
	select {
	case <-s.Changed():
		t.Fatal("Changed closed with no merge since")
	default:
	}
}

// withHostPort gives p's container a containerPort with hostPort port on
// hostIP ("" for every address).
func withHostPort(p *v1.Pod, port int32, hostIP string) *v1.Pod {
	p.Spec.Containers[0].Ports = []v1.ContainerPort{{ContainerPort: 80, HostPort: port, HostIP: hostIP}}
	return p
}

// TestStoreHostPortClashAcrossSources: a pod of the URL claiming a host
// port a file pod claims is warned of, on the URL's pod, while both run;
// other ports and addresses are no clash, and one source's own clashes
// are its snapshot's to report.
func TestStoreHostPortClashAcrossSources(t *testing.T) {
	web := func(name, uid string, port int32, ip string) *v1.Pod {
		p := withHostPort(testPod(name, uid, "img:1", "http://h/pods"), port, ip)
		p.Annotations[podspec.AnnotationSource] = podspec.SourceHTTP
		return p
	}
	const clash = `http HostPortConflict web-a: hostPort TCP/0.0.0.0/8080 clashes with TCP/0.0.0.0/8080 of pod "a" from /m/a.yaml: both pods run, but only one can hold the port`
	tests := []struct {
		name      string
		file, url []*v1.Pod
		want      []string
	}{
		{"same port", []*v1.Pod{withHostPort(testPod("a", "u1", "img:1", "/m/a.yaml"), 8080, "")}, []*v1.Pod{web("web-a", "u2", 8080, "")}, []string{clash}},
		{"other port", []*v1.Pod{withHostPort(testPod("a", "u1", "img:1", "/m/a.yaml"), 8080, "")}, []*v1.Pod{web("web-a", "u2", 8081, "")}, nil},
		{"other addresses", []*v1.Pod{withHostPort(testPod("a", "u1", "img:1", "/m/a.yaml"), 8080, "127.0.0.1")}, []*v1.Pod{web("web-a", "u2", 8080, "127.0.0.2")}, nil},
		{"one source's own clash is not the store's", nil, []*v1.Pod{web("web-a", "u2", 8080, ""), web("web-b", "u3", 8080, "")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := New()
			ctx := context.Background()
			for _, snap := range []podsnapshot.Snapshot{{Source: podspec.SourceFile, Pods: tt.file}, {Source: podspec.SourceHTTP, Pods: tt.url}} {
				if err := s.Apply(ctx, snap); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			for _, w := range s.Warnings() {
				got = append(got, fmt.Sprintf("%s %s %s: %s", w.Source, w.Reason, w.Name, w.Message))
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("warnings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if ops := drain(s); len(ops) != len(tt.file)+len(tt.url) {
				t.Errorf("emitted %q: every pod runs", ops)
			}
		})
	}
}
