// Package cli is berth's command line on cobra and pflag, as kubectl's:
// the command tree (run, pods alias ps, logs, describe, events, validate,
// config, doctor, node, version, completion), one file per command with its
// tests beside it,
// the flags the client commands share (--socket, -n/--namespace,
// -A/--all-namespaces, -o/--output in flags.go), the socket's default and
// the pod arguments (client.go), and shell completion of pod, namespace,
// container and label names from the daemon. The client of the daemon's
// unix socket with its watches is internal/cli/apiclient; the -o document
// formats and the kubectl-like table and describe printers are
// internal/cli/printers.
//
// Exit codes: 0 when all went well, 1 for a runtime, daemon or validation
// failure, 2 for a usage error (unknown command or flag, bad arguments).
// Help goes to stdout; errors go to stderr as one line and where to read
// the usage.
//
// It owns the command names, flags, which output formats each command
// offers, and its messages. It must never import syncloop, podworkers,
// kuberuntime or api: it reads pods, events, problems, logs and the
// daemon's version over the socket only, through apiclient (podspec gives
// it the names of annotations; source reads manifests for validate),
// starts the daemon through internal/daemon and runs the checks of doctor
// through internal/doctor.
// It keeps no state between commands: each Execute builds its own tree,
// whose flag values belong to the command that runs.
package cli
