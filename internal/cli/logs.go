package cli

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"
)

// logsOptions are berth logs' flags.
type logsOptions struct {
	client                       clientFlags
	container                    string
	follow, previous, timestamps bool
	tail                         int
}

func newLogsCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &logsOptions{}
	cmd := &cobra.Command{
		Use:   "logs POD",
		Short: "Print a container's log",
		Long: "Prints a container's log, read by the daemon from the CRI log files. POD is the\n" +
			"pod's name (web-node1) or its manifest's (web).",
		Example:           "  berth logs web\n  berth logs web -c sidecar -f\n  berth logs crasher --previous --tail 20",
		ValidArgsFunction: completePods(&o.client, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			return exit(o.run(args, stdout, stderr))
		},
	}
	o.client.bind(cmd, false)
	fs := cmd.Flags()
	fs.IntVar(&o.tail, "tail", -1, "lines of the end of the log to show; -1 shows all")
	fs.StringVarP(&o.container, "container", "c", "", "container name (default: the pod's default container)")
	fs.BoolVarP(&o.follow, "follow", "f", false, "keep printing new lines while the container runs")
	fs.BoolVarP(&o.previous, "previous", "p", false, "the log of the container's previous run (after a crash)")
	fs.BoolVar(&o.timestamps, "timestamps", false, "prefix each line with its RFC 3339 time")
	_ = cmd.RegisterFlagCompletionFunc("container", completeContainers(&o.client))
	return cmd
}

func (o *logsOptions) run(pos []string, stdout, stderr io.Writer) int {
	cf, container, follow, previous, timestamps, tail := o.client, o.container, o.follow, o.previous, o.timestamps, &o.tail
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "berth logs: want exactly one POD (berth pods lists them)")
		return 2
	}

	// Ctrl-C ends a follow cleanly, without an error message.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c := newClient(cf.socket)
	lookup, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	pod, err := c.findPod(lookup, podArg(pos[0]), cf.ns())
	if err != nil {
		fmt.Fprintf(stderr, "berth logs: %v\n", err)
		return 1
	}
	if container == "" {
		var note string
		container, note = defaultContainer(pod)
		if note != "" {
			fmt.Fprintln(stderr, note)
		}
	}
	q := url.Values{}
	if container != "" {
		q.Set("container", container)
	}
	q.Set("follow", strconv.FormatBool(follow))
	q.Set("previous", strconv.FormatBool(previous))
	q.Set("timestamps", strconv.FormatBool(timestamps))
	if *tail >= 0 {
		q.Set("tailLines", strconv.Itoa(*tail))
	}
	resp, err := c.get(ctx, "/pods/"+url.PathEscape(pod.Namespace)+"/"+url.PathEscape(pod.Name)+"/log", q)
	if err != nil {
		fmt.Fprintf(stderr, "berth logs: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	if _, err := io.Copy(stdout, resp.Body); err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "berth logs: reading the log from the daemon: %v\n", err)
		return 1
	}
	return 0
}

// defaultContainer is the container kubectl logs picks when none is named:
// the one the kubectl.kubernetes.io/default-container annotation names,
// else the first app container, with a note naming the others when there
// is a choice.
func defaultContainer(pod *v1.Pod) (name, note string) {
	if n := pod.Annotations["kubectl.kubernetes.io/default-container"]; n != "" {
		return n, ""
	}
	if len(pod.Spec.Containers) == 0 {
		return "", ""
	}
	name = pod.Spec.Containers[0].Name
	if len(pod.Spec.Containers)+len(pod.Spec.InitContainers) == 1 {
		return name, ""
	}
	var all []string
	for _, c := range pod.Spec.Containers {
		all = append(all, c.Name)
	}
	for _, c := range pod.Spec.InitContainers {
		all = append(all, c.Name+" (init)")
	}
	return name, fmt.Sprintf("Defaulted container %q out of: %s", name, strings.Join(all, ", "))
}
