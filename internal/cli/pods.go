package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/yaml"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podstatus"
	"github.com/berth-agent/berth/internal/rollback"
)

// now is the clock of AGE columns; tests pin it so golden files hold.
var now = time.Now

// podsOptions are berth pods' flags.
type podsOptions struct {
	client clientFlags
	output *outputFlag
}

func newPodsCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &podsOptions{}
	cmd := &cobra.Command{
		Use:     "pods [NAME...]",
		Aliases: []string{"ps"},
		Short:   "List pods and rejected manifests (alias ps)",
		Long: "Lists the pods berth runs and the manifests it rejected, like kubectl get pods.\n" +
			"NAME is a pod's name (web-node1) or its manifest's (web).",
		Example:           "  berth pods\n  berth ps -n kube-system -o wide\n  berth pods web -o yaml",
		ValidArgsFunction: completePods(&o.client, true),
		RunE: func(cmd *cobra.Command, names []string) error {
			return exit(o.run(names, stdout, stderr))
		},
	}
	o.client.bind(cmd, true)
	o.output = bindOutput(cmd, "output format: wide, json or yaml", "wide", "json", "yaml")
	return cmd
}

func (o *podsOptions) run(names []string, stdout, stderr io.Writer) int {
	if msg := o.output.check(); msg != "" {
		fmt.Fprintf(stderr, "berth pods: %s\n", msg)
		return 2
	}
	cf := clientFlags{socket: o.client.socket, namespace: o.client.ns()}
	output := &o.output.value
	c := newClient(cf.socket)
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	all, err := c.pods(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "berth pods: %v\n", err)
		return 1
	}
	pods := all[:0:0]
	for i := range all {
		if cf.namespace == "" || all[i].Namespace == cf.namespace {
			pods = append(pods, all[i])
		}
	}
	if len(names) > 0 {
		pods = pods[:0]
		for _, name := range names {
			p, err := resolvePod(all, name, cf.namespace)
			if err != nil {
				fmt.Fprintf(stderr, "berth pods: %v\n", err)
				return 1
			}
			pods = append(pods, *p)
		}
	}

	var obj any = &v1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}, Items: pods}
	if len(names) == 1 {
		obj = &pods[0]
	}
	switch *output {
	case "json":
		b, _ := json.MarshalIndent(obj, "", "    ")
		fmt.Fprintf(stdout, "%s\n", b)
		return 0
	case "yaml":
		b, err := yaml.Marshal(obj)
		if err != nil {
			fmt.Fprintf(stderr, "berth pods: %v\n", err)
			return 1
		}
		stdout.Write(b)
		return 0
	}
	if len(pods) == 0 {
		if cf.namespace != "" {
			fmt.Fprintf(stderr, "No pods found in namespace %s.\n", cf.namespace)
		} else {
			fmt.Fprintln(stderr, "No pods found.")
		}
	} else {
		printPodTable(stdout, pods, *output == "wide", now())
	}
	if len(names) == 0 {
		var problems manifestProblems
		if err := c.getJSON(ctx, "/problems", &problems); err != nil {
			fmt.Fprintf(stderr, "berth pods: listing manifest problems: %v\n", err)
			return 0
		}
		printHiddenProblems(stderr, problems.Items, pods, cf.namespace)
	}
	return 0
}

// manifestProblems is the answer of the daemon's /problems.
type manifestProblems struct {
	Items []manifestProblem `json:"items"`
}

// manifestProblem is what the CLI needs of one problem: which pod it
// names, if any, and the whole message (FILE:LINE: FIELD: MESSAGE).
type manifestProblem struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Error     string `json:"error"`
}

// printHiddenProblems lists, after the table, the manifest problems the
// table does not show as a rejected pod of their own: manifests berth could
// not read as far as a name, and broken edits whose pod keeps running its
// last good version, which would otherwise look as if the edit had worked.
func printHiddenProblems(w io.Writer, problems []manifestProblem, pods []v1.Pod, namespace string) {
	rejected := map[string]bool{}
	for i := range pods {
		if pods[i].UID == "" {
			rejected[pods[i].Namespace+"/"+pods[i].Name] = true
		}
	}
	var lines []string
	for _, p := range problems {
		if rejected[p.Namespace+"/"+p.Name] || (namespace != "" && p.Namespace != "" && p.Namespace != namespace) {
			continue
		}
		lines = append(lines, p.Error)
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "\nManifest problems (a pod whose manifest broke keeps running its last good version):")
	for _, l := range lines {
		fmt.Fprintln(w, "  "+l)
	}
}

