package printers

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podstatus"
	"github.com/berth-agent/berth/internal/rollback"
)

// PodTableOptions are the columns of a PodTable.
type PodTableOptions struct {
	// Wide adds IP, NODE and MANIFEST (-o wide).
	Wide bool
	// WithNamespace leads with NAMESPACE, for a list of every namespace.
	WithNamespace bool
	// NoHeaders leaves the header line out.
	NoHeaders bool
	// Events leads with EVENT, what a watch said of the pod
	// (--output-watch-events).
	Events bool
}

// PodTable prints pods the way kubectl get pods does, plus SOURCE (file
// or http): a NAMESPACE column leads when every namespace is listed, an
// EVENT column before it with --output-watch-events. The header comes
// with the first row, so a watch that starts empty still gets one. Its
// caller owns it; it is not safe for concurrent use.
type PodTable struct {
	w  io.Writer
	o  PodTableOptions
	tw *tabwriter.Writer
	// headed is whether the header line is written (or left out).
	headed bool
}

// NewPodTable is a table written to w; nothing is written before the
// first row.
func NewPodTable(w io.Writer, o PodTableOptions) *PodTable {
	return &PodTable{w: w, o: o, tw: tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)}
}

// Row adds pod p, with event in the EVENT column; its ages are as of at.
func (t *PodTable) Row(event string, p *v1.Pod, at time.Time) {
	if !t.headed && !t.o.NoHeaders {
		var head []string
		if t.o.Events {
			head = append(head, "EVENT")
		}
		if t.o.WithNamespace {
			head = append(head, "NAMESPACE")
		}
		head = append(head, "NAME", "READY", "STATUS", "RESTARTS", "AGE", "SOURCE")
		if t.o.Wide {
			head = append(head, "IP", "NODE", "MANIFEST")
		}
		fmt.Fprintln(t.tw, strings.Join(head, "\t"))
	}
	t.headed = true
	s := Summarize(p)
	restarts := strconv.Itoa(s.Restarts)
	if s.Restarts != 0 && !s.LastRestart.IsZero() {
		restarts = fmt.Sprintf("%d (%s ago)", s.Restarts, since(s.LastRestart, at))
	}
	var row []string
	if t.o.Events {
		row = append(row, event)
	}
	if t.o.WithNamespace {
		row = append(row, p.Namespace)
	}
	row = append(row, p.Name, fmt.Sprintf("%d/%d", s.Ready, s.Total), s.Status, restarts, since(podCreated(p), at), orNone(p.Annotations[podspec.AnnotationSource]))
	if t.o.Wide {
		row = append(row, orNone(p.Status.PodIP), orNone(p.Spec.NodeName), orNone(p.Annotations[podspec.AnnotationOrigin]))
	}
	fmt.Fprintln(t.tw, strings.Join(row, "\t"))
}

// Flush writes the rows so far: a watch flushes each row as it comes,
// so its columns line up only with the rows flushed together.
func (t *PodTable) Flush() {
	t.tw.Flush()
}

// PodSummary is one row's computed columns.
type PodSummary struct {
	// Status is the STATUS column.
	Status string
	// Ready and Total make the READY column.
	Ready, Total int
	// Restarts is the RESTARTS column, counted since LastRestart when
	// that is known.
	Restarts    int
	LastRestart time.Time
}

// Summarize computes READY, STATUS and RESTARTS exactly as kubectl's pod
// printer does (printPod), so an operator reads the same words:
// Init:1/2, Init:CrashLoopBackOff, CrashLoopBackOff, ImagePullBackOff,
// ContainerCreating, Completed, Error, NotReady, Terminating. Two berth
// rules come on top: a pod none of whose containers ever ran shows its
// pod-level reason (Invalid, DecodeError, WaitingForPreviousPod, OutOfpods)
// instead of the ContainerCreating its container statuses would suggest,
// and a pod that would show Running or Completed while its manifest is
// broken shows ManifestInvalid, or RolledBack while it runs its last Ready
// version in place of a newer one that failed.
func Summarize(pod *v1.Pod) PodSummary {
	s := PodSummary{Total: len(pod.Spec.Containers)}
	s.Status = string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		s.Status = pod.Status.Reason
	}
	initSpecs := map[string]*v1.Container{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		initSpecs[c.Name] = c
		if isSidecar(c) {
			s.Total++
		}
	}
	prog := s.addInit(pod, initSpecs)
	if !prog.initializing || conditionTrue(pod, v1.PodInitialized) {
		s.Restarts, s.LastRestart = prog.sidecarRestarts, prog.sidecarLastRestart
		s.addApps(pod)
	}
	s.applyBerthRules(pod)
	return s
}

// initProgress is what the init containers' statuses say of a pod: whether
// it is still initializing, and its sidecars' restarts.
type initProgress struct {
	initializing       bool
	sidecarRestarts    int
	sidecarLastRestart time.Time
}

// addInit counts the init containers' restarts and ready sidecars, and
// sets the status of a pod still initializing, as printPod does.
func (s *PodSummary) addInit(pod *v1.Pod, initSpecs map[string]*v1.Container) initProgress {
	var p initProgress
	for i, c := range pod.Status.InitContainerStatuses {
		s.Restarts += int(c.RestartCount)
		later(&s.LastRestart, c.LastTerminationState.Terminated)
		sidecar := isSidecar(initSpecs[c.Name])
		if sidecar {
			p.sidecarRestarts += int(c.RestartCount)
			later(&p.sidecarLastRestart, c.LastTerminationState.Terminated)
		}
		switch {
		case c.State.Terminated != nil && c.State.Terminated.ExitCode == 0:
			continue
		case sidecar && c.Started != nil && *c.Started:
			if c.Ready {
				s.Ready++
			}
			continue
		}
		s.Status = initStatus(c, i, len(pod.Spec.InitContainers))
		p.initializing = true
		return p
	}
	return p
}

