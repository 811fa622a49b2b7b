package cli

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/berth-agent/berth/internal/cli/apiclient"
	"github.com/berth-agent/berth/internal/cli/printers"
)

// nodeOptions are berth node's flags.
type nodeOptions struct {
	client clientFlags
	output *outputFlag
}

func newNodeCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &nodeOptions{}
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Show the node's connection to the cluster's API server",
		Long: "Shows what the daemon knows of its Node in the cluster it joined (--kubeconfig):\n" +
			"whether it is registered, when its status and Lease were last written, the API\n" +
			"server's address, the current error and since when, and with TLS bootstrap when\n" +
			"the client certificate expires. Pods keep running while the API server is down.\n" +
			"A daemon that joins no cluster is an error, exit 1.",
		Example: "  berth node\n  berth node -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return exit(o.run(cmd.Context(), stdout, stderr))
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.client.socket, "socket", socketDefault(), "unix socket of the berth daemon (env BERTH_SOCKET)")
	o.output = bindOutput(cmd, "output format: json or yaml", "json", "yaml")
	return cmd
}

func (o *nodeOptions) run(ctx context.Context, stdout, stderr io.Writer) int {
	if msg := o.output.check(); msg != "" {
		fmt.Fprintf(stderr, "berth node: %s\n", msg)
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var state printers.NodeState
	if err := newClient(o.client.socket).GetJSON(ctx, "/node", &state); err != nil {
		return report(stderr, "node", err)
	}
	if o.output.value == "" {
		printers.DescribeNode(stdout, &state, now())
		return 0
	}
	pr, err := o.output.printer()
	if err == nil {
		err = pr.Print(stdout, &state, nil)
	}
	if err != nil {
		return report(stderr, "node", err)
	}
	return 0
}

// nodeWarning is the line berth pods prints on stderr while the daemon's
// node cannot reach its API server; "" when healthy, when the daemon
// joins no cluster (404) or cannot say.
func nodeWarning(ctx context.Context, c *apiclient.Client) string {
	var state printers.NodeState
	if err := c.GetJSON(ctx, "/node", &state); err != nil {
		return ""
	}
	return printers.NodeWarning(&state, now())
}
