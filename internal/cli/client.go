package cli

import (
	"os"
	"strings"
	"time"

	"github.com/berth-agent/berth/internal/cli/apiclient"
)

// defaultSocket is where `berth run` serves its API unless told otherwise;
// BERTH_SOCKET overrides it for every client command, so a shell set up for
// a test bed or the demo needs no --socket on each call.
const defaultSocket = "/run/berth/berth.sock"

func socketDefault() string {
	if s := os.Getenv("BERTH_SOCKET"); s != "" {
		return s
	}
	return defaultSocket
}

// requestTimeout bounds every request but the log stream itself, so a
// wedged daemon makes the CLI fail with a message instead of hanging. A
// variable so tests need not wait it out.
var requestTimeout = 30 * time.Second

// newClient is the daemon's client at socket, whose timeouts name
// requestTimeout.
func newClient(socket string) *apiclient.Client {
	return apiclient.New(apiclient.Options{Socket: socket, Timeout: requestTimeout})
}

// podArgs drops the resource kubectl users put before pod names
// (`describe pod web`, `describe pods web`) and the kind prefix of each
// name (`pods/web`).
func podArgs(args []string) []string {
	if len(args) > 1 && podResource(args[0]) {
		args = args[1:]
	}
	out := make([]string, 0, len(args))
	for _, a := range args {
		out = append(out, podArg(a))
	}
	return out
}

// podArg is a pod name without a pod/, pods/ or po/ prefix.
func podArg(name string) string {
	if kind, rest, ok := strings.Cut(name, "/"); ok && podResource(kind) {
		return rest
	}
	return name
}

// podResource tells kubectl's names of the pod resource.
func podResource(s string) bool { return s == "pod" || s == "pods" || s == "po" }
