package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/cli/printers"
	"github.com/berth-agent/berth/internal/config"
	"github.com/berth-agent/berth/internal/podsnapshot"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/source"
)

// validateOptions are berth validate's flags.
type validateOptions struct {
	node     string
	output   *outputFlag
	maxBytes int64
	maxPods  int
	perms    string
	quiet    bool
}

// validateLong is berth validate's help, and the contract of its -o
// document, which berth pods -o may mirror. One paragraph, so that
// docs/cli.md shows it whole.
const validateLong = `Checks manifest files and directories with the code berth run runs ("-" reads
standard input, named <stdin>); prints FILE:LINE: FIELD: MESSAGE for every
problem, and "Warning: " and the same for every field berth accepts and
ignores. Two pods claiming one host port (hostPort, or a hostNetwork pod's
containerPort, with the same protocol and address) are a problem here; the
daemon runs both and warns on the later one.
Exit status: 0 when every manifest is valid (warnings allowed), 1 when there
is a problem, 2 on bad usage. A summary line goes to stderr (-q: none).
-o json|yaml prints the List berth pods -o prints (apiVersion v1, kind List)
of the pods as berth would run them, items [] when there are none, and
beside items a "problems" array of {source, origin, line, field, reason,
message, name, namespace, error, severity ("error" or "warning")}; empty
fields are left out, problems is [] when there are none. JSON is indented
by 2 spaces.`

// newValidateCmd checks manifests with the code the daemon runs, so what
// it accepts is exactly what `berth run` would start. Problems go to
// stdout as FILE:LINE: FIELD: MESSAGE; with -o the List goes to stdout and
// the problems to stderr, so the output stays a valid document. Warnings
// and the summary go to stderr.
func newValidateCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &validateOptions{}
	cmd := &cobra.Command{
		Use:     "validate PATH...",
		Short:   "Check manifests and print every problem",
		Long:    validateLong,
		Example: "  berth validate /etc/kubernetes/manifests\n  berth validate web.yaml -o yaml\n  kubectl run web --image nginx:1 --dry-run=client -o yaml | berth validate -",
		RunE: func(cmd *cobra.Command, paths []string) error {
			if len(paths) == 0 {
				fmt.Fprintf(stderr, "berth validate: want at least one PATH\nSee '%s --help'.\n", cmd.CommandPath())
				return exitError(2)
			}
			return exit(o.run(paths, cmd.InOrStdin(), stdout, stderr))
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.node, "node-name", "", "node name the pod names get as suffix (default: the lower-cased hostname)")
	o.output = bindOutput(cmd, "also print the defaulted pods and the problems as a List: yaml or json", "yaml", "json")
	fs.Int64Var(&o.maxBytes, "max-bytes", podspec.DefaultMaxBytes, "size limit of one manifest file (and of standard input)")
	fs.IntVar(&o.maxPods, "max-pods", podspec.DefaultMaxPods, "berth run's --max-pods: a file may hold twice as many documents (at least 16)")
	fs.StringVar(&o.perms, "manifest-permissions", "", "strict: also refuse manifests and directories others than root may write, and manifests holding a Secret others may read, as berth run does (default: not checked)")
	fs.BoolVarP(&o.quiet, "quiet", "q", false, "print no summary line")
	return cmd
}

func (o *validateOptions) run(paths []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if msg := o.output.check(); msg != "" {
		fmt.Fprintf(stderr, "berth validate: %s\n", msg)
		return 2
	}
	name, err := config.NodeName(o.node)
	if err != nil {
		fmt.Fprintf(stderr, "berth validate: %v\n", err)
		return 2
	}
	var permissions source.Permissions
	if o.perms != "" {
		if permissions, err = source.ParsePermissions(o.perms); err != nil {
			fmt.Fprintf(stderr, "berth validate: --manifest-permissions: %v\n", err)
			return 2
		}
	}
	snap, read := source.ReadManifests(source.ReadOptions{NodeName: name, MaxBytes: o.maxBytes, MaxPods: o.maxPods,
		Permissions: permissions, Stdin: stdin}, paths...)
	problems, warnings := validateFindings(snap)
	problemsTo := stdout
	if o.output.value != "" {
		problemsTo = stderr
		if err := printValidateList(stdout, o.output.value, snap.Pods, problems, warnings); err != nil {
			fmt.Fprintf(stderr, "berth validate: %v\n", err)
			return 1
		}
	}
	for _, p := range problems {
		fmt.Fprintln(problemsTo, p.Error())
	}
	for _, w := range warnings {
		fmt.Fprintln(stderr, "Warning: "+w.Error())
	}
	if len(problems) > 0 {
		if !o.quiet {
			files := map[string]bool{}
			for _, p := range problems {
				files[p.Origin] = true
			}
			fmt.Fprintf(stderr, "%s in %s\n", plural(len(problems), "problem"), plural(len(files), "file"))
		}
		return 1
	}
	if !o.quiet {
		verb := "are"
		if len(snap.Pods) == 1 {
			verb = "is"
		}
		fmt.Fprintf(stderr, "%s in %s %s valid%s\n", plural(len(snap.Pods), "pod"), plural(len(read), "file"), verb, warningCount(len(warnings)))
	}
	return 0
}

// validateFindings splits a snapshot's findings as validate judges them:
// its problems, and host-port clashes, are problems (berth validate is
// where such a mistake is caught before it runs); the other warnings are
// warnings.
func validateFindings(snap podsnapshot.Snapshot) (problems, warnings []podspec.Problem) {
	problems = append(problems, snap.Problems...)
	for _, w := range snap.Warnings {
		if w.Reason == podspec.ReasonHostPortConflict {
			problems = append(problems, w)
			continue
		}
		warnings = append(warnings, w)
	}
	return problems, warnings
}

func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func warningCount(n int) string {
	if n == 0 {
		return ""
	}
	return " (" + plural(n, "warning") + ")"
}

// printValidateList writes the pods and findings in format as berth pods
// -o prints its List: the pods as berth would run them, and beside them
// the problems and warnings, each with its severity.
func printValidateList(w io.Writer, format string, pods []*v1.Pod, problems, warnings []podspec.Problem) error {
	doc := podListDoc{APIVersion: "v1", Kind: "List", Items: []v1.Pod{}, Problems: []manifestProblem{}}
	for _, p := range pods {
		doc.Items = append(doc.Items, *withTypeMeta(p))
	}
	for _, p := range problems {
		doc.Problems = append(doc.Problems, problemOf(p, "error"))
	}
	for _, p := range warnings {
		doc.Problems = append(doc.Problems, problemOf(p, "warning"))
	}
	pr, err := printers.New(format)
	if err != nil {
		return err
	}
	return pr.Print(w, &doc, nil)
}

// problemOf is p as a List's problems hold it.
func problemOf(p podspec.Problem, severity string) manifestProblem {
	return manifestProblem{Source: p.Source, Origin: p.Origin, Line: p.Line, Field: p.Field, Reason: p.Reason,
		Message: p.Message, Name: p.Name, Namespace: p.Namespace, Error: p.Error(), Severity: severity}
}

// withTypeMeta gives a pod its kind, so each item stands alone.
func withTypeMeta(p *v1.Pod) *v1.Pod {
	c := p.DeepCopy()
	c.APIVersion, c.Kind = "v1", "Pod"
	return c
}
