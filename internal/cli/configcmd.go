package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/berth-agent/berth/internal/config"
)

// newConfigCmd groups the commands about berth run's settings.
func newConfigCmd(stdout, stderr io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Check a config file, or print the settings berth run would use",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(stderr)
			_ = cmd.Usage()
			return exitError(2)
		},
	}
	cmd.AddCommand(newConfigCheckCmd(stdout, stderr), newConfigViewCmd(stdout, stderr))
	return cmd
}

// newConfigCheckCmd reads a config file as berth run --config reads it,
// the kubelet config it names and the validation included: every problem
// goes to stdout as FILE:LINE: field: message and the exit status is 1;
// else one summary line and 0. Warnings (older field names, an
// unversioned file) go to stderr either way.
func newConfigCheckCmd(stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "check FILE",
		Short: "Check a config file and print every problem",
		Long: "Reads FILE as `berth run --config FILE` would, with the kubelet config it names,\n" +
			"and prints every problem as FILE:LINE: field: message (exit 1), or one line saying\n" +
			"it is good (exit 0). Deprecations are warnings on stderr.",
		Example: "  berth config check /etc/berth/berth.yaml",
		Args:    cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			_, warnings, err := config.Parse([]string{"--config", args[0]}, stderr)
			printWarnings(stderr, warnings)
			if err != nil {
				fmt.Fprintln(stdout, err)
				return exitError(1)
			}
			fmt.Fprintf(stdout, "%s: ok (%d warnings)\n", args[0], len(warnings))
			return nil
		},
	}
}

// newConfigViewCmd prints the settings berth run would use with the same
// flags: the defaults, then the kubelet config, berth's config file and
// the flags, as a versioned config file with its secrets redacted.
func newConfigViewCmd(stdout, stderr io.Writer) *cobra.Command {
	var configPath string
	s := config.Defaults()
	cmd := &cobra.Command{
		Use:   "view [--config FILE] [berth run's flags]",
		Short: "Print the effective settings as a config file",
		Long: "Prints the settings `berth run` would use with the same flags (defaults, then\n" +
			"--kubelet-config, --config and the flags) as a versioned config file. Header values\n" +
			"and the URLs' credentials and query values are REDACTED.",
		Example: "  berth config view --config /etc/berth/berth.yaml\n  berth config view --config /etc/berth/berth.yaml --max-pods 20",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			resolved, warnings, err := config.Resolve(cmd.Flags(), s, configPath)
			printWarnings(stderr, warnings)
			if err != nil {
				fmt.Fprintf(stderr, "berth config view: %v\n", err)
				return exitError(1)
			}
			out, err := resolved.Redacted().Marshal()
			if err != nil {
				fmt.Fprintf(stderr, "berth config view: %v\n", err)
				return exitError(1)
			}
			_, _ = stdout.Write(out)
			return nil
		},
	}
	config.BindFlags(cmd.Flags(), &s, &configPath)
	cmd.Flags().SortFlags = false
	return cmd
}

// printWarnings prints the config files' warnings on stderr, one a line,
// as the commands that read them do before their result or error.
func printWarnings(stderr io.Writer, warnings []string) {
	for _, w := range warnings {
		fmt.Fprintf(stderr, "warning: %s\n", w)
	}
}
