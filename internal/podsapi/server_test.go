package podsapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	podsv1alpha1 "k8s.io/kubelet/pkg/apis/pods/v1alpha1"

	"github.com/berth-agent/berth/internal/podtest"
)

// fakePods stands in for the sync loop's ManagedPods and Changed.
type fakePods struct {
	mu       sync.Mutex // guards the fields below
	pods     map[types.UID]*v1.Pod
	complete bool
	changed  chan struct{}
}

func newFakePods(pods ...*v1.Pod) *fakePods {
	f := &fakePods{pods: map[types.UID]*v1.Pod{}, complete: true, changed: make(chan struct{})}
	for _, p := range pods {
		f.pods[p.UID] = p
	}
	return f
}

func (f *fakePods) ManagedPods() ([]*v1.Pod, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]*v1.Pod, 0, len(f.pods))
	for _, p := range f.pods {
		out = append(out, p)
	}
	return out, f.complete
}

func (f *fakePods) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

// update changes the pods under the lock and fires Changed.
func (f *fakePods) update(change func(pods map[types.UID]*v1.Pod)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f.pods)
	close(f.changed)
	f.changed = make(chan struct{})
}

func (f *fakePods) set(p *v1.Pod) { f.update(func(m map[types.UID]*v1.Pod) { m[p.UID] = p }) }

// bed is a pods API served on a socket under a temporary root directory,
// with the kubelet module's generated client over it.
type bed struct {
	pods   *fakePods
	socket string
	client podsv1alpha1.PodsClient
}

func newBed(t *testing.T, pods *fakePods, configure ...func(*Server)) *bed {
	t.Helper()
	b := &bed{pods: pods, socket: SocketPath(filepath.Join(t.TempDir(), "root"))}
	srv := New(pods, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	for _, f := range configure {
		f(srv)
	}
	if err := srv.Listen(b.socket); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		if _, err := os.Lstat(b.socket); !os.IsNotExist(err) {
			t.Errorf("the socket is left behind: %v", err)
		}
	})
	b.client = podsv1alpha1.NewPodsClient(dial(t, b.socket))
	return b
}

// dial connects to the socket as a kubelet client would.
func dial(t *testing.T, socket string, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// webPod is a running pod with a restarted container.
func webPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "default", UID: "uid-web",
			Annotations: map[string]string{"kubernetes.io/config.source": "file"}},
		Spec: v1.PodSpec{NodeName: "node1", Containers: []v1.Container{{Name: "web", Image: "busybox:1.36"}}},
		Status: v1.PodStatus{
			Phase:      v1.PodRunning,
			Conditions: []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}},
			PodIP:      "10.88.0.5", PodIPs: []v1.PodIP{{IP: "10.88.0.5"}}, HostIP: "192.0.2.1",
			ContainerStatuses: []v1.ContainerStatus{{
				Name: "web", ContainerID: "containerd://c3", RestartCount: 2, Ready: true,
				State: v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: metav1.NewTime(t0)}},
			}},
		},
	}
}

// newPod is a pod not synced yet: no status.
func newPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "db-node1", Namespace: "kube-system", UID: "uid-db"},
		Spec:       v1.PodSpec{NodeName: "node1", Containers: []v1.Container{{Name: "db", Image: "busybox:1.36"}}},
	}
}

func unmarshal(t *testing.T, data []byte) *v1.Pod {
	t.Helper()
	var p v1.Pod
	if err := p.Unmarshal(data); err != nil {
		t.Fatalf("v1.Pod#Unmarshal: %v", err)
	}
	return &p
}

