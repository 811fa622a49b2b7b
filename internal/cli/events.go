package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/signal"
	"sort"
	"syscall"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/cli/apiclient"
	"github.com/berth-agent/berth/internal/cli/printers"
)

// eventsOptions are berth events' flags.
type eventsOptions struct {
	client    clientFlags
	output    *outputFlag
	noHeaders bool
	watch     bool
}

func newEventsCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &eventsOptions{}
	cmd := &cobra.Command{
		Use:   "events [POD]",
		Short: "List the events of the pods, or of one pod",
		Long: "Lists the events berth recorded, oldest first, like kubectl events: of the pods of\n" +
			"-n's namespace (default: default; -A every one), or of POD (its name, web-node1, or\n" +
			"its manifest's, web, in any namespace unless -n is given). The daemon keeps a\n" +
			"bounded number of them across its restarts. -w prints new events as they happen.",
		Example:           "  berth events -A\n  berth events crash -w\n  berth events -n kube-system -o yaml",
		ValidArgsFunction: completePods(&o.client, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			return exit(o.run(args, stdout, stderr))
		},
	}
	o.client.bind(cmd, listsPods)
	o.output = bindOutput(cmd, "output format: json, yaml, name, jsonpath=TEMPLATE or jsonpath-file=FILE", documentFormats...)
	cmd.Flags().BoolVar(&o.noHeaders, "no-headers", false, "print the table without its header line")
	cmd.Flags().BoolVarP(&o.watch, "watch", "w", false, "after the list, print each new event, until interrupted")
	return cmd
}

func (o *eventsOptions) run(args []string, stdout, stderr io.Writer) int {
	args = podArgs(args)
	pr, err := o.printer(args)
	if err != nil {
		return report(stderr, "events", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c := newClient(o.client.socket)
	listCtx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	want, err := o.wanted(listCtx, c, args)
	if err != nil {
		return report(stderr, "events", err)
	}
	events, total, err := listEvents(listCtx, c, want)
	if err != nil {
		return report(stderr, "events", err)
	}
	t := printers.NewEventTable(stdout, printers.EventTableOptions{WithNamespace: o.client.allNamespaces && len(args) == 0, NoHeaders: o.noHeaders})
	if err := o.printList(stdout, stderr, pr, t, events, total); err != nil {
		return report(stderr, "events", err)
	}
	if !o.watch {
		return 0
	}
	if err := o.watchEvents(ctx, c, events, want, pr, t, stdout); err != nil {
		return report(stderr, "events", err)
	}
	return 0
}

// printer checks the arguments and -o, and returns -o's document printer:
// nil for the table.
func (o *eventsOptions) printer(args []string) (*printers.Printer, error) {
	if len(args) > 1 {
		return nil, usagef("want at most one POD (berth pods lists them)")
	}
	if msg := o.output.check(); msg != "" {
		return nil, usagef("%s", msg)
	}
	if o.output.table() {
		return nil, nil
	}
	pr, err := o.output.printer()
	if err != nil {
		return nil, usageError{err}
	}
	return pr, nil
}

// wanted tells the events the command shows: those of the pod named, else
// those of the namespace listed. A pod that is gone (its events outlive
// it) is named as given.
func (o *eventsOptions) wanted(ctx context.Context, c *apiclient.Client, args []string) (func(*v1.Event) bool, error) {
	if len(args) == 0 {
		ns := o.client.listNS()
		return func(e *v1.Event) bool { return ns == "" || e.InvolvedObject.Namespace == ns }, nil
	}
	podNS, podName := o.client.ns(), args[0]
	pods, err := c.Pods(ctx)
	if err != nil {
		return nil, err
	}
	if p, err := apiclient.ResolvePod(pods, podName, podNS); err == nil {
		podNS, podName = p.Namespace, p.Name
	}
	return func(e *v1.Event) bool {
		return e.InvolvedObject.Name == podName && (podNS == "" || e.InvolvedObject.Namespace == podNS)
	}, nil
}

// listEvents returns the daemon's events that want keeps, oldest first,
// and how many events the daemon has in all.
func listEvents(ctx context.Context, c *apiclient.Client, want func(*v1.Event) bool) ([]v1.Event, int, error) {
	var list v1.EventList
	if err := c.GetJSON(ctx, "/events", &list); err != nil {
		return nil, 0, err
	}
	var events []v1.Event
	for i := range list.Items {
		if want(&list.Items[i]) {
			events = append(events, *eventWithTypeMeta(&list.Items[i]))
		}
	}
	sort.SliceStable(events, func(i, j int) bool { return printers.LastSeen(&events[i]).Before(printers.LastSeen(&events[j])) })
	return events, len(list.Items), nil
}

// printList prints the events listed: with -o's printer pr (each on its
// own under -w, as kubectl get -w), else as the table t, or says none was
// found when there is nothing to print and no watch to wait on.
func (o *eventsOptions) printList(stdout, stderr io.Writer, pr *printers.Printer, t *printers.EventTable, events []v1.Event, total int) error {
	switch {
	case pr != nil && o.watch:
		for i := range events {
			if err := pr.PrintWatched(stdout, &events[i], "event/"+events[i].Name); err != nil {
				return err
			}
		}
		return nil
	case pr != nil:
		doc := v1.EventList{Items: orEmpty(events)}
		doc.APIVersion, doc.Kind = "v1", "List"
		var names []string
		for i := range events {
			names = append(names, "event/"+events[i].Name)
		}
		return pr.Print(stdout, &doc, names)
	case len(events) == 0 && !o.watch:
		noneFound(stderr, o.client.listNS(), total, "berth events -A")
		return nil
	}
	at := now()
	for i := range events {
		t.Row(&events[i], at)
	}
	t.Flush()
	return nil
}

// watchEvents prints the new events as the daemon streams them, until ctx
// ends. The watch may open with the events already listed: those are not
// printed twice.
func (o *eventsOptions) watchEvents(ctx context.Context, c *apiclient.Client, listed []v1.Event, want func(*v1.Event) bool, pr *printers.Printer, t *printers.EventTable, stdout io.Writer) error {
	shown := map[string][]byte{}
	for i := range listed {
		b, _ := json.Marshal(&listed[i])
		shown[listed[i].Namespace+"/"+listed[i].Name] = b
	}
	return c.Watch(ctx, "/events", nil, func(ev apiclient.WatchEvent) error {
		var e v1.Event
		if err := json.Unmarshal(ev.Object, &e); err != nil {
			return fmt.Errorf("decode an event of the watch: %w", err)
		}
		if !want(&e) {
			return nil
		}
		e = *eventWithTypeMeta(&e)
		key := e.Namespace + "/" + e.Name
		b, _ := json.Marshal(&e)
		if prev, ok := shown[key]; ok && bytes.Equal(prev, b) {
			return nil
		}
		shown[key] = b
		if pr != nil {
			return pr.PrintWatched(stdout, &e, "event/"+e.Name)
		}
		t.Row(&e, now())
		t.Flush()
		return nil
	})
}

func eventWithTypeMeta(e *v1.Event) *v1.Event {
	c := e.DeepCopy()
	c.APIVersion, c.Kind = "v1", "Event"
	return c
}
