package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// exitError ends a command with an exit code once the command has printed
// its own message: 1 for a runtime, daemon or validation failure, 2 for a
// usage error it found itself.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// exit turns a command's exit code into RunE's error.
func exit(code int) error {
	if code == 0 {
		return nil
	}
	return exitError(code)
}

// usageError is a command step's error caused by the command line itself
// (arguments, flags): the command exits 2 for it, 1 for any other error.
type usageError struct{ error }

// usagef formats a usageError.
func usagef(format string, a ...any) error {
	return usageError{fmt.Errorf(format, a...)}
}

// report prints err on stderr as command cmd's message (berth CMD: ERR)
// and returns the exit code it calls for: 2 for a usageError, else 1.
func report(stderr io.Writer, cmd string, err error) int {
	fmt.Fprintf(stderr, "berth %s: %v\n", cmd, err)
	if _, ok := errors.AsType[usageError](err); ok {
		return 2
	}
	return 1
}

// Execute runs the berth command line args (without the program name) and
// returns the process exit code: 0 when all went well, 1 on a runtime,
// daemon or validation failure, 2 on a usage error (an unknown command or
// flag, bad arguments). version is berth's, stamped into main by the
// Makefile.
func Execute(version string, args []string, stdout, stderr io.Writer) int {
	root := NewRoot(version, stdout, stderr)
	root.SetArgs(singleDashRunFlags(root, args, stderr))
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	if code, ok := errors.AsType[exitError](err); ok {
		return int(code)
	}
	// What cobra and pflag refuse is a usage error: one line, and where
	// to read the usage, as kubectl does.
	fmt.Fprintf(stderr, "%s: %v\nSee '%s --help'.\n", cmd.CommandPath(), err, cmd.CommandPath())
	return 2
}

// NewRoot is berth's command tree. Help goes to stdout, errors to stderr;
// each command prints its own failures and ends with exitError.
func NewRoot(version string, stdout, stderr io.Writer) *cobra.Command {
	var showVersion bool
	root := &cobra.Command{
		Use:   "berth",
		Short: "berth runs Kubernetes Pod manifests on this machine through a CRI runtime, with no API server",
		Long: "berth is a standalone static-pod agent: `berth run` is the daemon, which runs the\n" +
			"Pod manifests of a directory or a URL through a CRI runtime (containerd); the\n" +
			"other commands ask the daemon over its unix socket, like kubectl.",
		SilenceErrors: true,
		SilenceUsage:  true,
		// berth alone is a usage error: print the usage where errors go.
		RunE: func(cmd *cobra.Command, args []string) error {
			if showVersion {
				fmt.Fprintln(stdout, versionString(version))
				return nil
			}
			cmd.SetOut(stderr)
			_ = cmd.Usage()
			return exitError(2)
		},
		Args: cobra.NoArgs,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	// --version is berth's own flag, not cobra's Version: cobra prints
	// its version through text/template, whose reflection would keep
	// every method of every type in the binary alive.
	root.Flags().BoolVarP(&showVersion, "version", "v", false, "print this berth's version, as berth version --client")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return err })
	root.AddCommand(
		newRunCmd(version, stderr),
		newPodsCmd(stdout, stderr),
		newLogsCmd(stdout, stderr),
		newDescribeCmd(stdout, stderr),
		newEventsCmd(stdout, stderr),
		newValidateCmd(stdout, stderr),
		newConfigCmd(stdout, stderr),
		newDoctorCmd(stdout, stderr),
		newNodeCmd(stdout, stderr),
		newVersionCmd(version, stdout, stderr),
	)
	// completion bash|zsh|fish|powershell is cobra's own; added here so
	// the man pages and docs/cli.md list it too.
	root.InitDefaultCompletionCmd()
	return root
}

// singleDashRunFlags rewrites `berth run`'s long flags given with one dash
// (-pod-manifest-path), which Go's flag package accepted and older unit
// files and scripts use, to two, with one deprecation warning on stderr.
// Only names of run's long flags are rewritten: a one-letter -h stays a
// shorthand, and arguments after -- stay as they are.
func singleDashRunFlags(root *cobra.Command, args []string, stderr io.Writer) []string {
	if len(args) == 0 || args[0] != "run" {
		return args
	}
	run, _, err := root.Find(args[:1])
	if err != nil {
		return args
	}
	out := append([]string(nil), args...)
	var rewritten []string
	for i := 1; i < len(out); i++ {
		a := out[i]
		if a == "--" {
			break
		}
		if !strings.HasPrefix(a, "-") || strings.HasPrefix(a, "--") {
			continue
		}
		name, _, _ := strings.Cut(a[1:], "=")
		if len(name) < 2 || run.Flags().Lookup(name) == nil {
			continue
		}
		out[i] = "-" + a
		rewritten = append(rewritten, "--"+name)
	}
	if len(rewritten) > 0 {
		fmt.Fprintf(stderr, "berth run: flags with one dash are deprecated, give them two: %s\n", strings.Join(rewritten, ", "))
	}
	return out
}
