package api

import (
	"bufio"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/podtest"
)

// watchStream is one open watch, read event by event.
type watchStream struct {
	t    *testing.T
	resp *http.Response
	sc   *bufio.Scanner
}

// openWatch starts a watch of path over the socket (or TCP).
func (b *apiBed) openWatch(t *testing.T, path string, overTCP bool) *watchStream {
	t.Helper()
	client, base := b.unix, "http://berth"
	if overTCP {
		client, base = http.DefaultClient, "http://"+b.tcp
	}
	resp, err := client.Get(base + path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	return &watchStream{t: t, resp: resp, sc: sc}
}

// next reads the next event: its type, the pod, and the line as sent.
func (w *watchStream) next() (string, *v1.Pod, string) {
	w.t.Helper()
	if !w.sc.Scan() {
		w.t.Fatalf("watch ended: %v", w.sc.Err())
	}
	var ev struct {
		Type   string  `json:"type"`
		Object *v1.Pod `json:"object"`
	}
	if err := json.Unmarshal(w.sc.Bytes(), &ev); err != nil {
		w.t.Fatalf("watch event %q: %v", w.sc.Text(), err)
	}
	return ev.Type, ev.Object, w.sc.Text()
}

// expect reads the next event and checks its type and pod name.
func (w *watchStream) expect(typ, name string) *v1.Pod {
	w.t.Helper()
	gotType, pod, line := w.next()
	if gotType != typ || pod == nil || pod.Name != name || pod.Kind != "Pod" {
		w.t.Fatalf("watch event %.300s, want %s of %s", line, typ, name)
	}
	return pod
}

// TestAPIWatchPods: a watch of /pods sends every pod (the refused manifest
// too) as ADDED, then each change as the daemon makes it: MODIFIED for a
// new status, ADDED for a new pod, DELETED for a pod gone; a status set
// again unchanged sends nothing. A watch of one pod sends only that pod's.
func TestAPIWatchPods(t *testing.T) {
	b := newAPIBed(t)
	web, st := webPod()
	b.pods.status.Set(web, st)
	all := b.openWatch(t, "/pods?watch=true", false)
	one := b.openWatch(t, "/pods/default/web-node1?watch=1", false)
	all.expect(watchAdded, "bad-node1")
	all.expect(watchAdded, "web-node1")
	one.expect(watchAdded, "web-node1")

	failed := *st.DeepCopy()
	failed.Phase = v1.PodFailed
	b.pods.status.Set(web, failed)
	if p := all.expect(watchModified, "web-node1"); p.Status.Phase != v1.PodFailed {
		t.Errorf("MODIFIED phase %s, want Failed", p.Status.Phase)
	}
	if p := one.expect(watchModified, "web-node1"); p.Status.Phase != v1.PodFailed {
		t.Errorf("one pod's watch: MODIFIED phase %s, want Failed", p.Status.Phase)
	}

	// The same status again is no event: the next one is the new pod's.
	b.pods.status.Set(web, *failed.DeepCopy())
	two, twoSt := twoPod()
	b.pods.status.Set(two, twoSt)
	all.expect(watchAdded, "two-node1")

	b.pods.status.Delete(web.UID)
	if p := all.expect(watchDeleted, "web-node1"); p.UID != web.UID || p.Namespace != "default" {
		t.Errorf("DELETED %s/%s %s, want default/web-node1 %s", p.Namespace, p.Name, p.UID, web.UID)
	}
	// The one-pod watch saw nothing of two-node1: its next is the delete.
	one.expect(watchDeleted, "web-node1")
}

// TestAPIWatchExposure: a watch over TCP obeys --listen-pods as /pods
// does: refused under none, redacted pods under redacted; on the socket
// it shows everything. A bad watch value is a 400 naming it.
func TestAPIWatchExposure(t *testing.T) {
	b := newAPIBed(t, func(api *Server) { api.exposure = ExposeRedacted })
	pod, st := secretPod()
	b.pods.status.Set(pod, st)
	tcp := b.openWatch(t, "/pods?watch=true", true)
	tcp.expect(watchAdded, "bad-node1")
	if _, _, line := tcp.next(); strings.Contains(line, "SECRET") || !strings.Contains(line, `"DB_PASSWORD"`) {
		t.Errorf("TCP watch under redacted: %s", line)
	}
	sock := b.openWatch(t, "/pods/default/web-node1?watch=true", false)
	if _, _, line := sock.next(); !strings.Contains(line, "SECRET") {
		t.Errorf("socket watch redacted: %s", line)
	}
	if code, body := b.get(t, "/pods?watch=maybe", false); code != http.StatusBadRequest || !strings.Contains(body, `watch="maybe"`) {
		t.Errorf("watch=maybe: %d %s", code, body)
	}

	none := newAPIBed(t)
	for _, p := range []string{"/pods?watch=true", "/pods/default/bad-node1?watch=true"} {
		if code, body := none.get(t, p, true); code != http.StatusForbidden || !strings.Contains(body, "unix socket only") {
			t.Errorf("TCP %s under none: %d %s", p, code, body)
		}
	}
}

// TestAPIWatchDropsAClientThatDoesNotRead: a watcher that stops reading
// holds no queue of changes in berth: once a write to it blocks for
// writeGrace it is dropped, its connection closed and its watch slot
// given back.
func TestAPIWatchDropsAClientThatDoesNotRead(t *testing.T) {
	dropped := podtest.NewLogSignal("dropping a watch: the client does not read it")
	b := newAPIBed(t, func(api *Server) {
		api.writeGrace = 50 * time.Millisecond
		api.log = slog.New(dropped)
	})
	conn, err := net.Dial("unix", b.socket)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET /pods?watch=true HTTP/1.1\r\nHost: berth\r\n\r\n")
	// Pods large enough that their changes fill the socket's buffers.
	big := strings.Repeat("x", 256<<10)
	pod, st := webPod()
	pod.Annotations = map[string]string{"big": big}
	for i := 0; ; i++ {
		st := *st.DeepCopy()
		st.Message = fmt.Sprint(i)
		b.pods.status.Set(pod, st)
		select {
		case <-dropped.Seen:
		default:
			if i < 1000 {
				// The watcher relists on every change it sees; the
				// next change waits for nothing.
				continue
			}
			<-dropped.Seen
		}
		break
	}
	// Whatever was in flight, then the end: the connection is closed.
	if _, err := bufio.NewReader(conn).Discard(1 << 30); err == nil {
		t.Error("the dropped watcher's connection stays open")
	}
}

// TestAPIAllEvents: /events lists every pod's events, oldest first, as a
// v1.EventList, pod=NAMESPACE/NAME picks one pod's, a bad pod value is a
// 400, and a watch sends the current events as ADDED, then a new event as
// ADDED and a repeat (its count bumped) as MODIFIED; only the filtered
// pod's. Over TCP it needs --listen-pods=full, as events do.
func TestAPIAllEvents(t *testing.T) {
	b := newAPIBed(t)
	web, st := webPod()
	b.pods.status.Set(web, st)
	ev := b.pods.events
	ev.Event(web.UID, web.Name, web.Namespace, kuberuntime.EventNormal, "Pulled", "pulled")
	b.clock.Step(time.Second)
	ev.Event("uid-gone", "gone-node1", "kube-system", kuberuntime.EventWarning, "BackOff", "back-off")

	code, body := b.get(t, "/events", false)
	var list v1.EventList
	if code != 200 || json.Unmarshal([]byte(body), &list) != nil || list.Kind != "EventList" || len(list.Items) != 2 {
		t.Fatalf("/events: %d %s", code, body)
	}
	if e := list.Items[0]; e.InvolvedObject.Name != "web-node1" || e.Reason != "Pulled" || e.Source.Host != "node1" || e.Kind != "Event" {
		t.Errorf("first event %+v", e)
	}
	if e := list.Items[1]; e.InvolvedObject.Name != "gone-node1" || e.InvolvedObject.Namespace != "kube-system" || e.InvolvedObject.UID != "uid-gone" {
		t.Errorf("event of a pod that is gone %+v", e)
	}
	code, body = b.get(t, "/events?pod=kube-system/gone-node1", false)
	if code != 200 || json.Unmarshal([]byte(body), &list) != nil || len(list.Items) != 1 || list.Items[0].Reason != "BackOff" {
		t.Errorf("/events?pod=kube-system/gone-node1: %d %s", code, body)
	}
	if code, body := b.get(t, "/events?pod=nope", false); code != http.StatusBadRequest || !strings.Contains(body, "want NAMESPACE/NAME") {
		t.Errorf("/events?pod=nope: %d %s", code, body)
	}
	if code, body := b.get(t, "/events?pod=default/nope", false); code != 200 || !strings.Contains(body, `"items": []`) {
		t.Errorf("/events of a pod without events: %d %s", code, body)
	}
	if code, _ := b.get(t, "/events", true); code != http.StatusForbidden {
		t.Errorf("TCP /events under none: %d", code)
	}

	all := b.openWatch(t, "/events?watch=true", false)
	one := b.openWatch(t, "/events?watch=true&pod=default/web-node1", false)
	for _, w := range []*watchStream{all, one} {
		if typ, line := nextEvent(t, w); typ != watchAdded || !strings.Contains(line, `"reason":"Pulled"`) {
			t.Fatalf("first: %s %s", typ, line)
		}
	}
	if typ, line := nextEvent(t, all); typ != watchAdded || !strings.Contains(line, `"reason":"BackOff"`) {
		t.Fatalf("second: %s %s", typ, line)
	}
	b.clock.Step(time.Second)
	ev.Event("uid-gone", "gone-node1", "kube-system", kuberuntime.EventWarning, "BackOff", "back-off")
	if typ, line := nextEvent(t, all); typ != watchModified || !strings.Contains(line, `"count":2`) {
		t.Fatalf("repeat: %s %s", typ, line)
	}
	ev.Event(web.UID, web.Name, web.Namespace, kuberuntime.EventNormal, "Started", "started")
	for _, w := range []*watchStream{all, one} {
		if typ, line := nextEvent(t, w); typ != watchAdded || !strings.Contains(line, `"reason":"Started"`) {
			t.Fatalf("new: %s %s", typ, line)
		}
	}
}

// nextEvent reads the next line of an events watch.
func nextEvent(t *testing.T, w *watchStream) (string, string) {
	t.Helper()
	if !w.sc.Scan() {
		t.Fatalf("watch ended: %v", w.sc.Err())
	}
	var ev struct {
		Type   string   `json:"type"`
		Object v1.Event `json:"object"`
	}
	if err := json.Unmarshal(w.sc.Bytes(), &ev); err != nil || ev.Object.Kind != "Event" {
		t.Fatalf("watch event %q: %v", w.sc.Text(), err)
	}
	return ev.Type, w.sc.Text()
}
