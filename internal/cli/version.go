package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func newVersionCmd(version string, stdout, stderr io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) != 0 {
				fmt.Fprintf(stderr, "berth version: takes no arguments\nSee '%s --help'.\n", cmd.CommandPath())
				return exitError(2)
			}
			fmt.Fprintln(stdout, versionString(version))
			return nil
		},
	}
}
