package api

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/podlogs"
	"github.com/berth-agent/berth/internal/podpath"
)

// logRequestError is a log request berth cannot serve, with the HTTP status
// and the message shown to the operator as is.
type logRequestError struct {
	status int
	msg    string
}

func (e *logRequestError) Error() string { return e.msg }

func badLogRequest(format string, args ...any) error {
	return &logRequestError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// logOptions are the query parameters of /pods/{ns}/{name}/log, named as in
// the Kubernetes API's pod log subresource (container, follow, previous,
// timestamps, tailLines, sinceSeconds, sinceTime).
type logOptions struct {
	container  string
	follow     bool
	previous   bool
	timestamps bool
	tailLines  int       // -1: all
	since      time.Time // zero: from the start
}

// parseLogOptions reads a log request's parameters; now is what
// sinceSeconds counts back from. As the API server's validation says,
// sinceSeconds and sinceTime exclude each other and sinceSeconds is at
// least 1.
func parseLogOptions(r *http.Request, now time.Time) (logOptions, error) {
	q := r.URL.Query()
	o := logOptions{container: q.Get("container"), tailLines: -1}
	for name, dst := range map[string]*bool{"follow": &o.follow, "previous": &o.previous, "timestamps": &o.timestamps} {
		if v := q.Get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return o, badLogRequest("%s=%q: want true or false", name, v)
			}
			*dst = b
		}
	}
	if v := q.Get("tailLines"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return o, badLogRequest("tailLines=%q: want a number of lines, 0 or more", v)
		}
		o.tailLines = n
	}
	secs, at := q.Get("sinceSeconds"), q.Get("sinceTime")
	switch {
	case secs != "" && at != "":
		return o, badLogRequest("sinceSeconds=%q and sinceTime=%q: at most one of them may be given", secs, at)
	case secs != "":
		n, err := strconv.ParseInt(secs, 10, 64)
		// Beyond a century back is all of any log; the bound keeps the
		// subtraction from overflowing.
		if err != nil || n < 1 || n > 100*365*24*3600 {
			return o, badLogRequest("sinceSeconds=%q: want a number of seconds, 1 or more", secs)
		}
		o.since = now.Add(-time.Duration(n) * time.Second)
	case at != "":
		t, err := time.Parse(time.RFC3339, at)
		if err != nil {
			return o, badLogRequest("sinceTime=%q: want an RFC 3339 time such as YYYY-MM-DDThh:mm:ssZ", at)
		}
		o.since = t
	}
	return o, nil
}

// podLog streams a container's log from its CRI log file, following it
// while the container runs when asked. Logs may hold secrets, so they are
// served on the unix socket only (mode 0660), never on the TCP address that
// every local user can reach.
func (api *Server) podLog(w http.ResponseWriter, r *http.Request) {
	if addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); !ok || addr.Network() != "unix" {
		http.Error(w, "container logs are served on berth's unix socket only (--socket); use `berth logs`", http.StatusForbidden)
		return
	}
	select {
	case api.logStreams <- struct{}{}:
		defer func() { <-api.logStreams }()
	default:
		http.Error(w, fmt.Sprintf("too many container logs are being served (%d at once): close some (berth logs -f) and retry", cap(api.logStreams)),
			http.StatusTooManyRequests)
		return
	}
	ns, name := r.PathValue("namespace"), r.PathValue("name")
	opts, err := parseLogOptions(r, api.clock.Now())
	if err != nil {
		writeLogError(w, err)
		return
	}
	pod := api.view.Pod(ns, name)
	if pod == nil {
		http.Error(w, fmt.Sprintf("pod %s/%s not found", ns, name), http.StatusNotFound)
		return
	}
	path, id, err := containerLogFile(api.podLogsDir, pod, opts.container, opts.previous)
	if err != nil {
		writeLogError(w, err)
		return
	}
	// Open once before answering, so a missing file is an error status
	// and not an empty 200.
	if _, err := os.Stat(path); err != nil {
		msg := fmt.Sprintf("log file of container %q in pod %q: %v", containerOrDefault(pod, opts.container), pod.Name, err)
		if errors.Is(err, os.ErrNotExist) {
			msg += " (removed by garbage collection, or berth's --pod-logs-dir differs from where the runtime writes)"
		}
		http.Error(w, msg, http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	uid := pod.UID
	// The server's read and write timeouts would cut a stream that lasts
	// longer than them. The read side only watches for the client going
	// away, so it needs none; the write side gets writeGrace per write, so
	// a client that stops reading is still dropped.
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Time{}); err != nil {
		api.log.Warn("serving container log: clear read deadline", "pod", name, "namespace", ns, "err", err)
	}
	out := &deadlineWriter{w: w, rc: rc, grace: api.writeGrace}
	err = podlogs.Copy(r.Context(), path, out, podlogs.Options{
		TailLines:  opts.tailLines,
		Timestamps: opts.timestamps,
		Since:      opts.since,
		Follow:     opts.follow,
		Done: func() bool {
			p := api.view.Pod(ns, name)
			return p == nil || p.UID != uid || !containerRunning(p, id)
		},
	})
	if err != nil && r.Context().Err() == nil {
		api.log.Warn("serving container log", "pod", name, "namespace", ns, "path", path, "err", err)
	}
}

// deadlineWriter pushes the connection's write deadline forward before each
// write to a log stream, so a stream may last as long as its container
// runs while each write still fails on a client that stopped reading.
type deadlineWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	grace time.Duration
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	if err := d.rc.SetWriteDeadline(time.Now().Add(d.grace)); err != nil {
		return 0, fmt.Errorf("extend write deadline: %w", err)
	}
	return d.w.Write(p)
}

