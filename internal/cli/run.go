package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/berth-agent/berth/internal/config"
	"github.com/berth-agent/berth/internal/daemon"
	"github.com/berth-agent/berth/internal/logging"
)

// newRunCmd is the daemon. Its flags are config.BindFlags', named like
// the kubelet's; config.Resolve puts the config files beneath the flags
// given.
func newRunCmd(version string, stderr io.Writer) *cobra.Command {
	var configPath string
	s := config.Defaults()
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the agent (the daemon)",
		Long: "Runs the Pod manifests of --pod-manifest-path and --manifest-url through the CRI\n" +
			"runtime of --container-runtime-endpoint until SIGTERM or SIGINT, which leave the\n" +
			"pods running. Settings come from the flags, then --config, then --kubelet-config;\n" +
			"docs/configuration.md lists them.",
		Example: "  berth run --config /etc/berth/berth.yaml\n  berth run --pod-manifest-path /etc/kubernetes/manifests",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			resolved, warnings, err := config.Resolve(cmd.Flags(), s, configPath)
			if err != nil {
				printWarnings(stderr, warnings)
				fmt.Fprintf(stderr, "berth run: %v\n", err)
				return exitError(2)
			}
			return exit(daemon.Main(resolved, daemon.Options{Version: version, Stderr: stderr, OnJournalStream: logging.StderrIsJournal, Warnings: warnings}))
		},
	}
	config.BindFlags(cmd.Flags(), &s, &configPath)
	cmd.Flags().SortFlags = false
	return cmd
}
