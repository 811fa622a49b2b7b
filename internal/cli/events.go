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
	fail := func(code int, format string, a ...any) int {
		fmt.Fprintf(stderr, "berth events: "+format+"\n", a...)
		return code
	}
	args = podArgs(args)
	if len(args) > 1 {
		return fail(2, "want at most one POD (berth pods lists them)")
	}
	if msg := o.output.check(); msg != "" {
		return fail(2, "%s", msg)
	}
	var pr *printers.Printer
	if !o.output.table() {
		var err error
		if pr, err = o.output.printer(); err != nil {
			return fail(2, "%v", err)
		}
	}
	ns := o.client.listNS()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c := newClient(o.client.socket)
	listCtx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	want := func(e *v1.Event) bool { return ns == "" || e.InvolvedObject.Namespace == ns }
	if len(args) == 1 {
		// A pod that is gone (its events outlive it) is named as given.
		podNS, podName := o.client.ns(), args[0]
		pods, err := c.Pods(listCtx)
		if err != nil {
			return fail(1, "%v", err)
		}
		if p, err := apiclient.ResolvePod(pods, podName, podNS); err == nil {
			podNS, podName = p.Namespace, p.Name
		}
		want = func(e *v1.Event) bool {
			return e.InvolvedObject.Name == podName && (podNS == "" || e.InvolvedObject.Namespace == podNS)
		}
	}
	var list v1.EventList
	if err := c.GetJSON(listCtx, "/events", &list); err != nil {
		return fail(1, "%v", err)
	}
	var events []v1.Event
	for i := range list.Items {
		if want(&list.Items[i]) {
			events = append(events, *eventWithTypeMeta(&list.Items[i]))
		}
	}
	sort.SliceStable(events, func(i, j int) bool { return printers.LastSeen(&events[i]).Before(printers.LastSeen(&events[j])) })
	t := printers.NewEventTable(stdout, printers.EventTableOptions{WithNamespace: o.client.allNamespaces && len(args) == 0, NoHeaders: o.noHeaders})
	switch {
	case pr != nil && o.watch:
		for i := range events {
			if err := pr.PrintWatched(stdout, &events[i], "event/"+events[i].Name); err != nil {
				return fail(1, "%v", err)
			}
		}
	case pr != nil:
		doc := v1.EventList{Items: orEmpty(events)}
		doc.APIVersion, doc.Kind = "v1", "List"
		var names []string
		for i := range events {
			names = append(names, "event/"+events[i].Name)
		}
		if err := pr.Print(stdout, &doc, names); err != nil {
			return fail(1, "%v", err)
		}
	case len(events) == 0 && !o.watch:
		noneFound(stderr, ns, len(list.Items), "berth events -A")
	default:
		at := now()
		for i := range events {
			t.Row(&events[i], at)
		}
		t.Flush()
	}
	if !o.watch {
		return 0
	}
	shown := map[string][]byte{}
	for i := range events {
		b, _ := json.Marshal(&events[i])
		shown[events[i].Namespace+"/"+events[i].Name] = b
	}
	err := c.Watch(ctx, "/events", nil, func(ev apiclient.WatchEvent) error {
		var e v1.Event
		if err := json.Unmarshal(ev.Object, &e); err != nil {
			return fmt.Errorf("decode an event of the watch: %w", err)
		}
		if !want(&e) {
			return nil
		}
		e = *eventWithTypeMeta(&e)
		// The watch may open with the events already listed.
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
	if err != nil {
		return fail(1, "%v", err)
	}
	return 0
}

func eventWithTypeMeta(e *v1.Event) *v1.Event {
	c := e.DeepCopy()
	c.APIVersion, c.Kind = "v1", "Event"
	return c
}
