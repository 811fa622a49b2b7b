package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/source"
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// runValidate checks manifests with the code the daemon runs, so what it
// accepts is exactly what `berth run` would start. Problems go to stdout as
// FILE:LINE: FIELD: MESSAGE; with -o the defaulted pods go to stdout and
// the problems to stderr, so the output stays a valid document. Exit 0 when
// everything is valid, 1 otherwise, 2 on bad usage.
func runValidate(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("berth validate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: berth validate [--node-name NAME] [-o yaml|json] PATH...")
		fmt.Fprintln(stderr, "checks manifest files and directories; prints FILE:LINE: FIELD: MESSAGE for every problem")
		fs.PrintDefaults()
	}
	node := fs.String("node-name", "", "node name the pod names get as suffix (default: the lower-cased hostname)")
	output := fs.String("o", "", "also print the defaulted pods: yaml or json")
	maxBytes := fs.Int64("max-bytes", podspec.DefaultMaxBytes, "size limit of one manifest file")
	maxPods := fs.Int("max-pods", podspec.DefaultMaxPods, "berth run's --max-pods: a file may hold twice as many documents (at least 16)")
	perms := fs.String("manifest-permissions", "", "strict: also refuse manifests and directories others than root may write, and manifests holding a Secret others may read, as berth run does (default: not checked)")
	var paths []string
	// Flags may follow paths, as in `berth validate web.yaml -o yaml`.
	for {
		if err := fs.Parse(args); err != nil {
			if err == flag.ErrHelp {
				return 0
			}
			return 2
		}
		if fs.NArg() == 0 {
			break
		}
		paths = append(paths, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if len(paths) == 0 {
		fs.Usage()
		return 2
	}
	if *output != "" && *output != "yaml" && *output != "json" {
		fmt.Fprintf(stderr, "berth validate: -o %q: want yaml or json\n", *output)
		return 2
	}
	name, err := nodeName(*node)
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
		if err := printPods(stdout, *output, snap.Pods); err != nil {
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

// printPods writes the pods as berth would run them: a YAML stream, or a
// JSON PodList.
func printPods(w io.Writer, format string, pods []*v1.Pod) error {
	if format == "json" {
		list := v1.PodList{}
		list.APIVersion, list.Kind = "v1", "PodList"
		for _, p := range pods {
			list.Items = append(list.Items, *withTypeMeta(p))
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
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
