package api

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/podevents"
)

// eventSource is the component berth's events are reported from, as the
// kubelet reports "kubelet".
const eventSource = "berth"

// podEvents serves the recent events of one pod as a v1.EventList, oldest
// first, the shape `kubectl get events -o json` prints, so tools that read
// events read berth's.
func (api *Server) podEvents(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	pod := api.view.Pod(ns, name)
	if pod == nil {
		http.Error(w, fmt.Sprintf("pod %s/%s not found", ns, name), http.StatusNotFound)
		return
	}
	writeJSON(w, eventList(pod, api.view.Events(pod.UID)))
}

// eventList renders the ring of one pod as v1 events involving it.
func eventList(pod *v1.Pod, events []podevents.Event) v1.EventList {
	list := v1.EventList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "EventList"}, Items: []v1.Event{}}
	for _, e := range events {
		list.Items = append(list.Items, toV1Event(pod.Namespace, pod.Name, pod.UID, pod.Spec.NodeName, e))
	}
	return list
}

// toV1Event renders one event of the pod namespace/name (uid) on node.
func toV1Event(namespace, name string, uid types.UID, node string, e podevents.Event) v1.Event {
	return v1.Event{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta: metav1.ObjectMeta{
			// The kubelet's event names: the object's name and the
			// first time in hex, unique per pod and event.
			Name:      fmt.Sprintf("%s.%x", name, e.FirstSeen.UnixNano()),
			Namespace: namespace,
		},
		InvolvedObject: v1.ObjectReference{
			Kind: "Pod", APIVersion: "v1", Namespace: namespace, Name: name, UID: uid,
		},
		Reason:              e.Reason,
		Message:             e.Message,
		Type:                string(e.Type),
		Count:               int32(e.Count),
		FirstTimestamp:      metav1.NewTime(e.FirstSeen),
		LastTimestamp:       metav1.NewTime(e.LastSeen),
		Source:              v1.EventSource{Component: eventSource, Host: node},
		ReportingController: eventSource,
		ReportingInstance:   node,
	}
}

// eventFilter is the pod=NAMESPACE/NAME parameter of /events: "" is all.
func eventFilter(r *http.Request) (namespace, name string, err error) {
	v := r.URL.Query().Get("pod")
	if v == "" {
		return "", "", nil
	}
	namespace, name, ok := strings.Cut(v, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("pod=%q: want NAMESPACE/NAME", v)
	}
	return namespace, name, nil
}

// events serves every pod's recent events (or one pod's, by name, with
// pod=NAMESPACE/NAME) as a v1.EventList, oldest first, including those an
// earlier run of berth kept; with watch=true, as watch events: the
// current ones as ADDED, then each new event as ADDED and each repeat of
// one (its count bumped) as MODIFIED.
func (api *Server) events(w http.ResponseWriter, r *http.Request) {
	ns, name, err := eventFilter(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	watch, ok := wantsWatch(w, r)
	if !ok {
		return
	}
	selected := func() []v1.Event {
		var out []v1.Event
		nodes := map[types.UID]string{}
		for _, rec := range api.view.AllEvents() {
			if ns == "" || (rec.Namespace == ns && rec.Name == name) {
				node, ok := nodes[rec.UID]
				if !ok {
					node = api.nodeOf(rec)
					nodes[rec.UID] = node
				}
				out = append(out, toV1Event(rec.Namespace, rec.Name, rec.UID, node, rec.Event))
			}
		}
		return out
	}
	if !watch {
		list := v1.EventList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "EventList"}, Items: selected()}
		if list.Items == nil {
			list.Items = []v1.Event{}
		}
		writeJSON(w, list)
		return
	}
	api.watchEvents(w, r, selected)
}

// nodeOf is the node of the pod an event happened to, for its source; ""
// for a pod that is gone (its events kept from an earlier run).
func (api *Server) nodeOf(rec podevents.Record) string {
	if p := api.view.Pod(rec.Namespace, rec.Name); p != nil && p.UID == rec.UID {
		return p.Spec.NodeName
	}
	return ""
}

// watchEvents streams events as /pods' watch streams pods: nothing is
// queued per watch (each wake sends what differs from what it last sent,
// remembered as a count per event name), a client that does not read is
// dropped after writeGrace, and it shares the watches' slots.
func (api *Server) watchEvents(w http.ResponseWriter, r *http.Request, selected func() []v1.Event) {
	select {
	case api.watches <- struct{}{}:
		defer func() { <-api.watches }()
	default:
		http.Error(w, fmt.Sprintf("too many watches are being served (%d at once): close some and retry", cap(api.watches)), http.StatusTooManyRequests)
		return
	}
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Time{}); err != nil {
		api.log.Warn("serving a watch: clear read deadline", "err", err)
	}
	w.Header().Set("Content-Type", "application/json")
	out := &deadlineWriter{w: w, rc: rc, grace: api.writeGrace}
	bw := bufio.NewWriterSize(out, 32<<10)
	enc := json.NewEncoder(bw)
	sent := map[string]int32{} // event name -> count sent
	for {
		changed := api.view.EventsChanged()
		events := selected()
		now := make(map[string]int32, len(events))
		var err error
		for _, e := range events {
			now[e.Name] = e.Count
			count, seen := sent[e.Name]
			switch {
			case !seen:
				err = enc.Encode(watchEvent{Type: watchAdded, Object: e})
			case count != e.Count:
				err = enc.Encode(watchEvent{Type: watchModified, Object: e})
			}
			if err != nil {
				break
			}
		}
		// Events that left the rings are forgotten, not sent as DELETED:
		// as with the API server's events, they expire.
		sent = now
		if err != nil || bw.Flush() != nil {
			api.log.Info("dropping a watch: the client does not read it", "path", r.URL.Path)
			return
		}
		out.Flush()
		select {
		case <-changed:
		case <-r.Context().Done():
			return
		}
	}
}
