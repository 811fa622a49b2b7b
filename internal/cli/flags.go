package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
)

// clientFlags are the flags every command that asks the daemon shares:
// --socket, -n/--namespace and, where a command lists pods, -A.
type clientFlags struct {
	socket        string
	namespace     string
	allNamespaces bool
}

// bind registers the flags on cmd, with -A/--all-namespaces when
// allNamespaces, and completes -n from the daemon's pods.
func (f *clientFlags) bind(cmd *cobra.Command, allNamespaces bool) {
	fs := cmd.Flags()
	fs.StringVar(&f.socket, "socket", socketDefault(), "unix socket of the berth daemon (env BERTH_SOCKET)")
	fs.StringVarP(&f.namespace, "namespace", "n", "", "namespace of the pod (default: any)")
	if allNamespaces {
		fs.BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "pods of every namespace (the default; overrides -n)")
	}
	_ = cmd.RegisterFlagCompletionFunc("namespace", completeNamespaces(f))
}

// ns is the namespace the command looks in: "" for any.
func (f *clientFlags) ns() string {
	if f.allNamespaces {
		return ""
	}
	return f.namespace
}

// outputFlag is -o/--output restricted to formats; "" is the table. A
// format ending in "=" takes an argument (jsonpath=TEMPLATE).
type outputFlag struct {
	value   string
	formats []string
}

// documentFormats are the -o formats every listing command prints through
// printer.
var documentFormats = []string{"json", "yaml", "name", "jsonpath=", "jsonpath-file="}

// bindOutput registers -o/--output on cmd with the formats it takes,
// completed by the shell.
func bindOutput(cmd *cobra.Command, usage string, formats ...string) *outputFlag {
	o := &outputFlag{formats: formats}
	cmd.Flags().StringVarP(&o.value, "output", "o", "", usage)
	_ = cmd.RegisterFlagCompletionFunc("output", func(_ *cobra.Command, _ []string, _ string) ([]cobra.Completion, cobra.ShellCompDirective) {
		dir := cobra.ShellCompDirectiveNoFileComp
		for _, f := range formats {
			if strings.HasSuffix(f, "=") {
				// jsonpath= wants its template right after the sign.
				dir |= cobra.ShellCompDirectiveNoSpace
			}
		}
		return formats, dir
	})
	return o
}

// check is the message for a format the command does not have, "" when
// the format is one of them.
func (o *outputFlag) check() string {
	if o.value == "" || slices.Contains(o.formats, o.value) {
		return ""
	}
	for _, f := range o.formats {
		if strings.HasSuffix(f, "=") && strings.HasPrefix(o.value, f) {
			return ""
		}
	}
	shown := make([]string, len(o.formats))
	for i, f := range o.formats {
		shown[i] = f
		switch f {
		case "jsonpath=":
			shown[i] += "TEMPLATE"
		case "jsonpath-file=":
			shown[i] += "FILE"
		}
	}
	last := len(shown) - 1
	want := shown[last]
	if last > 0 {
		want = strings.Join(shown[:last], ", ") + " or " + want
	}
	return fmt.Sprintf("-o %q: want %s", o.value, want)
}

// table tells whether the format is a table ("" or wide).
func (o *outputFlag) table() bool { return o.value == "" || o.value == "wide" }

// printer is the document printer of the format; call it when not table().
func (o *outputFlag) printer() (*printer, error) { return newPrinter(o.value) }
