package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	v1 "k8s.io/api/core/v1"
)

func runLogs(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("berth logs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: berth logs POD [-c CONTAINER] [-f] [--tail N] [--previous] [--timestamps] [-n NAMESPACE]")
		fmt.Fprintln(stderr, "\nPrints a container's log, read by the daemon from the CRI log files. POD is the")
		fmt.Fprintln(stderr, "pod's name (web-node1) or its manifest's (web).")
		fs.PrintDefaults()
	}
	var cf clientFlags
	cf.bind(fs)
	var container string
	var follow, previous, timestamps bool
	tail := fs.Int("tail", -1, "lines of the end of the log to show; -1 shows all")
	for _, n := range []string{"c", "container"} {
		fs.StringVar(&container, n, "", "container name (default: the pod's default container)")
	}
	for _, n := range []string{"f", "follow"} {
		fs.BoolVar(&follow, n, false, "keep printing new lines while the container runs")
	}
	for _, n := range []string{"p", "previous"} {
		fs.BoolVar(&previous, n, false, "the log of the container's previous run (after a crash)")
	}
	fs.BoolVar(&timestamps, "timestamps", false, "prefix each line with its RFC 3339 time")
	pos, err := parseInterspersed(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		return 2
	}
	if len(pos) != 1 {
		fmt.Fprintln(stderr, "berth logs: want exactly one POD (berth pods lists them)")
		return 2
	}

	// Ctrl-C ends a follow cleanly, without an error message.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c := newClient(cf.socket)
	lookup, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	pod, err := c.findPod(lookup, pos[0], cf.namespace)
	if err != nil {
		fmt.Fprintf(stderr, "berth logs: %v\n", err)
		return 1
	}
	if container == "" {
		var note string
		container, note = defaultContainer(pod)
		if note != "" {
			fmt.Fprintln(stderr, note)
		}
	}
	q := url.Values{}
	if container != "" {
		q.Set("container", container)
	}
	q.Set("follow", strconv.FormatBool(follow))
	q.Set("previous", strconv.FormatBool(previous))
	q.Set("timestamps", strconv.FormatBool(timestamps))
	if *tail >= 0 {
		q.Set("tailLines", strconv.Itoa(*tail))
	}
	resp, err := c.get(ctx, "/pods/"+url.PathEscape(pod.Namespace)+"/"+url.PathEscape(pod.Name)+"/log", q)
	if err != nil {
		fmt.Fprintf(stderr, "berth logs: %v\n", err)
		return 1
	}
	defer resp.Body.Close()
	if _, err := io.Copy(stdout, resp.Body); err != nil && ctx.Err() == nil {
		fmt.Fprintf(stderr, "berth logs: reading the log from the daemon: %v\n", err)
		return 1
	}
	return 0
}

// defaultContainer is the container kubectl logs picks when none is named:
// the one the kubectl.kubernetes.io/default-container annotation names,
// else the first app container, with a note naming the others when there
// is a choice.
func defaultContainer(pod *v1.Pod) (name, note string) {
	if n := pod.Annotations["kubectl.kubernetes.io/default-container"]; n != "" {
		return n, ""
	}
	if len(pod.Spec.Containers) == 0 {
		return "", ""
	}
	name = pod.Spec.Containers[0].Name
	if len(pod.Spec.Containers)+len(pod.Spec.InitContainers) == 1 {
		return name, ""
	}
	var all []string
	for _, c := range pod.Spec.Containers {
		all = append(all, c.Name)
	}
	for _, c := range pod.Spec.InitContainers {
		all = append(all, c.Name+" (init)")
	}
	return name, fmt.Sprintf("Defaulted container %q out of: %s", name, strings.Join(all, ", "))
}
