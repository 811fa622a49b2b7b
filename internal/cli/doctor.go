package cli

import (
	"fmt"
	"io"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/berth-agent/berth/internal/config"
	"github.com/berth-agent/berth/internal/doctor"
)

// newDoctorCmd is the preflight: it takes `berth run`'s flags and config
// files (config.BindFlags and config.Resolve, as run does), so it checks
// what the daemon would use.
func newDoctorCmd(stdout, stderr io.Writer) *cobra.Command {
	var configPath string
	var smoke bool
	var pauseImage string
	var output *outputFlag
	s := config.Defaults()
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check that this machine is ready for berth",
		Long: "Checks what berth needs from the machine with the settings `berth run` would use\n" +
			"(the same flags, --config and --kubelet-config): the runtime, its events, CNI, the\n" +
			"pause image, cgroups, the manifest directory, no kubelet on it, the clock, free disk\n" +
			"and the socket; with --run it also starts a sandbox on the pod network and removes\n" +
			"it. One line per check, OK, WARN or FAIL with the fix; exit status 1 when a check\n" +
			"fails. docs/troubleshooting.md explains each check.",
		Example: "  berth doctor --config /etc/berth/berth.yaml\n  berth doctor --run -o json",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if msg := output.check(); msg != "" {
				fmt.Fprintf(stderr, "berth doctor: %s\n", msg)
				return exitError(2)
			}
			resolved, warnings, err := config.Resolve(cmd.Flags(), s, configPath)
			printWarnings(stderr, warnings)
			if err != nil {
				fmt.Fprintf(stderr, "berth doctor: %v\n", err)
				return exitError(2)
			}
			// SIGINT ends the checks early: the smoke sandbox is still
			// removed (doctor.Run removes it whatever happened).
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			results := doctor.Run(ctx, doctorOptions(resolved, smoke, pauseImage))
			print := doctor.PrintText
			if output.value == "json" {
				print = doctor.PrintJSON
			}
			if err := print(stdout, results); err != nil {
				fmt.Fprintf(stderr, "berth doctor: %v\n", err)
				return exitError(1)
			}
			return exit(doctor.Worst(results))
		},
	}
	// doctor's own flags first, then berth run's.
	cmd.Flags().BoolVar(&smoke, "run", false, "also start a sandbox on the pod network, read its address and remove it")
	cmd.Flags().StringVar(&pauseImage, "pause-image", "", "the runtime's sandbox (pause) image to look for; by default the one the runtime reports (containerd 2 reports none)")
	output = bindOutput(cmd, "output format: text (the default) or json", "text", "json")
	config.BindFlags(cmd.Flags(), &s, &configPath)
	cmd.Flags().SortFlags = false
	return cmd
}

// doctorOptions are the checks' settings from berth run's: the runtime and
// image endpoints, the directories and the socket the daemon would use.
// The CNI directories and the pause image are the runtime's own (berth
// does not choose them), so they stay empty for doctor to ask the runtime,
// unless --pause-image names the image a runtime does not report.
func doctorOptions(s config.Settings, smoke bool, pauseImage string) doctor.Options {
	return doctor.Options{
		RuntimeEndpoint: s.ContainerRuntimeEndpoint,
		ImageEndpoint:   s.ImageServiceEndpoint,
		ManifestDir:     s.PodManifestPath,
		RootDir:         s.RootDir,
		PodLogsDir:      s.PodLogsDir,
		Socket:          s.Socket,
		Kubeconfig:      s.Kubeconfig,
		PauseImage:      pauseImage,
		Run:             smoke,
	}
}
