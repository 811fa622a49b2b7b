// Command benchdocs puts the figures of a bench run (bench/results.json, as
// `make bench` writes it) into docs/performance.md, in place of the table
// of the same runtime: the page shows one current table per runtime, and
// its history is the repository's.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/berth-agent/berth/bench"
)

func main() {
	results := flag.String("results", "bench/results.json", "the results of a bench run")
	doc := flag.String("doc", "docs/performance.md", "the page whose generated table of the run's runtime is replaced")
	flag.Parse()
	if err := run(*results, *doc); err != nil {
		fmt.Fprintln(os.Stderr, "benchdocs:", err)
		os.Exit(1)
	}
}

func run(resultsPath, docPath string) error {
	data, err := os.ReadFile(resultsPath)
	if err != nil {
		return fmt.Errorf("read results: %w", err)
	}
	var r bench.Results
	if err := json.Unmarshal(data, &r); err != nil {
		return fmt.Errorf("decode %s: %w", resultsPath, err)
	}
	page, err := os.ReadFile(docPath)
	if err != nil {
		return fmt.Errorf("read page: %w", err)
	}
	updated, err := bench.UpdateDocs(string(page), &r)
	if err != nil {
		return err
	}
	if _, err := bench.ParseDocsTables(updated); err != nil {
		return fmt.Errorf("generated %s does not parse: %w", docPath, err)
	}
	if err := os.WriteFile(docPath, []byte(updated), 0o644); err != nil {
		return fmt.Errorf("write page: %w", err)
	}
	fmt.Printf("benchdocs: %s: the table of %s updated from %s\n", docPath, bench.DocsRuntime(r.Runtime), resultsPath)
	return nil
}
