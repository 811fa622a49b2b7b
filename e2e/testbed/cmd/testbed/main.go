// Command testbed starts and stops a berth test bed (a private containerd
// with offline test images) that outlives the command, for `make
// testbed-up` / `make testbed-down` and running berth by hand:
//
//	testbed up -dir DIR [-registry]   # prints the CRI endpoint
//	testbed down -dir DIR
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/berth-agent/berth/e2e/testbed"
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
		return fmt.Errorf("usage: testbed up|down -dir DIR")
	}
	fs := flag.NewFlagSet("testbed "+args[0], flag.ContinueOnError)
	dir := fs.String("dir", ".testbed", "the bed's directory")
	registry := fs.Bool("registry", false, "also start a local registry serving busybox (up only)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	switch args[0] {
	case "up":
		b, err := testbed.Start(testbed.Options{Dir: *dir, Registry: *registry})
		if err != nil {
			return err
		}
		fmt.Println(b.Endpoint)
		if b.Registry != "" {
			fmt.Fprintln(os.Stderr, "registry:", b.Registry, "image:", b.RegistryBusyboxImage)
		}
		fmt.Fprintf(os.Stderr, "test bed up in %s (bridge %s, subnet %s); take it down with: testbed down -dir %s\n", b.Dir, b.Bridge, b.Subnet, *dir)
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
