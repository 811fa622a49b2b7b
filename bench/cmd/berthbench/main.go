// Command berthbench measures a static-pod agent on a private containerd
// test bed and prints one table of figures (`make bench`). By default it
// measures berth (bin/berth); -agent measures another agent, such as the
// kubelet in standalone mode, with the same code: the bench only writes
// manifests, serves a PodList, and watches CRI and /proc. Figures that
// need berth's own /metrics, /readyz or /pods print N/A for such an agent.
//
//	berthbench                          # the full set, about 15 minutes
//	berthbench -quick -only add,remove  # a developer's quick look
//	berthbench -containerd 2.1          # on containerd 2.1 (built and cached on first use)
//	berthbench -agent 'kubelet --pod-manifest-path={manifests} --manifest-url={url}
//	    --http-check-frequency={http_check} --container-runtime-endpoint={endpoint}
//	    --root-dir={root} --hostname-override={node} ...'
//	berthbench -compare 'kubelet ...' -compare-metrics https://127.0.0.1:10250/metrics
//	                                    # berth and the kubelet, figure by figure
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/berth-agent/berth/bench"
	"github.com/berth-agent/berth/e2e/testbed"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "berthbench:", err)
		os.Exit(1)
	}
}

// run parses the flags, starts the bed, measures, prints and cleans up.
// The bed is closed (every pod removed) on every path, Ctrl-C included:
// signals only cancel the context, and further ones are ignored while the
// clean-up runs.
func run() error {
	opts := bench.Options{}
	flag.StringVar(&opts.Template, "agent", bench.DefaultTemplate, "the agent's command line; placeholders: "+bench.Placeholders)
	flag.StringVar(&opts.Bin, "bin", "bin/berth", "the berth binary, for {bin}")
	flag.BoolVar(&opts.BerthAPI, "berth-api", true, "the agent serves berth's /readyz, /metrics and /pods on {listen} (default false when -agent is given)")
	flag.StringVar(&opts.AgentMetrics, "agent-metrics", "", "another agent's Prometheus metrics URL with kubelet_runtime_operations_total (the kubelet's: https://127.0.0.1:PORT/metrics), for its CRI call counts; its certificate is not checked")
	flag.StringVar(&opts.Compare, "compare", "", "an agent measured in the same run (the kubelet), each of the "+strings.Join(bench.ComparedFigures, ", ")+" figures just before the agent's own: its medians fill the kubelet column and set the targets relative to the kubelet's; placeholders as -agent's")
	flag.StringVar(&opts.CompareMetrics, "compare-metrics", "", "the -compare agent's metrics URL, as -agent-metrics")
	only := flag.String("only", "", "comma-separated figures to run (default all): "+strings.Join(bench.Figures, ","))
	flag.BoolVar(&opts.Quick, "quick", false, "fewer runs and shorter idle windows, to iterate")
	goBench := flag.String("gobench", "./internal/podspec/,./internal/source/,./internal/criclient/", "comma-separated packages whose Go benchmarks are reported")
	jsonPath := flag.String("json", "bench/results.json", "where to write the results as JSON (\"\": nowhere)")
	flag.BoolVar(&opts.Keep, "keep", false, "keep the work dir (manifests, agent log) and print where it is")
	verbose := flag.Bool("v", false, "debug logging")
	containerd := flag.String("containerd", os.Getenv(testbed.EnvContainerd), "the test bed's containerd: 1.6 (Debian's), 1.7, 2.1 or an exact release (default $"+testbed.EnvContainerd+", else 1.6)")
	flag.Parse()

	given := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if given["agent"] && !given["berth-api"] {
		opts.BerthAPI = false
	}
	if *only != "" {
		opts.Only = strings.Split(*only, ",")
		for _, f := range opts.Only {
			if !slices.Contains(bench.Figures, f) {
				return fmt.Errorf("-only: unknown figure %q (known: %s)", f, strings.Join(bench.Figures, ","))
			}
		}
	}
	if *goBench != "" {
		opts.GoBench = strings.Split(*goBench, ",")
	}
	level := slog.LevelInfo
	if *verbose {
		level = slog.LevelDebug
	}
	opts.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	slog.SetDefault(opts.Log)
	var err error
	if opts.RepoDir, err = os.Getwd(); err != nil {
		return fmt.Errorf("working directory: %w", err)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	started := time.Now()
	opts.Log.Info("starting a private test bed")
	bed, err := testbed.Start(testbed.Options{Containerd: *containerd, Registry: bench.NeedsRegistry(opts.Only)})
	if err != nil {
		return fmt.Errorf("test bed: %w", err)
	}
	opts.Log.Info("test bed up", "containerd", bed.ContainerdVersion)
	res, runErr := bench.Run(ctx, bed, opts)
	if ctx.Err() != nil {
		opts.Log.Warn("interrupted: cleaning up, please wait")
	}
	opts.Log.Info("closing the test bed")
	if err := bed.Close(); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("close test bed: %w", err))
	}
	if res == nil {
		return runErr
	}
	res.Duration = time.Since(started).Round(time.Second).String()
	if err := res.Print(os.Stdout); err != nil {
		return err
	}
	if *jsonPath != "" {
		if err := res.WriteJSON(*jsonPath); err != nil {
			return err
		}
	}
	if runErr == nil && res.Failed() {
		runErr = errors.New("some figures failed (see the notes)")
	}
	return runErr
}
