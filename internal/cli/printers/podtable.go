package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podstatus"
	"github.com/berth-agent/berth/internal/rollback"
)

// now is the clock of AGE columns; tests pin it so golden files hold.
var now = time.Now

// podsOptions are berth pods' flags.
type podsOptions struct {
	client      clientFlags
	output      *outputFlag
	selector    string
	noHeaders   bool
	watch       bool
	watchEvents bool
}

func newPodsCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &podsOptions{}
	cmd := &cobra.Command{
		Use:     "pods [NAME...]",
		Aliases: []string{"ps"},
		Short:   "List pods and rejected manifests (alias ps)",
		Long: "Lists the pods berth runs and the manifests it rejected, like kubectl get pods.\n" +
			"NAME is a pod's name (web-node1) or its manifest's (web), found in any namespace\n" +
			"unless -n is given. As kubectl get: the namespace listed is -n's, else default;\n" +
			"-A lists every one, with a NAMESPACE column. Manifest problems that no row shows\n" +
			"are warnings on stderr, and the \"problems\" list of -o json and yaml.\n" +
			"-w prints the pods again as the daemon reports them changing.",
		Example:           "  berth pods -A\n  berth ps -n kube-system -o wide\n  berth pods -l app=web -o name\n  berth pods web -o yaml\n  berth pods -o jsonpath='{.items[*].status.podIP}'\n  berth pods -w",
		ValidArgsFunction: completePods(&o.client, true),
		RunE: func(cmd *cobra.Command, names []string) error {
			return exit(o.run(names, stdout, stderr))
		},
	}
	o.client.bind(cmd, listsPods)
	o.output = bindOutput(cmd, "output format: wide, json, yaml, name, jsonpath=TEMPLATE or jsonpath-file=FILE",
		append([]string{"wide"}, documentFormats...)...)
	fs := cmd.Flags()
	fs.StringVarP(&o.selector, "selector", "l", "", "label selector (app=web, tier in (edge,db), !canary): only the pods it matches")
	fs.BoolVar(&o.noHeaders, "no-headers", false, "print the table without its header line")
	fs.BoolVarP(&o.watch, "watch", "w", false, "after the list, print each change the daemon reports, until interrupted")
	fs.BoolVar(&o.watchEvents, "output-watch-events", false, "with -w, say what happened to each pod (ADDED, MODIFIED, DELETED)")
	_ = cmd.RegisterFlagCompletionFunc("selector", completeLabels(&o.client))
	return cmd
}

// podListDoc is what -o json and yaml print for a list: a v1 List, as
// kubectl get prints, whose "problems" are the daemon's manifest problems
// of the namespaces listed (.problems[].error is FILE:LINE: FIELD:
// MESSAGE); a manifest berth refused also shows as an item.
type podListDoc struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Metadata   metav1.ListMeta   `json:"metadata"`
	Items      []v1.Pod          `json:"items"`
	Problems   []manifestProblem `json:"problems"`
}

