package cli

import (
	"context"
	"fmt"
	"io"
	"runtime"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/version"
)

// versionOptions are berth version's flags.
type versionOptions struct {
	client     clientFlags
	clientOnly bool
	output     *outputFlag
}

// versionDoc is what -o json and yaml print, in kubectl version's shape.
type versionDoc struct {
	ClientVersion *version.Info `json:"clientVersion"`
	ServerVersion *version.Info `json:"serverVersion,omitempty"`
}

func newVersionCmd(berthVersion string, stdout, stderr io.Writer) *cobra.Command {
	o := &versionOptions{}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version of this berth and of the daemon",
		Long: "Prints the version of this berth (Client Version) and of the daemon it asks\n" +
			"(Server Version), like kubectl version. A daemon that cannot be asked is an\n" +
			"error, exit 1, unless --client.",
		Example: "  berth version\n  berth version --client\n  berth version -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return exit(o.run(berthVersion, stdout, stderr))
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.client.socket, "socket", socketDefault(), "unix socket of the berth daemon (env BERTH_SOCKET)")
	fs.BoolVar(&o.clientOnly, "client", false, "print this berth's version only, without asking the daemon")
	o.output = bindOutput(cmd, "output format: json or yaml", "json", "yaml")
	return cmd
}

func (o *versionOptions) run(berthVersion string, stdout, stderr io.Writer) int {
	if msg := o.output.check(); msg != "" {
		fmt.Fprintf(stderr, "berth version: %s\n", msg)
		return 2
	}
	doc := versionDoc{ClientVersion: &version.Info{
		GitVersion: berthVersion, GoVersion: runtime.Version(), Compiler: runtime.Compiler,
		Platform: runtime.GOOS + "/" + runtime.GOARCH,
	}}
	var serverErr error
	if !o.clientOnly {
		ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
		defer cancel()
		var info version.Info
		if serverErr = newClient(o.client.socket).GetJSON(ctx, "/version", &info); serverErr == nil {
			doc.ServerVersion = &info
		}
	}
	if o.output.value != "" {
		pr, err := o.output.printer()
		if err == nil {
			err = pr.Print(stdout, &doc, nil)
		}
		if err != nil {
			fmt.Fprintf(stderr, "berth version: %v\n", err)
			return 1
		}
	} else {
		fmt.Fprintf(stdout, "Client Version: %s\n", describeVersion(doc.ClientVersion))
		if doc.ServerVersion != nil {
			fmt.Fprintf(stdout, "Server Version: %s\n", describeVersion(doc.ServerVersion))
		}
	}
	// As kubectl: the client's version is printed, then the daemon's
	// absence is an error.
	if serverErr != nil {
		fmt.Fprintf(stderr, "berth version: the daemon's version: %v\n", serverErr)
		return 1
	}
	return 0
}

// describeVersion is one line of berth version: the version, then the Go
// release and platform it was built with.
func describeVersion(v *version.Info) string {
	s := v.GitVersion
	if v.GoVersion != "" || v.Platform != "" {
		s += fmt.Sprintf(" (%s, %s)", v.GoVersion, v.Platform)
	}
	return s
}

// versionString is what `berth --version` prints.
func versionString(version string) string {
	return fmt.Sprintf("berth %s (%s, %s/%s)", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
