// Command testbed starts and stops a berth test bed (a private containerd
// with offline test images) that outlives the command, for `make
// testbed-up` / `make testbed-down` and running berth by hand:
//
//	testbed up -dir DIR [-registry] [-containerd 1.6|1.7|2.1|2.3|2.4|crio]   # prints the CRI endpoint; a no-op when up
//	testbed down -dir DIR             # a no-op when down
//	testbed build VERSION...          # builds and caches runtimes; a no-op for those cached and for 1.6
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/berth-agent/berth/e2e/testbed"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "testbed:", err)
		os.Exit(1)
	}
}

// run dispatches the subcommand.
func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: testbed up|down -dir DIR, or testbed build VERSION [VERSION ...]")
	}
	fs := flag.NewFlagSet("testbed "+args[0], flag.ContinueOnError)
	dir := fs.String("dir", ".testbed", "the bed's directory")
	registry := fs.Bool("registry", false, "also start a local registry serving busybox (up only)")
	containerd := fs.String("containerd", os.Getenv(testbed.EnvContainerd), "containerd version: 1.6 (Debian's), 1.7, 2.1, 2.3, 2.4, an exact release or crio, built and cached on first use (up only; default $"+testbed.EnvContainerd+", else 1.6)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch args[0] {
	case "build":
		for _, name := range fs.Args() {
			started := time.Now()
			if err := testbed.Prepare(name); err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "runtime %s ready in %s\n", name, time.Since(started).Round(time.Second))
		}
		return nil
	case "up":
		if b, err := testbed.Attach(*dir); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, verr := b.Runtime().Version(ctx, &runtimeapi.VersionRequest{})
			cancel()
			if verr == nil {
				fmt.Println(b.Endpoint)
				fmt.Fprintf(os.Stderr, "test bed already up in %s (containerd %s)\n", b.Dir, b.ContainerdVersion)
				return nil
			}
			fmt.Fprintf(os.Stderr, "test bed in %s does not answer (%v): replacing it\n", b.Dir, verr)
			if err := b.Close(); err != nil {
				return fmt.Errorf("tear down the stale bed: %w", err)
			}
		}
		b, err := testbed.Start(testbed.Options{Dir: *dir, Registry: *registry, Containerd: *containerd})
		if err != nil {
			return err
		}
		fmt.Println(b.Endpoint)
		if b.Registry != "" {
			fmt.Fprintln(os.Stderr, "registry:", b.Registry, "image:", b.RegistryBusyboxImage)
		}
		fmt.Fprintf(os.Stderr, "test bed up in %s (containerd %s, bridge %s, subnet %s); take it down with: testbed down -dir %s\n", b.Dir, b.ContainerdVersion, b.Bridge, b.Subnet, *dir)
		return nil
	case "down":
		if _, err := os.Stat(*dir); os.IsNotExist(err) {
			return nil
		}
		b, err := testbed.Attach(*dir)
		if err != nil {
			return err
		}
		return b.Close()
	default:
		return fmt.Errorf("unknown command %q: want up or down", args[0])
	}
}