func (o *podsOptions) run(names []string, stdout, stderr io.Writer) int {
	fail := func(code int, format string, args ...any) int {
		fmt.Fprintf(stderr, "berth pods: "+format+"\n", args...)
		return code
	}
	if msg := o.output.check(); msg != "" {
		return fail(2, "%s", msg)
	}
	sel, err := labels.Parse(o.selector)
	if err != nil {
		return fail(2, "-l %q: %v", o.selector, err)
	}
	if len(names) > 0 && o.selector != "" {
		return fail(2, "give pod names or -l, not both")
	}
	var pr *printer
	if !o.output.table() {
		if pr, err = o.output.printer(); err != nil {
			return fail(2, "%v", err)
		}
	}
	ns := o.client.listNS()
	// Ctrl-C ends a watch cleanly, without an error message.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c := newClient(o.client.socket)
	listCtx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	all, err := c.pods(listCtx)
	if err != nil {
		return fail(1, "%v", err)
	}
	// want tells the pods the command shows: of the namespace, matching
	// the selector, or the ones named.
	want := func(p *v1.Pod) bool {
		return (ns == "" || p.Namespace == ns) && sel.Matches(labels.Set(p.Labels))
	}
	if len(names) > 0 {
		named := map[string]bool{}
		for _, name := range names {
			p, err := resolvePod(all, podArg(name), o.client.ns())
			if err != nil {
				return fail(1, "%v", err)
			}
			named[p.Namespace+"/"+p.Name] = true
		}
		want = func(p *v1.Pod) bool { return named[p.Namespace+"/"+p.Name] }
	}
	var pods []v1.Pod
	for i := range all {
		if want(&all[i]) {
			pods = append(pods, *withTypeMeta(&all[i]))
		}
	}
	var list manifestProblems
	if err := c.getJSON(listCtx, "/problems", &list); err != nil {
		fmt.Fprintf(stderr, "berth pods: listing manifest problems: %v\n", err)
	}
	problems := problemsOf(list.Items, ns, pods, len(names) > 0 || !sel.Empty())
	t := &podTable{w: stdout, wide: o.output.value == "wide", withNS: o.client.allNamespaces, noHeaders: o.noHeaders, events: o.watch && o.watchEvents, at: now()}
	switch {
	case pr != nil && o.watch:
		// As kubectl get -w: each object on its own, the list's first.
		for i := range pods {
			if err := o.printEvent(pr, stdout, "ADDED", &pods[i]); err != nil {
				return fail(1, "%v", err)
			}
		}
	case pr != nil:
		var obj any = &podListDoc{APIVersion: "v1", Kind: "List", Items: orEmpty(pods), Problems: orEmpty(problems)}
		var podNames []string
		for i := range pods {
			podNames = append(podNames, "pod/"+pods[i].Name)
		}
		if len(names) == 1 {
			obj = &pods[0]
		}
		if err := pr.print(stdout, obj, podNames); err != nil {
			return fail(1, "%v", err)
		}
	case len(pods) == 0 && !o.watch:
		noneFound(stderr, ns, len(all), "berth pods -A")
	default:
		for i := range pods {
			t.row("ADDED", &pods[i])
		}
		t.flush()
	}
	if o.output.value != "json" && o.output.value != "yaml" {
		printHiddenProblems(stderr, problems, pods)
	}
	if !o.watch {
		return 0
	}
	if err := o.watchPods(ctx, c, pods, want, pr, t, stdout); err != nil {
		return fail(1, "%v", err)
	}
	return 0
}

// watchPods prints the pods' changes as the daemon streams them, until ctx
// ends. The daemon's watch may open with an ADDED event for each pod it
// has, as the Kubernetes API's does: those already listed are not printed
// twice, or as MODIFIED when they changed in between.
func (o *podsOptions) watchPods(ctx context.Context, c *client, listed []v1.Pod, want func(*v1.Pod) bool, pr *printer, t *podTable, stdout io.Writer) error {
	shown := map[string][]byte{}
	for i := range listed {
		b, _ := json.Marshal(&listed[i])
		shown[listed[i].Namespace+"/"+listed[i].Name] = b
	}
	return c.watch(ctx, "/pods", nil, func(ev watchEvent) error {
		var p v1.Pod
		if err := json.Unmarshal(ev.Object, &p); err != nil {
			return fmt.Errorf("decode a %s pod of the watch: %w", ev.Type, err)
		}
		if !want(&p) {
			return nil
		}
		p = *withTypeMeta(&p)
		key := p.Namespace + "/" + p.Name
		b, _ := json.Marshal(&p)
		typ := ev.Type
		if prev, ok := shown[key]; ok && typ == "ADDED" {
			if bytes.Equal(prev, b) {
				delete(shown, key)
				return nil
			}
			// Listed, then changed before the watch began.
			typ = "MODIFIED"
		}
		delete(shown, key)
		if pr != nil {
			return o.printEvent(pr, stdout, typ, &p)
		}
		t.at = now()
		t.row(typ, &p)
		t.flush()
		return nil
	})
}

// printEvent prints one pod of a watch in a document format: the pod, or
// with --output-watch-events the watch event holding it.
func (o *podsOptions) printEvent(pr *printer, w io.Writer, typ string, p *v1.Pod) error {
	var obj any = p
	if o.watchEvents {
		obj = struct {
			Type   string  `json:"type"`
			Object *v1.Pod `json:"object"`
		}{typ, p}
	}
	return printWatched(pr, w, obj, "pod/"+p.Name)
}

