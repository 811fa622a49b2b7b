// Command berth is a standalone static-pod agent: it runs Kubernetes Pod
// manifests on this machine through a CRI runtime, with no API server.
package main

import (
	"fmt"
	"io"
	"os"
)

// command is one subcommand; it returns the process exit code so tests can
// run it in-process.
type command struct {
	summary string
	run     func(args []string, stdout, stderr io.Writer) int
}

// commands is the CLI's table; each entry lives in a file of its own name.
var commands = map[string]command{
	"run":      {"run the agent (the daemon)", runRun},
	"pods":     {"list pods and rejected manifests (alias ps)", runPods},
	"logs":     {"print a container's log", runLogs},
	"describe": {"show a pod's containers, conditions and events", runDescribe},
	"validate": {"check manifests and print every problem", runValidate},
	"version":  {"print the version", runVersion},
}

func main() {
	os.Exit(dispatch(os.Args[1:], os.Stdout, os.Stderr))
}

// dispatch picks the subcommand so main stays a one-liner and tests can call
// the CLI without a subprocess.
func dispatch(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(stderr)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	name := args[0]
	if alias, ok := aliases[name]; ok {
		name = alias
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(stderr, "berth: unknown command %q\n", args[0])
		usage(stderr)
		return 2
	}
	return cmd.run(args[1:], stdout, stderr)
}

// aliases maps kubectl-style short names onto commands.
var aliases = map[string]string{"ps": "pods"}

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: berth COMMAND [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, name := range sortedCommandNames() {
		fmt.Fprintf(w, "  %-10s %s\n", name, commands[name].summary)
	}
}
