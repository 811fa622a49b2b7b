// Command berth is a standalone static-pod agent: it runs Kubernetes Pod
// manifests on this machine through a CRI runtime, with no API server.
// Its commands live in internal/cli.
package main

import (
	"os"

	"github.com/berth-agent/berth/internal/cli"
)

// version is stamped by the Makefile from `git describe`.
var version = "dev"

func main() {
	os.Exit(cli.Execute(version, os.Args[1:], os.Stdout, os.Stderr))
}