// noneFound says, as kubectl does, that namespace ns ("" for all) holds
// nothing, and how to list the others when they hold some of the total.
func noneFound(w io.Writer, ns string, total int, listAll string) {
	switch {
	case ns == "":
		fmt.Fprintln(w, "No resources found")
	case total > 0:
		fmt.Fprintf(w, "No resources found in %s namespace (other namespaces hold some: %s).\n", ns, listAll)
	default:
		fmt.Fprintf(w, "No resources found in %s namespace.\n", ns)
	}
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// manifestProblems is the answer of the daemon's /problems.
type manifestProblems struct {
	Items []manifestProblem `json:"items"`
}

// manifestProblem is one problem as the daemon's /problems serves it:
// which manifest, line and field, which pod it names if any, and the whole
// message (FILE:LINE: FIELD: MESSAGE) as error.
type manifestProblem struct {
	Source    string `json:"source,omitempty"`
	Origin    string `json:"origin,omitempty"`
	Line      int    `json:"line,omitempty"`
	Field     string `json:"field,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Message   string `json:"message,omitempty"`
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Error     string `json:"error"`
	// Severity is "error" or "warning" where berth validate judged it;
	// the daemon's problems are all errors and leave it out.
	Severity string `json:"severity,omitempty"`
}

// problemsOf keeps the problems of the pods listed when they were picked
// by name or label (onlyListed); else those of namespace ns ("" for all),
// and those naming no pod, which no namespace can be told to hide.
func problemsOf(problems []manifestProblem, ns string, listed []v1.Pod, onlyListed bool) []manifestProblem {
	shown := map[string]bool{}
	for i := range listed {
		shown[listed[i].Namespace+"/"+listed[i].Name] = true
	}
	var out []manifestProblem
	for _, p := range problems {
		switch {
		case onlyListed:
			if shown[p.Namespace+"/"+p.Name] {
				out = append(out, p)
			}
		case ns == "" || p.Namespace == "" || p.Namespace == ns:
			out = append(out, p)
		}
	}
	return out
}

// printHiddenProblems warns, on stderr as kubectl prints warnings, of the
// manifest problems the table does not show as a rejected pod of their
// own: manifests berth could not read as far as a name, and broken edits
// whose pod keeps running its last good version, which would otherwise
// look as if the edit had worked.
func printHiddenProblems(w io.Writer, problems []manifestProblem, pods []v1.Pod) {
	rejected := map[string]bool{}
	for i := range pods {
		if pods[i].UID == "" {
			rejected[pods[i].Namespace+"/"+pods[i].Name] = true
		}
	}
	for _, p := range problems {
		switch {
		case rejected[p.Namespace+"/"+p.Name]:
		case p.Name != "":
			fmt.Fprintf(w, "Warning: pod %s/%s: %s\n", p.Namespace, p.Name, p.Error)
		default:
			fmt.Fprintf(w, "Warning: manifest problem: %s\n", p.Error)
		}
	}
}

// podTable prints pods the way kubectl get pods does, plus SOURCE (file
// or http): a NAMESPACE column leads when every namespace is listed, an
// EVENT column before it with --output-watch-events. The header comes
// with the first row, so a watch that starts empty still gets one.
type podTable struct {
	w         io.Writer
	wide      bool
	withNS    bool
	noHeaders bool
	events    bool
	at        time.Time

	tw     *tabwriter.Writer
	headed bool
}

func (t *podTable) row(event string, p *v1.Pod) {
	if t.tw == nil {
		t.tw = tabwriter.NewWriter(t.w, 0, 8, 3, ' ', 0)
	}
	if !t.headed && !t.noHeaders {
		var head []string
		if t.events {
			head = append(head, "EVENT")
		}
		if t.withNS {
			head = append(head, "NAMESPACE")
		}
		head = append(head, "NAME", "READY", "STATUS", "RESTARTS", "AGE", "SOURCE")
		if t.wide {
			head = append(head, "IP", "NODE", "MANIFEST")
		}
		fmt.Fprintln(t.tw, strings.Join(head, "\t"))
	}
	t.headed = true
	s := summarize(p)
	restarts := strconv.Itoa(s.restarts)
	if s.restarts != 0 && !s.lastRestart.IsZero() {
		restarts = fmt.Sprintf("%d (%s ago)", s.restarts, since(s.lastRestart, t.at))
	}
	var row []string
	if t.events {
		row = append(row, event)
	}
	if t.withNS {
		row = append(row, p.Namespace)
	}
	row = append(row, p.Name, fmt.Sprintf("%d/%d", s.ready, s.total), s.status, restarts, since(podCreated(p), t.at), orNone(p.Annotations[podspec.AnnotationSource]))
	if t.wide {
		row = append(row, orNone(p.Status.PodIP), orNone(p.Spec.NodeName), orNone(p.Annotations[podspec.AnnotationOrigin]))
	}
	fmt.Fprintln(t.tw, strings.Join(row, "\t"))
}

// flush writes the rows so far: a watch flushes each row as it comes,
// so its columns line up only with the rows flushed together.
func (t *podTable) flush() {
	if t.tw != nil {
		t.tw.Flush()
	}
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
