// Command gen writes berth's man pages from the cobra command tree, one
// page per command (berth.1, berth-run.1, ...): `make man` runs it with
// `go run`, so cobra/doc and go-md2man stay out of the berth binary.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra/doc"

	"github.com/berth-agent/berth/internal/cli"
)

func main() {
	dir := flag.String("man", "bin/man", "directory the man pages are written to")
	version := flag.String("version", "dev", "berth's version, shown in the pages' footer")
	flag.Parse()
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "gen: %v\n", err)
		os.Exit(1)
	}
	root := cli.NewRoot(*version, io.Discard, io.Discard)
	root.DisableAutoGenTag = true
	header := &doc.GenManHeader{Title: "BERTH", Section: "1", Source: "berth " + *version, Manual: "berth manual"}
	if err := doc.GenManTree(root, header, *dir); err != nil {
		fmt.Fprintf(os.Stderr, "gen: writing the man pages to %s: %v\n", *dir, err)
		os.Exit(1)
	}
}
