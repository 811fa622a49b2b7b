package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/berth-agent/berth/internal/cli/apiclient"
	"github.com/berth-agent/berth/internal/cli/printers"
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
	sel, pr, err := o.parseFlags(names)
	if err != nil {
		return report(stderr, "pods", err)
	}
	ns := o.client.listNS()
	// Ctrl-C ends a watch cleanly, without an error message.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c := newClient(o.client.socket)
	listCtx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	all, err := c.Pods(listCtx)
	if err != nil {
		return report(stderr, "pods", err)
	}
	want, err := o.wanted(all, names, sel)
	if err != nil {
		return report(stderr, "pods", err)
	}
	var pods []v1.Pod
	for i := range all {
		if want(&all[i]) {
			pods = append(pods, *withTypeMeta(&all[i]))
		}
	}
	var list manifestProblems
	if err := c.GetJSON(listCtx, "/problems", &list); err != nil {
		fmt.Fprintf(stderr, "berth pods: listing manifest problems: %v\n", err)
	}
	problems := problemsOf(list.Items, ns, pods, len(names) > 0 || !sel.Empty())
	t := printers.NewPodTable(stdout, printers.PodTableOptions{Wide: o.output.value == "wide", WithNamespace: o.client.allNamespaces, NoHeaders: o.noHeaders, Events: o.watch && o.watchEvents})
	if err := o.printList(stdout, stderr, pr, t, pods, problems, len(names) == 1, len(all)); err != nil {
		return report(stderr, "pods", err)
	}
	// json and yaml hold the problems; elsewhere those no row shows are
	// warnings.
	if o.output.value != "json" && o.output.value != "yaml" {
		printHiddenProblems(stderr, problems, pods)
	}
	if w := nodeWarning(listCtx, c); w != "" {
		fmt.Fprintln(stderr, w)
	}
	if !o.watch {
		return 0
	}
	if err := o.watchPods(ctx, c, pods, want, pr, t, stdout); err != nil {
		return report(stderr, "pods", err)
	}
	return 0
}

// parseFlags checks -o and the pod names against -l, and returns -l's
// selector and -o's document printer (nil for the table).
func (o *podsOptions) parseFlags(names []string) (labels.Selector, *printers.Printer, error) {
	if msg := o.output.check(); msg != "" {
		return nil, nil, usagef("%s", msg)
	}
	sel, err := labels.Parse(o.selector)
	if err != nil {
		return nil, nil, usagef("-l %q: %v", o.selector, err)
	}
	if len(names) > 0 && o.selector != "" {
		return nil, nil, usagef("give pod names or -l, not both")
	}
	if o.output.table() {
		return sel, nil, nil
	}
	pr, err := o.output.printer()
	if err != nil {
		return nil, nil, usageError{err}
	}
	return sel, pr, nil
}

// wanted tells the pods the command shows: the ones named, found among
// all, else those of the namespace listed matching the selector.
func (o *podsOptions) wanted(all []v1.Pod, names []string, sel labels.Selector) (func(*v1.Pod) bool, error) {
	if len(names) == 0 {
		ns := o.client.listNS()
		return func(p *v1.Pod) bool {
			return (ns == "" || p.Namespace == ns) && sel.Matches(labels.Set(p.Labels))
		}, nil
	}
	named := map[string]bool{}
	for _, name := range names {
		p, err := apiclient.ResolvePod(all, podArg(name), o.client.ns())
		if err != nil {
			return nil, err
		}
		named[p.Namespace+"/"+p.Name] = true
	}
	return func(p *v1.Pod) bool { return named[p.Namespace+"/"+p.Name] }, nil
}

// printList prints the pods listed: with -o's printer pr (each on its own
// under -w, as kubectl get -w; the pod alone when one was named), else as
// the table t, or says none was found when there is nothing to print and
// no watch to wait on.
func (o *podsOptions) printList(stdout, stderr io.Writer, pr *printers.Printer, t *printers.PodTable, pods []v1.Pod, problems []manifestProblem, oneNamed bool, total int) error {
	switch {
	case pr != nil && o.watch:
		for i := range pods {
			if err := o.printEvent(pr, stdout, "ADDED", &pods[i]); err != nil {
				return err
			}
		}
		return nil
	case pr != nil:
		var obj any = &podListDoc{APIVersion: "v1", Kind: "List", Items: orEmpty(pods), Problems: orEmpty(problems)}
		var podNames []string
		for i := range pods {
			podNames = append(podNames, "pod/"+pods[i].Name)
		}
		if oneNamed {
			obj = &pods[0]
		}
		return pr.Print(stdout, obj, podNames)
	case len(pods) == 0 && !o.watch:
		noneFound(stderr, o.client.listNS(), total, "berth pods -A")
		return nil
	}
	at := now()
	for i := range pods {
		t.Row("ADDED", &pods[i], at)
	}
	t.Flush()
	return nil
}

// watchPods prints the pods' changes as the daemon streams them, until ctx
// ends. The daemon's watch may open with an ADDED event for each pod it
// has, as the Kubernetes API's does: those already listed are not printed
// twice, or as MODIFIED when they changed in between.
func (o *podsOptions) watchPods(ctx context.Context, c *apiclient.Client, listed []v1.Pod, want func(*v1.Pod) bool, pr *printers.Printer, t *printers.PodTable, stdout io.Writer) error {
	shown := map[string][]byte{}
	for i := range listed {
		b, _ := json.Marshal(&listed[i])
		shown[listed[i].Namespace+"/"+listed[i].Name] = b
	}
	return c.Watch(ctx, "/pods", nil, func(ev apiclient.WatchEvent) error {
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
		t.Row(typ, &p, now())
		t.Flush()
		return nil
	})
}

// printEvent prints one pod of a watch in a document format: the pod, or
// with --output-watch-events the watch event holding it.
func (o *podsOptions) printEvent(pr *printers.Printer, w io.Writer, typ string, p *v1.Pod) error {
	var obj any = p
	if o.watchEvents {
		obj = struct {
			Type   string  `json:"type"`
			Object *v1.Pod `json:"object"`
		}{typ, p}
	}
	return pr.PrintWatched(w, obj, "pod/"+p.Name)
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
