package cli

import (
	"context"
	"fmt"
	"io"
	"net/url"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/cli/apiclient"
	"github.com/berth-agent/berth/internal/cli/printers"
)

// describeOptions are berth describe's flags.
type describeOptions struct {
	client clientFlags
}

func newDescribeCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &describeOptions{}
	cmd := &cobra.Command{
		Use:   "describe [pod] POD...",
		Short: "Show a pod's containers, conditions and events",
		Long: "Shows a pod like kubectl describe pod: containers, their states and last\n" +
			"termination, conditions, volumes and the recent events berth recorded. POD is the\n" +
			"pod's name (web-node1) or its manifest's (web); as with kubectl, `describe pod web`\n" +
			"and `describe pod/web` name the same pod.",
		Example:           "  berth describe web\n  berth describe pod web-node1 -n kube-system",
		ValidArgsFunction: completePods(&o.client, true),
		RunE: func(cmd *cobra.Command, args []string) error {
			return exit(o.run(args, stdout, stderr))
		},
	}
	o.client.bind(cmd, findsPodAll)
	return cmd
}

func (o *describeOptions) run(pos []string, stdout, stderr io.Writer) int {
	cf := clientFlags{socket: o.client.socket, namespace: o.client.ns()}
	pos = podArgs(pos)
	if len(pos) == 0 {
		fmt.Fprintln(stderr, "berth describe: want at least one POD (berth pods lists them)")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	c := newClient(cf.socket)
	pods, err := c.Pods(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "berth describe: %v\n", err)
		return 1
	}
	code := 0
	for i, name := range pos {
		pod, err := apiclient.ResolvePod(pods, name, cf.namespace)
		if err != nil {
			fmt.Fprintf(stderr, "berth describe: %v\n", err)
			code = 1
			continue
		}
		var events v1.EventList
		if err := c.GetJSON(ctx, "/pods/"+url.PathEscape(pod.Namespace)+"/"+url.PathEscape(pod.Name)+"/events", &events); err != nil {
			fmt.Fprintf(stderr, "berth describe: events of %s: %v\n", pod.Name, err)
			code = 1
		}
		if i > 0 {
			fmt.Fprintln(stdout)
		}
		printers.DescribePod(stdout, pod, events.Items, now())
	}
	return code
}