// printPodTable prints pods the way kubectl get pods does, plus SOURCE
// (file or http). A NAMESPACE column leads when a pod is outside
// "default", since berth lists every namespace at once.
func printPodTable(w io.Writer, pods []v1.Pod, wide bool, at time.Time) {
	withNS := false
	for i := range pods {
		withNS = withNS || pods[i].Namespace != "default"
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	var head []string
	if withNS {
		head = append(head, "NAMESPACE")
	}
	head = append(head, "NAME", "READY", "STATUS", "RESTARTS", "AGE", "SOURCE")
	if wide {
		head = append(head, "IP", "NODE", "MANIFEST")
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	for i := range pods {
		p := &pods[i]
		s := summarize(p)
		restarts := strconv.Itoa(s.restarts)
		if s.restarts != 0 && !s.lastRestart.IsZero() {
			restarts = fmt.Sprintf("%d (%s ago)", s.restarts, since(s.lastRestart, at))
		}
		var row []string
		if withNS {
			row = append(row, p.Namespace)
		}
		row = append(row, p.Name, fmt.Sprintf("%d/%d", s.ready, s.total), s.status, restarts, since(podCreated(p), at), orNone(p.Annotations[podspec.AnnotationSource]))
		if wide {
			row = append(row, orNone(p.Status.PodIP), orNone(p.Spec.NodeName), orNone(p.Annotations[podspec.AnnotationOrigin]))
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	tw.Flush()
}

// podSummary is one row's computed columns.
type podSummary struct {
	status      string
	ready       int
	total       int
	restarts    int
	lastRestart time.Time
}

// summarize computes READY, STATUS and RESTARTS exactly as kubectl's pod
// printer does (printPod), so an operator reads the same words:
// Init:1/2, Init:CrashLoopBackOff, CrashLoopBackOff, ImagePullBackOff,
// ContainerCreating, Completed, Error, NotReady, Terminating. Two berth
// rules come on top: a pod none of whose containers ever ran shows its
// pod-level reason (Invalid, DecodeError, WaitingForPreviousPod, OutOfpods)
// instead of the ContainerCreating its container statuses would suggest,
// and a pod that would show Running or Completed while its manifest is
// broken shows ManifestInvalid, or RolledBack while it runs its last Ready
// version in place of a newer one that failed.
func summarize(pod *v1.Pod) podSummary {
	s := podSummary{total: len(pod.Spec.Containers)}
	s.status = string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		s.status = pod.Status.Reason
	}
	initSpecs := map[string]*v1.Container{}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		initSpecs[c.Name] = c
		if isSidecar(c) {
			s.total++
		}
	}
	prog := s.addInit(pod, initSpecs)
	if !prog.initializing || conditionTrue(pod, v1.PodInitialized) {
		s.restarts, s.lastRestart = prog.sidecarRestarts, prog.sidecarLastRestart
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
func (s *podSummary) addInit(pod *v1.Pod, initSpecs map[string]*v1.Container) initProgress {
	var p initProgress
	for i, c := range pod.Status.InitContainerStatuses {
		s.restarts += int(c.RestartCount)
		later(&s.lastRestart, c.LastTerminationState.Terminated)
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
				s.ready++
			}
			continue
		}
		s.status = initStatus(c, i, len(pod.Spec.InitContainers))
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
func (s *podSummary) addApps(pod *v1.Pod) {
	hasRunning := false
	for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
		c := pod.Status.ContainerStatuses[i]
		s.restarts += int(c.RestartCount)
		later(&s.lastRestart, c.LastTerminationState.Terminated)
		switch t := c.State.Terminated; {
		case c.State.Waiting != nil && c.State.Waiting.Reason != "":
			s.status = c.State.Waiting.Reason
		case t != nil && t.Reason != "":
			s.status = t.Reason
		case t != nil && t.Signal != 0:
			s.status = fmt.Sprintf("Signal:%d", t.Signal)
		case t != nil:
			s.status = fmt.Sprintf("ExitCode:%d", t.ExitCode)
		case c.Ready && c.State.Running != nil:
			hasRunning = true
			s.ready++
		}
	}
	if s.status == "Completed" && hasRunning {
		s.status = "NotReady"
		if conditionTrue(pod, v1.PodReady) {
			s.status = "Running"
		}
	}
}

// applyBerthRules applies berth's rules over printPod's status (see
// summarize), then shows a pod being deleted as Terminating.
func (s *podSummary) applyBerthRules(pod *v1.Pod) {
	if pod.Status.Reason != "" && !anyContainerRan(pod) {
		s.status = pod.Status.Reason
	}
	allWell := s.status == string(v1.PodRunning) || s.status == "Completed" || s.status == string(v1.PodSucceeded)
	switch {
	case allWell && manifestInvalid(pod):
		s.status = statusManifestInvalid
	case allWell && rolledBack(pod):
		s.status = statusRolledBack
	}
	if pod.DeletionTimestamp != nil && pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed {
		s.status = "Terminating"
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