// Flush is what podlogs.Copy calls after each batch, so the follower sees
// it at once.
func (d *deadlineWriter) Flush() {
	if err := d.rc.SetWriteDeadline(time.Now().Add(d.grace)); err == nil {
		_ = d.rc.Flush()
	}
}

func writeLogError(w http.ResponseWriter, err error) {
	var le *logRequestError
	if errors.As(err, &le) {
		http.Error(w, le.msg, le.status)
		return
	}
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

// containerOrDefault is the container a request means: the one named, or
// the pod's only container.
func containerOrDefault(pod *v1.Pod, name string) string {
	if name == "" && len(pod.Spec.Containers) == 1 {
		return pod.Spec.Containers[0].Name
	}
	return name
}

// containerLogFile picks the log file a log request means, by the kubelet's
// rules (validateContainerLogStatus): the running container, else the one
// that last terminated; with previous, the one before the current. It
// returns the file and the runtime container ID it belongs to.
func containerLogFile(logsDir string, pod *v1.Pod, container string, previous bool) (string, string, error) {
	if len(pod.Spec.Containers) == 0 {
		return "", "", badLogRequest("pod %q has no containers: %s", pod.Name, pod.Status.Message)
	}
	var names []string
	for _, c := range append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...) {
		names = append(names, c.Name)
	}
	name := containerOrDefault(pod, container)
	if name == "" {
		return "", "", badLogRequest("a container name must be specified for pod %s, choose one of: [%s]", pod.Name, strings.Join(names, " "))
	}
	var cs *v1.ContainerStatus
	known := false
	for _, n := range names {
		known = known || n == name
	}
	if !known {
		return "", "", badLogRequest("container %s is not valid for pod %s: choose one of: [%s]", name, pod.Name, strings.Join(names, " "))
	}
	for _, list := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range list {
			if list[i].Name == name {
				cs = &list[i]
			}
		}
	}
	if cs == nil {
		if pod.Status.Reason != "" {
			return "", "", badLogRequest("container %q in pod %q has not run: %s: %s", name, pod.Name, pod.Status.Reason, pod.Status.Message)
		}
		return "", "", badLogRequest("container %q in pod %q has not run yet", name, pod.Name)
	}

	last := cs.LastTerminationState.Terminated
	var id string
	switch {
	case previous:
		if last == nil || last.ContainerID == "" {
			return "", "", badLogRequest("previous terminated container %q in pod %q not found", name, pod.Name)
		}
		id = last.ContainerID
	case cs.State.Running != nil || (cs.State.Terminated != nil && cs.State.Terminated.ContainerID != ""):
		id = cs.ContainerID
	case last != nil && last.ContainerID != "":
		id = last.ContainerID
	case cs.State.Waiting != nil:
		switch reason := cs.State.Waiting.Reason; reason {
		case "ErrImagePull":
			return "", "", badLogRequest("container %q in pod %q is waiting to start: image can't be pulled: %s", name, pod.Name, cs.State.Waiting.Message)
		case "ImagePullBackOff":
			return "", "", badLogRequest("container %q in pod %q is waiting to start: trying and failing to pull image: %s", name, pod.Name, cs.State.Waiting.Message)
		default:
			return "", "", badLogRequest("container %q in pod %q is waiting to start: %s", name, pod.Name, reason)
		}
	default:
		return "", "", badLogRequest("container %q in pod %q has no log yet", name, pod.Name)
	}

	// Files are <restartCount>.log. The newest container's is the status'
	// restart count; an older one's is the newest file below it. The
	// pod's fields name the directory: checked never to leave logsDir.
	podDir, err := podpath.LogDir(logsDir, pod.Namespace, pod.Name, string(pod.UID))
	if err != nil {
		return "", "", err
	}
	dir, err := podpath.Within(podDir, name)
	if err != nil {
		return "", "", err
	}
	if id == cs.ContainerID {
		return filepath.Join(dir, strconv.Itoa(int(cs.RestartCount))+".log"), runtimeID(id), nil
	}
	attempt, err := newestAttemptBelow(dir, int(cs.RestartCount))
	if err != nil {
		return "", "", &logRequestError{status: http.StatusNotFound, msg: fmt.Sprintf("log of the previous container %q in pod %q: %v", name, pod.Name, err)}
	}
	return filepath.Join(dir, strconv.Itoa(attempt)+".log"), runtimeID(id), nil
}

// newestAttemptBelow finds the highest N < below with a file N.log in dir.
func newestAttemptBelow(dir string, below int) (int, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	best := -1
	for _, e := range entries {
		n, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".log"))
		if err != nil || !strings.HasSuffix(e.Name(), ".log") || n >= below {
			continue
		}
		best = max(best, n)
	}
	if best < 0 {
		return 0, fmt.Errorf("no log file of an earlier attempt in %s", dir)
	}
	return best, nil
}

// runtimeID strips the "containerd://" style scheme of a v1 container ID.
func runtimeID(id string) string {
	if _, after, ok := strings.Cut(id, "://"); ok {
		return after
	}
	return id
}

// containerRunning reports whether the container with runtime ID id is the
// running one of some container of pod.
func containerRunning(pod *v1.Pod, id string) bool {
	for _, list := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if runtimeID(cs.ContainerID) == id {
				return cs.State.Running != nil
			}
		}
	}
	return false
}