// TestListAndGet: ListPods returns every pod, sorted by UID, spec and
// status as given, a pod without a status yet as Pending; GetPod returns
// one, and NotFound for a UID berth does not run, as the kubelet answers.
// The socket is root's alone: 0600 in a 0700 directory.
func TestListAndGet(t *testing.T) {
	b := newBed(t, newFakePods(webPod(), newPod()))
	if info, err := os.Lstat(b.socket); err != nil || info.Mode().Type() != os.ModeSocket || info.Mode().Perm() != 0o600 {
		t.Errorf("socket %v %v, want a socket of mode 0600", info.Mode(), err)
	}
	if info, err := os.Lstat(filepath.Dir(b.socket)); err != nil || info.Mode().Perm() != 0o700 || filepath.Base(filepath.Dir(b.socket)) != "pods-api" {
		t.Errorf("socket directory %s: %v %v, want pods-api of mode 0700", filepath.Dir(b.socket), info.Mode(), err)
	}

	resp, err := b.client.ListPods(context.Background(), &podsv1alpha1.ListPodsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []*v1.Pod
	for _, data := range resp.Pods {
		got = append(got, unmarshal(t, data))
	}
	if len(got) != 2 || got[0].UID != "uid-db" || got[1].UID != "uid-web" {
		t.Fatalf("ListPods: %v, want uid-db and uid-web", got)
	}
	if got[0].Status.Phase != v1.PodPending {
		t.Errorf("pod without a status: phase %q, want Pending", got[0].Status.Phase)
	}
	web := got[1]
	if want := webPod(); web.Name != want.Name || web.Namespace != want.Namespace || web.Spec.Containers[0].Image != "busybox:1.36" ||
		web.Annotations["kubernetes.io/config.source"] != "file" || web.Status.Phase != v1.PodRunning || web.Status.PodIP != "10.88.0.5" ||
		len(web.Status.ContainerStatuses) != 1 || web.Status.ContainerStatuses[0].RestartCount != 2 ||
		len(web.Status.Conditions) != 1 || !web.Status.Conditions[0].LastTransitionTime.Equal(&metav1.Time{Time: t0}) {
		t.Errorf("ListPods' web pod: %+v", web)
	}

	tests := []struct {
		uid      string
		wantCode codes.Code
		wantName string
	}{
		{"uid-web", codes.OK, "web-node1"},
		{"uid-db", codes.OK, "db-node1"},
		{"uid-nope", codes.NotFound, ""},
		{"", codes.NotFound, ""},
	}
	for _, tt := range tests {
		resp, err := b.client.GetPod(context.Background(), &podsv1alpha1.GetPodRequest{PodUID: tt.uid})
		if status.Code(err) != tt.wantCode {
			t.Errorf("GetPod(%q): %v, want %v", tt.uid, err, tt.wantCode)
			continue
		}
		if tt.wantCode != codes.OK {
			if !strings.Contains(status.Convert(err).Message(), fmt.Sprintf("pod with UID %s not found", tt.uid)) {
				t.Errorf("GetPod(%q): %v", tt.uid, err)
			}
			continue
		}
		if p := unmarshal(t, resp.Pod); p.Name != tt.wantName || string(p.UID) != tt.uid {
			t.Errorf("GetPod(%q): %s %s", tt.uid, p.Name, p.UID)
		}
	}
}

// TestNotReadyUntilSourcesDelivered: until every source has delivered,
// each call is FailedPrecondition, as the kubelet's before its sources
// are ready.
func TestNotReadyUntilSourcesDelivered(t *testing.T) {
	pods := newFakePods(webPod())
	pods.complete = false
	b := newBed(t, pods)
	ctx := context.Background()
	_, errList := b.client.ListPods(ctx, &podsv1alpha1.ListPodsRequest{})
	_, errGet := b.client.GetPod(ctx, &podsv1alpha1.GetPodRequest{PodUID: "uid-web"})
	var errWatch error
	if w, err := b.client.WatchPods(ctx, &podsv1alpha1.WatchPodsRequest{}); err != nil {
		errWatch = err
	} else {
		_, errWatch = w.Recv()
	}
	for name, err := range map[string]error{"ListPods": errList, "GetPod": errGet, "WatchPods": errWatch} {
		if status.Code(err) != codes.FailedPrecondition {
			t.Errorf("%s before the sources delivered: %v, want FailedPrecondition", name, err)
		}
	}
}

// watch is one open WatchPods stream.
type watch struct {
	t      *testing.T
	stream podsv1alpha1.Pods_WatchPodsClient
}

func (b *bed) watch(t *testing.T, client podsv1alpha1.PodsClient) *watch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := client.WatchPods(ctx, &podsv1alpha1.WatchPodsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	return &watch{t: t, stream: stream}
}

// expect reads the next event and checks its type and pod UID ("" for
// none).
func (w *watch) expect(typ podsv1alpha1.EventType, uid types.UID) *v1.Pod {
	w.t.Helper()
	ev, err := w.stream.Recv()
	if err != nil {
		w.t.Fatalf("watch: %v, want %s of %q", err, typ, uid)
	}
	var p *v1.Pod
	if ev.Pod != nil {
		p = unmarshal(w.t, ev.Pod)
	}
	switch {
	case ev.Type != typ:
		w.t.Fatalf("watch event %s, want %s of %q", ev.Type, typ, uid)
	case uid == "" && p != nil:
		w.t.Fatalf("%s carries pod %s", typ, p.UID)
	case uid != "" && (p == nil || p.UID != uid):
		w.t.Fatalf("%s of %v, want of %q", typ, p, uid)
	}
	return p
}

// TestWatch: every pod as ADDED, then INITIAL_SYNC_COMPLETE, then each
// change: MODIFIED for a new status, nothing for the same one again,
// ADDED for a new pod, DELETED (name, namespace and UID only) for a pod
// gone.
func TestWatch(t *testing.T) {
	b := newBed(t, newFakePods(webPod(), newPod()))
	w := b.watch(t, b.client)
	w.expect(podsv1alpha1.EventType_ADDED, "uid-db")
	w.expect(podsv1alpha1.EventType_ADDED, "uid-web")
	w.expect(podsv1alpha1.EventType_INITIAL_SYNC_COMPLETE, "")

	crashed := webPod()
	crashed.Status.ContainerStatuses[0].RestartCount = 3
	b.pods.set(crashed)
	if p := w.expect(podsv1alpha1.EventType_MODIFIED, "uid-web"); p.Status.ContainerStatuses[0].RestartCount != 3 {
		t.Errorf("MODIFIED restart count %d, want 3", p.Status.ContainerStatuses[0].RestartCount)
	}

	// The same pod again is no event: the next one is the new pod's.
	again := webPod()
	again.Status.ContainerStatuses[0].RestartCount = 3
	b.pods.set(again)
	other := newPod()
	other.Name, other.UID = "cache-node1", "uid-cache"
	b.pods.set(other)
	w.expect(podsv1alpha1.EventType_ADDED, "uid-cache")

	b.pods.update(func(m map[types.UID]*v1.Pod) { delete(m, "uid-web") })
	gone := w.expect(podsv1alpha1.EventType_DELETED, "uid-web")
	if gone.Name != "web-node1" || gone.Namespace != "default" || len(gone.Spec.Containers) != 0 || gone.Status.Phase != "" {
		t.Errorf("DELETED carries %+v, want name, namespace and UID only", gone)
	}
}

// TestWatchLimit: at most maxWatches are served at once; the next one is
// ResourceExhausted, and lists are still answered.
func TestWatchLimit(t *testing.T) {
	b := newBed(t, newFakePods(webPod()), func(s *Server) { s.watches = make(chan struct{}, 2) })
	for range 2 {
		w := b.watch(t, b.client)
		w.expect(podsv1alpha1.EventType_ADDED, "uid-web")
		w.expect(podsv1alpha1.EventType_INITIAL_SYNC_COMPLETE, "")
	}
	third := b.watch(t, b.client)
	if _, err := third.stream.Recv(); status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "too many watches") {
		t.Errorf("third watch: %v, want ResourceExhausted", err)
	}
	if _, err := b.client.ListPods(context.Background(), &podsv1alpha1.ListPodsRequest{}); err != nil {
		t.Errorf("ListPods at the watch limit: %v", err)
	}
}

