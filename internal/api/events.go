package api

import (
	"fmt"
	"net/http"

	"github.com/berth-agent/berth/internal/podevents"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
		list.Items = append(list.Items, v1.Event{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
			ObjectMeta: metav1.ObjectMeta{
				// The kubelet's event names: the object's name and the
				// first time in hex, unique per pod and event.
				Name:      fmt.Sprintf("%s.%x", pod.Name, e.FirstSeen.UnixNano()),
				Namespace: pod.Namespace,
			},
			InvolvedObject: v1.ObjectReference{
				Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
			},
			Reason:              e.Reason,
			Message:             e.Message,
			Type:                string(e.Type),
			Count:               int32(e.Count),
			FirstTimestamp:      metav1.NewTime(e.FirstSeen),
			LastTimestamp:       metav1.NewTime(e.LastSeen),
			Source:              v1.EventSource{Component: eventSource, Host: pod.Spec.NodeName},
			ReportingController: eventSource,
			ReportingInstance:   pod.Spec.NodeName,
		})
	}
	return list
}
