package main

import (
	"fmt"
	"io"
	"runtime"
	"sort"
)

// version is stamped by the Makefile from `git describe`.
var version = "dev"

func runVersion(args []string, stdout, stderr io.Writer) int {
	if len(args) != 0 {
		fmt.Fprintln(stderr, "berth version: takes no arguments")
		return 2
	}
	fmt.Fprintf(stdout, "berth %s (%s, %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return 0
}

// sortedCommandNames keeps usage output stable.
func sortedCommandNames() []string {
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
