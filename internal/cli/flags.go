package cli

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-agent/berth/internal/cli/printers"
)

// clientFlags are the flags every command that asks the daemon shares:
// --socket, -n/--namespace and, where a command lists or finds pods, -A.
type clientFlags struct {
	socket        string
	namespace     string
	allNamespaces bool
	lists         bool // -n and -A as kubectl get's: see bind
}

// namespaceScope is what -n and -A mean to a command.
type namespaceScope int

const (
	// findsPod: the command finds the pods it is given by name; -n
	// narrows the search, which is over every namespace by default.
	findsPod namespaceScope = iota
	// findsPodAll: findsPod, with -A to undo a -n.
	findsPodAll
	// listsPods: as kubectl get, the command lists the namespace of -n,
	// "default" when none is given, and every namespace with -A, which
	// alone adds a NAMESPACE column. Pods it is given by name are still
	// found in any namespace unless -n is given.
	listsPods
)

// bind registers the flags on cmd for scope, and completes -n from the
// daemon's pods.
func (f *clientFlags) bind(cmd *cobra.Command, scope namespaceScope) {
	fs := cmd.Flags()
	fs.StringVar(&f.socket, "socket", socketDefault(), "unix socket of the berth daemon (env BERTH_SOCKET)")
	switch scope {
	case listsPods:
		f.lists = true
		fs.StringVarP(&f.namespace, "namespace", "n", "", "namespace to list (default \"default\", as kubectl; a pod named is looked for in any)")
		fs.BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "list every namespace, with a NAMESPACE column (overrides -n)")
	case findsPodAll:
		fs.StringVarP(&f.namespace, "namespace", "n", "", "namespace of the pod (default: any)")
		fs.BoolVarP(&f.allNamespaces, "all-namespaces", "A", false, "look for the pod in every namespace (the default; overrides -n)")
	default:
		fs.StringVarP(&f.namespace, "namespace", "n", "", "namespace of the pod (default: any)")
	}
	_ = cmd.RegisterFlagCompletionFunc("namespace", completeNamespaces(f))
}

// ns is the namespace the command finds pods by name in: "" for any.
func (f *clientFlags) ns() string {
	if f.allNamespaces {
		return ""
	}
	return f.namespace
}

// listNS is the namespace a listing shows: "" for every one (-A), else
// -n's, else "default".
func (f *clientFlags) listNS() string {
	switch {
	case f.allNamespaces:
		return ""
	case f.namespace != "":
		return f.namespace
	}
	return metav1.NamespaceDefault
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
func (o *outputFlag) printer() (*printers.Printer, error) { return printers.New(o.value) }