// TestWatchDropsAClientThatDoesNotRead: a watcher that stops reading
// holds no queue of changes in berth: once a send to it blocks (its
// flow-control window full) for sendGrace it is dropped, and when it
// reads again it gets what was in flight, then ResourceExhausted.
func TestWatchDropsAClientThatDoesNotRead(t *testing.T) {
	dropped := podtest.NewLogSignal("dropping a pods API watch: the client does not read it")
	b := newBed(t, newFakePods(), func(s *Server) {
		s.sendGrace = 50 * time.Millisecond
		s.log = slog.New(dropped)
	})
	// A fixed window (no BDP estimation growing it) that a few pods fill.
	conn := dial(t, b.socket, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	w := b.watch(t, podsv1alpha1.NewPodsClient(conn))
	big := strings.Repeat("x", 256<<10)
	for i := 0; ; i++ {
		p := webPod()
		p.Annotations["big"] = big
		p.Status.Message = fmt.Sprint(i)
		b.pods.set(p)
		select {
		case <-dropped.Seen:
		default:
			if i < 1000 {
				// The watch relists on every change it sees; the next
				// change waits for nothing.
				continue
			}
			<-dropped.Seen
		}
		break
	}
	var err error
	var events int
	for err == nil {
		_, err = w.stream.Recv()
		events++
	}
	if status.Code(err) != codes.ResourceExhausted || !strings.Contains(err.Error(), "left unread") {
		t.Errorf("the dropped watch ended with %v after %d events, want ResourceExhausted", err, events)
	}
}

// TestSendChanges: the events that take a watch from what it sent to the
// pods now, in order: DELETED first, by UID, then ADDED and MODIFIED by
// the pods' order; a send that fails ends the round with its error.
func TestSendChanges(t *testing.T) {
	web, db := webPod(), newPod()
	modified := webPod()
	modified.Status.Phase = v1.PodFailed
	tests := []struct {
		name   string
		before []*v1.Pod
		now    []*v1.Pod
		want   []string
	}{
		{"first round", nil, []*v1.Pod{db, web}, []string{"ADDED uid-db", "ADDED uid-web"}},
		{"nothing changed", []*v1.Pod{db, web}, []*v1.Pod{db, web}, nil},
		{"a status changed", []*v1.Pod{db, web}, []*v1.Pod{db, modified}, []string{"MODIFIED uid-web"}},
		{"a pod replaced", []*v1.Pod{web}, []*v1.Pod{db}, []string{"DELETED uid-web", "ADDED uid-db"}},
		{"every pod gone", []*v1.Pod{db, web}, nil, []string{"DELETED uid-db", "DELETED uid-web"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sent := map[types.UID]watchedPod{}
			if err := sendChanges(func(*podsv1alpha1.WatchPodsEvent) error { return nil }, sent, tt.before); err != nil {
				t.Fatal(err)
			}
			var got []string
			send := func(ev *podsv1alpha1.WatchPodsEvent) error {
				got = append(got, ev.Type.String()+" "+string(unmarshal(t, ev.Pod).UID))
				return nil
			}
			if err := sendChanges(send, sent, tt.now); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("events %v, want %v", got, tt.want)
			}
			if len(sent) != len(tt.now) {
				t.Errorf("the watch remembers %d pods, want %d", len(sent), len(tt.now))
			}
		})
	}
	failed := errors.New("client gone")
	if err := sendChanges(func(*podsv1alpha1.WatchPodsEvent) error { return failed }, map[types.UID]watchedPod{}, []*v1.Pod{web}); !errors.Is(err, failed) {
		t.Errorf("a failed send: %v, want it returned", err)
	}
}

// TestSocketGroup: with --socket-group the socket is 0660 and its
// directory 0750, both of that group, as berth's own --socket.
func TestSocketGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the socket a group")
	}
	const gid = 65534
	socket := SocketPath(filepath.Join(t.TempDir(), "root"))
	srv := New(newFakePods(), Options{SocketGroup: gid})
	if err := srv.Listen(socket); err != nil {
		t.Fatal(err)
	}
	defer srv.listener.Close()
	for path, mode := range map[string]os.FileMode{socket: 0o660, filepath.Dir(socket): 0o750} {
		info, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st := info.Sys().(*syscall.Stat_t); info.Mode().Perm() != mode || st.Gid != gid {
			t.Errorf("%s: mode %v group %d, want %v of group %d", path, info.Mode().Perm(), st.Gid, mode, gid)
		}
	}
}
