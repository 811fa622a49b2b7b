package api

import (
	"bufio"
	"encoding/json"
	"fmt"
	"hash"
	"hash/fnv"
	"net/http"
	"slices"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Watch event types, as the API server's watch sends them.
const (
	watchAdded    = "ADDED"
	watchModified = "MODIFIED"
	watchDeleted  = "DELETED"
)

// watchEvent is one line of a watch: the API server's watch event
// (`GET /api/v1/pods?watch=true`), newline-delimited JSON.
type watchEvent struct {
	Type   string `json:"type"`
	Object any    `json:"object"`
}

// maxWatches bounds the watches served at once: each holds a connection,
// a goroutine and a hash per pod, and relists on every change.
const maxWatches = 16

// wantsWatch reads the watch query parameter; a bad value is a 400.
func wantsWatch(w http.ResponseWriter, r *http.Request) (watch, ok bool) {
	v := r.URL.Query().Get("watch")
	if v == "" {
		return false, true
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		http.Error(w, fmt.Sprintf("watch=%q: want true or false", v), http.StatusBadRequest)
		return false, false
	}
	return b, true
}

// watchedPod is what a watch remembers of a pod it sent: the hash of its
// encoding, to tell a change, and its identity, for its DELETED event.
type watchedPod struct {
	sum                  [16]byte
	name, namespace, uid string
}

// watchKey tells pods apart across relists: the UID, or for a refused
// manifest (which has none) its namespace and name.
func watchKey(p *v1.Pod) string {
	if p.UID != "" {
		return string(p.UID)
	}
	return p.Namespace + "/" + p.Name
}

// watch streams the pods list returns as watch events: each as ADDED
// first, then, each time the view says they changed, a DELETED, ADDED or
// MODIFIED for every pod that differs from what this watch last sent. It
// has no resourceVersion: every watch begins with the current pods.
//
// Nothing is queued per watch: a change while the client is slow is
// folded into the next relist, so a watch holds one pod's encoding and a
// hash per pod, whatever happens. A client that does not take a write
// within writeGrace is dropped, like a log follower.
func (api *Server) watch(w http.ResponseWriter, r *http.Request, list func() []*v1.Pod) {
	select {
	case api.watches <- struct{}{}:
		defer func() { <-api.watches }()
	default:
		http.Error(w, fmt.Sprintf("too many watches are being served (%d at once): close some and retry", cap(api.watches)), http.StatusTooManyRequests)
		return
	}
	redact := overTCP(r) && api.exposure == ExposeRedacted
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Time{}); err != nil {
		api.log.Warn("serving a watch: clear read deadline", "err", err)
	}
	w.Header().Set("Content-Type", "application/json")
	out := &deadlineWriter{w: w, rc: rc, grace: api.writeGrace}
	bw := bufio.NewWriterSize(out, 32<<10)
	enc := json.NewEncoder(bw)
	sent := map[string]watchedPod{}
	h := fnv.New128a()
	for {
		changed := api.view.Changed()
		var pods []*v1.Pod
		select {
		case api.podsBuilds <- struct{}{}:
			pods = list()
			<-api.podsBuilds
		case <-r.Context().Done():
			return
		}
		if err := sendChanges(enc, h, sent, pods, redact); err != nil || bw.Flush() != nil {
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

// sendChanges writes the events that take a watch from sent to pods, and
// updates sent: DELETED first (a replacement under the same name then
// follows its predecessor), then ADDED and MODIFIED in the list's order.
func sendChanges(enc *json.Encoder, h hash.Hash, sent map[string]watchedPod, pods []*v1.Pod, redact bool) error {
	now := make(map[string]bool, len(pods))
	for _, p := range pods {
		now[watchKey(p)] = true
	}
	var gone []string
	for k := range sent {
		if !now[k] {
			gone = append(gone, k)
		}
	}
	slices.Sort(gone)
	for _, k := range gone {
		old := sent[k]
		delete(sent, k)
		stub := &v1.Pod{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
			ObjectMeta: metav1.ObjectMeta{Name: old.name, Namespace: old.namespace, UID: types.UID(old.uid)},
		}
		if err := enc.Encode(watchEvent{Type: watchDeleted, Object: stub}); err != nil {
			return err
		}
	}
	for _, p := range pods {
		if redact {
			p = redactPod(p)
		}
		data, err := json.Marshal(p)
		if err != nil {
			return err
		}
		h.Reset()
		h.Write(data)
		var sum [16]byte
		copy(sum[:], h.Sum(nil))
		k := watchKey(p)
		old, seen := sent[k]
		if seen && old.sum == sum {
			continue
		}
		sent[k] = watchedPod{sum: sum, name: p.Name, namespace: p.Namespace, uid: string(p.UID)}
		typ := watchAdded
		if seen {
			typ = watchModified
		}
		if err := enc.Encode(watchEvent{Type: typ, Object: json.RawMessage(data)}); err != nil {
			return err
		}
	}
	return nil
}
