package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/internal/cli/apiclient"
)

// logsOptions are berth logs' flags.
type logsOptions struct {
	client                       clientFlags
	container                    string
	follow, previous, timestamps bool
	allContainers, prefix        bool
	tail                         int
	since                        time.Duration
	sinceTime                    string
}

func newLogsCmd(stdout, stderr io.Writer) *cobra.Command {
	o := &logsOptions{}
	cmd := &cobra.Command{
		Use:   "logs POD",
		Short: "Print a container's log",
		Long: "Prints a container's log, read by the daemon from the CRI log files. POD is the\n" +
			"pod's name (web-node1) or its manifest's (web). --all-containers prints each\n" +
			"container's log in turn (init containers first), or with -f their lines as they come.",
		Example:           "  berth logs web\n  berth logs web -c sidecar -f\n  berth logs crasher --previous --tail 20\n  berth logs web --since 10m --timestamps\n  berth logs web --all-containers --prefix",
		ValidArgsFunction: completePods(&o.client, false),
		RunE: func(cmd *cobra.Command, args []string) error {
			return exit(o.run(args, stdout, stderr))
		},
	}
	o.client.bind(cmd, findsPod)
	fs := cmd.Flags()
	fs.IntVar(&o.tail, "tail", -1, "lines of the end of the log to show; -1 shows all")
	fs.StringVarP(&o.container, "container", "c", "", "container name (default: the pod's default container)")
	fs.BoolVarP(&o.follow, "follow", "f", false, "keep printing new lines while the container runs")
	fs.BoolVarP(&o.previous, "previous", "p", false, "the log of the container's previous run (after a crash)")
	fs.BoolVar(&o.timestamps, "timestamps", false, "prefix each line with its RFC 3339 time")
	fs.DurationVar(&o.since, "since", 0, "only lines newer than this (5s, 2m, 3h); not with --since-time")
	fs.StringVar(&o.sinceTime, "since-time", "", "only lines since this RFC 3339 time (YYYY-MM-DDThh:mm:ssZ); not with --since")
	fs.BoolVar(&o.allContainers, "all-containers", false, "the logs of every container of the pod, init containers first")
	fs.BoolVar(&o.prefix, "prefix", false, "begin each line with [pod/NAME/CONTAINER]")
	_ = cmd.RegisterFlagCompletionFunc("container", completeContainers(&o.client))
	return cmd
}

// logStream is one container's log the command prints.
type logStream struct {
	container string
	prefix    string // "" without --prefix
}

// query is the log request's parameters, named as the Kubernetes API's
// pod log subresource names them; "" for an unset --since-time.
func (o *logsOptions) query() (url.Values, error) {
	q := url.Values{}
	q.Set("follow", strconv.FormatBool(o.follow))
	q.Set("previous", strconv.FormatBool(o.previous))
	q.Set("timestamps", strconv.FormatBool(o.timestamps))
	if o.tail >= 0 {
		q.Set("tailLines", strconv.Itoa(o.tail))
	}
	switch {
	case o.since != 0 && o.sinceTime != "":
		return nil, errors.New("at most one of --since-time or --since may be given")
	case o.since < 0:
		return nil, fmt.Errorf("--since %s: want a duration greater than 0", o.since)
	case o.since > 0:
		// Whole seconds, rounded up as kubectl does: --since 1500ms
		// keeps the lines of the last 2 seconds.
		q.Set("sinceSeconds", strconv.FormatInt(int64(math.Ceil(o.since.Seconds())), 10))
	case o.sinceTime != "":
		t, err := time.Parse(time.RFC3339, o.sinceTime)
		if err != nil {
			return nil, fmt.Errorf("--since-time %q: want an RFC 3339 time such as YYYY-MM-DDThh:mm:ssZ: %w", o.sinceTime, err)
		}
		q.Set("sinceTime", t.Format(time.RFC3339))
	}
	return q, nil
}

func (o *logsOptions) run(pos []string, stdout, stderr io.Writer) int {
	q, err := o.check(pos)
	if err != nil {
		return report(stderr, "logs", err)
	}
	// Ctrl-C ends a follow cleanly, without an error message.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	c := newClient(o.client.socket)
	lookup, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	pod, err := c.FindPod(lookup, podArg(pos[0]), o.client.ns())
	if err != nil {
		return report(stderr, "logs", err)
	}
	streams := o.streams(pod, stderr)
	code := 0
	for _, err := range o.printLogs(ctx, c, pod, q, streams, stdout) {
		if err != nil && ctx.Err() == nil {
			code = report(stderr, "logs", err)
		}
	}
	return code
}

