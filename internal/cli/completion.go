package cli

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/cli/apiclient"
)

// completionTimeout bounds the daemon's answer to a shell completion: a
// shell waits on it at every TAB.
const completionTimeout = 2 * time.Second

// completionPods are the daemon's pods in the namespace f names (any
// with none), nil when the daemon cannot be asked: a completion shows
// nothing rather than an error.
func completionPods(f *clientFlags) []v1.Pod {
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	pods, err := newClient(f.socket).Pods(ctx)
	if err != nil {
		return nil
	}
	ns := f.ns()
	return slices.DeleteFunc(pods, func(p v1.Pod) bool { return ns != "" && p.Namespace != ns })
}

// completePods completes pod names from the daemon: the first argument
// only unless many (pods, describe take several).
func completePods(f *clientFlags, many bool) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if !many && len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []cobra.Completion
		for _, p := range completionPods(f) {
			if strings.HasPrefix(p.Name, toComplete) && !slices.Contains(args, p.Name) {
				names = append(names, p.Name)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeContainers completes -c with the containers (init ones
// included) of the pod given as the first argument.
func completeContainers(f *clientFlags) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) == 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		pods := completionPods(f)
		pod, err := apiclient.ResolvePod(pods, podArg(args[0]), f.ns())
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var names []cobra.Completion
		for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for _, c := range cs {
				if strings.HasPrefix(c.Name, toComplete) {
					names = append(names, c.Name)
				}
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeNamespaces completes -n with the namespaces of the daemon's
// pods.
func completeNamespaces(f *clientFlags) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		all := clientFlags{socket: f.socket}
		var names []cobra.Completion
		for _, p := range completionPods(&all) {
			if strings.HasPrefix(p.Namespace, toComplete) && !slices.Contains(names, p.Namespace) {
				names = append(names, p.Namespace)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeLabels completes -l with the key=value labels of the daemon's
// pods, sorted.
func completeLabels(f *clientFlags) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var pairs []cobra.Completion
		for _, p := range completionPods(f) {
			for k, v := range p.Labels {
				if kv := k + "=" + v; strings.HasPrefix(kv, toComplete) && !slices.Contains(pairs, kv) {
					pairs = append(pairs, kv)
				}
			}
		}
		slices.Sort(pairs)
		return pairs, cobra.ShellCompDirectiveNoFileComp
	}
}