// initStatus is the status of a pod whose init container c, the i-th of
// n, holds initialization up.
func initStatus(c v1.ContainerStatus, i, n int) string {
	switch {
	case c.State.Terminated != nil:
		switch t := c.State.Terminated; {
		case t.Reason != "":
			return "Init:" + t.Reason
		case t.Signal != 0:
			return fmt.Sprintf("Init:Signal:%d", t.Signal)
		default:
			return fmt.Sprintf("Init:ExitCode:%d", t.ExitCode)
		}
	case c.State.Waiting != nil && c.State.Waiting.Reason != "" && c.State.Waiting.Reason != "PodInitializing":
		return "Init:" + c.State.Waiting.Reason
	default:
		return fmt.Sprintf("Init:%d/%d", i, n)
	}
}

// addApps counts the app containers' restarts and ready ones, and sets
// the status their states give, as printPod does.
func (s *PodSummary) addApps(pod *v1.Pod) {
	hasRunning := false
	for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
		c := pod.Status.ContainerStatuses[i]
		s.Restarts += int(c.RestartCount)
		later(&s.LastRestart, c.LastTerminationState.Terminated)
		switch t := c.State.Terminated; {
		case c.State.Waiting != nil && c.State.Waiting.Reason != "":
			s.Status = c.State.Waiting.Reason
		case t != nil && t.Reason != "":
			s.Status = t.Reason
		case t != nil && t.Signal != 0:
			s.Status = fmt.Sprintf("Signal:%d", t.Signal)
		case t != nil:
			s.Status = fmt.Sprintf("ExitCode:%d", t.ExitCode)
		case c.Ready && c.State.Running != nil:
			hasRunning = true
			s.Ready++
		}
	}
	if s.Status == "Completed" && hasRunning {
		s.Status = "NotReady"
		if conditionTrue(pod, v1.PodReady) {
			s.Status = "Running"
		}
	}
}

// applyBerthRules applies berth's rules over printPod's status (see
// Summarize), then shows a pod being deleted as Terminating.
func (s *PodSummary) applyBerthRules(pod *v1.Pod) {
	if pod.Status.Reason != "" && !anyContainerRan(pod) {
		s.Status = pod.Status.Reason
	}
	allWell := s.Status == string(v1.PodRunning) || s.Status == "Completed" || s.Status == string(v1.PodSucceeded)
	switch {
	case allWell && manifestInvalid(pod):
		s.Status = statusManifestInvalid
	case allWell && rolledBack(pod):
		s.Status = statusRolledBack
	}
	if pod.DeletionTimestamp != nil && pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed {
		s.Status = "Terminating"
	}
}

// later moves t to when st finished, if that is later.
func later(t *time.Time, st *v1.ContainerStateTerminated) {
	if st != nil && st.FinishedAt.Time.After(*t) {
		*t = st.FinishedAt.Time
	}
}

// conditionManifestValid is the daemon's podstatus.ConditionManifestValid: False
// while the pod's manifest is broken and its last good version runs.
const conditionManifestValid = podstatus.ConditionManifestValid

// statusManifestInvalid is the STATUS of a pod that runs fine on its last
// good version while its manifest is broken. kubectl shows one CamelCase
// word, the most pressing thing about the pod; a broken edit that did not
// take effect is more pressing than "Running" (which would suggest the edit
// worked), and less than what a container says is wrong (CrashLoopBackOff,
// Error, Init:...), which keeps its word, as does Terminating. READY and
// RESTARTS stay what they are; `berth describe` gives the file:line.
const statusManifestInvalid = "ManifestInvalid"

// manifestInvalid reports berth.io/ManifestValid False. A pod refused
// outright carries it too, but shows its own reason (Invalid...) already.
func manifestInvalid(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == conditionManifestValid {
			return c.Status == v1.ConditionFalse
		}
	}
	return false
}

// statusRolledBack is the STATUS of a pod that runs fine on its last Ready
// version because the newer one its source serves failed (agent's
// rollback): as with ManifestInvalid, "Running" would suggest the edit took
// effect. A broken manifest is more pressing: it shows first.
const statusRolledBack = rollback.ReasonRolledBack

// rolledBack reports rollback.ConditionLatestVersion False.
func rolledBack(pod *v1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == rollback.ConditionLatestVersion {
			return c.Status == v1.ConditionFalse
		}
	}
	return false
}

func isSidecar(c *v1.Container) bool {
	return c != nil && c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

func conditionTrue(pod *v1.Pod, typ v1.PodConditionType) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == typ {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

func anyContainerRan(pod *v1.Pod) bool {
	for _, list := range [][]v1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, c := range list {
			if c.ContainerID != "" {
				return true
			}
		}
	}
	return false
}

// podCreated is when the pod came to be: its creationTimestamp, else when
// berth first saw its manifest (kubernetes.io/config.seen), else its start.
func podCreated(pod *v1.Pod) time.Time {
	if !pod.CreationTimestamp.IsZero() {
		return pod.CreationTimestamp.Time
	}
	if t, err := time.Parse(time.RFC3339Nano, pod.Annotations[podspec.AnnotationSeen]); err == nil {
		return t
	}
	if pod.Status.StartTime != nil {
		return pod.Status.StartTime.Time
	}
	return time.Time{}
}

// since renders an age as kubectl does (45s, 3m12s, 5h, 2d3h), "<unknown>"
// for a zero time.
func since(t, at time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	return duration.HumanDuration(at.Sub(t))
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}
