package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/berth-agent/berth/internal/docscheck"
)

const (
	cliPage     = "../../docs/cli.md"
	cliBegin    = "<!-- BEGIN GENERATED: berth commands. Edit internal/cli, then: UPDATE_GOLDEN=1 go test ./internal/cli -run TestCLIReference -->"
	cliEnd      = "<!-- END GENERATED: berth commands -->"
	cliTestName = "TestCLIReference"
)

// TestCLIReference keeps docs/cli.md equal to the command tree: a command
// or flag added, renamed or re-documented fails this test until the page
// is regenerated.
func TestCLIReference(t *testing.T) {
	t.Setenv("BERTH_SOCKET", "") // the page shows the built-in default
	root := NewRoot("dev", io.Discard, io.Discard)
	var b strings.Builder
	b.WriteString("\n")
	writeReference(&b, root)
	if err := docscheck.Generated(cliPage, cliBegin, cliEnd, b.String(), os.Getenv("UPDATE_GOLDEN") == "1"); err != nil {
		t.Errorf("%v\nregenerate it with\n  UPDATE_GOLDEN=1 go test ./internal/cli -run %s", err, cliTestName)
	}
}

// writeReference renders cmd and its subcommands, depth first in cobra's
// order (by name), as Markdown: the description, the synopsis, the
// examples and the flags as `--help` prints them.
func writeReference(w io.Writer, cmd *cobra.Command) {
	if cmd.Hidden || cmd.Name() == "help" {
		return
	}
	fmt.Fprintf(w, "## %s\n\n", cmd.CommandPath())
	// A Long of paragraphs (cobra's completion commands) is for a
	// terminal; the page takes the one-line Short instead.
	desc := cmd.Long
	if desc == "" || strings.Contains(desc, "\n\n") {
		desc = cmd.Short
	}
	fmt.Fprintf(w, "%s\n\n```\n%s\n```\n\n", strings.TrimSpace(strings.ReplaceAll(desc, "\n", " ")), cmd.UseLine())
	if len(cmd.Aliases) > 0 {
		fmt.Fprintf(w, "Aliases: %s.\n\n", strings.Join(cmd.Aliases, ", "))
	}
	if cmd.Example != "" {
		fmt.Fprintf(w, "Examples:\n\n```\n%s\n```\n\n", cmd.Example)
	}
	if flags := cmd.NonInheritedFlags(); flags.HasAvailableFlags() {
		fmt.Fprintf(w, "Flags:\n\n```\n%s```\n\n", flags.FlagUsagesWrapped(0))
	}
	for _, sub := range cmd.Commands() {
		writeReference(w, sub)
	}
}
