package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/berth-agent/berth/internal/config"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/source"
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// validateOptions are berth validate's flags.
type validateOptions struct {
	node     string
	output   *outputFlag
	maxBytes int64
	maxPods  int
	perms    string
}

// newValidateCmd checks manifests with the code the daemon runs, so what
// it accepts is exactly what `berth run` would start. Problems go to
// stdout as FILE:LINE: FIELD: MESSAGE; with -o the defaulted pods go to
// stdout and the problems to stderr, so the output stays a valid
// document (-o json's List also holds them, as berth pods -o json's). Exit 0 when everything is valid, 1 otherwise, 2 on bad usage.
func newValidateCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &validateOptions{}
	cmd := &cobra.Command{
		Use:     "validate PATH...",
		Short:   "Check manifests and print every problem",
		Long:    "Checks manifest files and directories with the code berth run runs; prints\nFILE:LINE: FIELD: MESSAGE for every problem.",
		Example: "  berth validate /etc/kubernetes/manifests\n  berth validate web.yaml -o yaml",
		RunE: func(cmd *cobra.Command, paths []string) error {
			if len(paths) == 0 {
				fmt.Fprintf(stderr, "berth validate: want at least one PATH\nSee '%s --help'.\n", cmd.CommandPath())
				return exitError(2)
			}
			return exit(o.run(paths, stdout, stderr))
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.node, "node-name", "", "node name the pod names get as suffix (default: the lower-cased hostname)")
	o.output = bindOutput(cmd, "also print the defaulted pods: yaml or json", "yaml", "json")
	fs.Int64Var(&o.maxBytes, "max-bytes", podspec.DefaultMaxBytes, "size limit of one manifest file")
	fs.IntVar(&o.maxPods, "max-pods", podspec.DefaultMaxPods, "berth run's --max-pods: a file may hold twice as many documents (at least 16)")
	fs.StringVar(&o.perms, "manifest-permissions", "", "strict: also refuse manifests and directories others than root may write, and manifests holding a Secret others may read, as berth run does (default: not checked)")
	return cmd
}

func (o *validateOptions) run(paths []string, stdout, stderr io.Writer) int {
	output, node, maxBytes, maxPods, perms := &o.output.value, &o.node, &o.maxBytes, &o.maxPods, &o.perms
	if msg := o.output.check(); msg != "" {
		fmt.Fprintf(stderr, "berth validate: %s\n", msg)
		return 2
	}
	name, err := config.NodeName(*node)
	if err != nil {
		fmt.Fprintf(stderr, "berth validate: %v\n", err)
		return 2
	}
	var permissions source.Permissions
	if *perms != "" {
		if permissions, err = source.ParsePermissions(*perms); err != nil {
			fmt.Fprintf(stderr, "berth validate: --manifest-permissions: %v\n", err)
			return 2
		}
	}
	snap := source.ReadPaths(source.ReadOptions{NodeName: name, MaxBytes: *maxBytes, MaxPods: *maxPods, Permissions: permissions}, paths...)
	problemsTo := stdout
	if *output != "" {
		problemsTo = stderr
		if err := printPods(stdout, *output, snap.Pods, snap.Problems); err != nil {
			fmt.Fprintf(stderr, "berth validate: %v\n", err)
			return 1
		}
	}
	for _, p := range snap.Problems {
		fmt.Fprintln(problemsTo, p.Error())
	}
	if len(snap.Problems) > 0 {
		return 1
	}
	return 0
}

// printPods writes the pods as berth would run them: a YAML stream, or
// the JSON List berth pods -o json prints, problems included.
func printPods(w io.Writer, format string, pods []*v1.Pod, problems []podspec.Problem) error {
	if format == "json" {
		doc := podListDoc{APIVersion: "v1", Kind: "List", Items: []v1.Pod{}, Problems: []manifestProblem{}}
		for _, p := range pods {
			doc.Items = append(doc.Items, *withTypeMeta(p))
		}
		for _, p := range problems {
			doc.Problems = append(doc.Problems, manifestProblem{Source: p.Source, Origin: p.Origin, Line: p.Line, Field: p.Field,
				Reason: p.Reason, Message: p.Message, Name: p.Name, Namespace: p.Namespace, Error: p.Error()})
		}
		return (&printer{format: "json"}).print(w, &doc, nil)
	}
	for _, p := range pods {
		b, err := yaml.Marshal(withTypeMeta(p))
		if err != nil {
			return fmt.Errorf("rendering pod %s: %w", p.Name, err)
		}
		if _, err := fmt.Fprintf(w, "---\n%s", b); err != nil {
			return err
		}
	}
	return nil
}

// withTypeMeta gives a pod from a PodList item its kind, so each printed
// document stands alone.
func withTypeMeta(p *v1.Pod) *v1.Pod {
	c := p.DeepCopy()
	c.APIVersion, c.Kind = "v1", "Pod"
	return c
}