// check checks the arguments and flags, and returns the log request's
// parameters.
func (o *logsOptions) check(pos []string) (url.Values, error) {
	if len(pos) != 1 {
		return nil, usagef("want exactly one POD (berth pods lists them)")
	}
	if o.allContainers && o.container != "" {
		return nil, usagef("--all-containers and -c %s: give one or the other", o.container)
	}
	q, err := o.query()
	if err != nil {
		return nil, usageError{err}
	}
	return q, nil
}

// streams are the container logs of pod the command prints: every
// container's with --all-containers (init containers first), -c's, or the
// default container's, noted on stderr when there was a choice.
func (o *logsOptions) streams(pod *v1.Pod, stderr io.Writer) []logStream {
	var streams []logStream
	switch {
	case o.allContainers:
		for _, cs := range [][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for _, ctr := range cs {
				streams = append(streams, logStream{container: ctr.Name})
			}
		}
	case o.container != "":
		streams = []logStream{{container: o.container}}
	default:
		name, note := defaultContainer(pod)
		if note != "" {
			fmt.Fprintln(stderr, note)
		}
		streams = []logStream{{container: name}}
	}
	if len(streams) == 0 {
		// A pod without containers (a manifest berth refused): the
		// daemon's answer says why it has no log.
		streams = []logStream{{}}
	}
	if o.prefix {
		for i := range streams {
			streams[i].prefix = fmt.Sprintf("[pod/%s/%s] ", pod.Name, streams[i].container)
		}
	}
	return streams
}

// printLogs prints the logs of streams with the request's parameters q,
// one after the other, or with -f of several every log at once, their
// lines interleaved as they come; it returns each stream's error.
func (o *logsOptions) printLogs(ctx context.Context, c *apiclient.Client, pod *v1.Pod, q url.Values, streams []logStream, stdout io.Writer) []error {
	out := &lineWriter{w: stdout}
	path := "/pods/" + url.PathEscape(pod.Namespace) + "/" + url.PathEscape(pod.Name) + "/log"
	errs := make([]error, len(streams))
	if o.follow && len(streams) > 1 {
		var wg sync.WaitGroup
		for i, s := range streams {
			wg.Go(func() { errs[i] = printLog(ctx, c, path, q, s, out) })
		}
		wg.Wait()
		return errs
	}
	for i, s := range streams {
		errs[i] = printLog(ctx, c, path, q, s, out)
	}
	return errs
}

// printLog copies the log of one stream, served at path with the
// request's parameters q, to out.
func printLog(ctx context.Context, c *apiclient.Client, path string, q url.Values, s logStream, out *lineWriter) error {
	sq := url.Values{}
	for k, v := range q {
		sq[k] = v
	}
	if s.container != "" {
		sq.Set("container", s.container)
	}
	resp, err := c.Get(ctx, path, sq)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if err := out.copyLines(resp.Body, s.prefix); err != nil && ctx.Err() == nil {
		return fmt.Errorf("reading the log of container %q from the daemon: %w", s.container, err)
	}
	return nil
}

// lineWriter writes whole lines, each with its stream's prefix, so the
// lines of logs followed at once never mix within a line. mu owns w while
// the command streams.
type lineWriter struct {
	mu sync.Mutex
	w  io.Writer
}

// copyLines copies r to the writer a line at a time, prefix first; a last
// line without a newline is written as it is. A line longer than the
// buffer keeps the writer until its end, so no other stream's line lands
// inside it.
func (l *lineWriter) copyLines(r io.Reader, prefix string) (err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	locked := false
	defer func() {
		if locked {
			l.mu.Unlock()
		}
	}()
	for {
		line, rerr := br.ReadSlice('\n')
		if len(line) > 0 {
			if !locked {
				l.mu.Lock()
				locked = true
				if _, err := io.WriteString(l.w, prefix); err != nil {
					return err
				}
			}
			if _, err := l.w.Write(line); err != nil {
				return err
			}
		}
		if errors.Is(rerr, bufio.ErrBufferFull) {
			continue
		}
		if locked {
			l.mu.Unlock()
			locked = false
		}
		switch {
		case rerr == nil:
		case errors.Is(rerr, io.EOF):
			return nil
		default:
			return rerr
		}
	}
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
