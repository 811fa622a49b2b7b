package doctor

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"sigs.k8s.io/yaml"
)

// Agent is another process that runs static pods from the same manifest
// directory: a kubelet, or a second berth. Both would start every pod of
// the directory, each fighting the other's containers.
type Agent struct {
	PID  int    `json:"pid"`
	Kind string `json:"kind"` // "kubelet" or "berth"
	// ManifestPath is the path it reads, as it names it.
	ManifestPath string `json:"manifestPath"`
	// From says where that path comes from: a flag, a config file's
	// staticPodPath, or berth's default.
	From string `json:"from"`
}

func (a Agent) String() string {
	return fmt.Sprintf("%s (PID %d) runs the static pods of %s (%s)", a.Kind, a.PID, a.ManifestPath, a.From)
}

// Bounds of what FindOtherAgents reads of another process: its command
// line (the kernel's is at most a few hundred KiB, a kubelet's a few KiB)
// and the config files it names (a kubelet's is a few KiB).
const (
	maxCmdlineBytes = 256 << 10
	maxConfigBytes  = 1 << 20
)

// berthDefaultManifestPath is berth run's --pod-manifest-path default.
const berthDefaultManifestPath = "/etc/kubernetes/manifests"

// FindOtherAgents returns the processes under procRoot (normally /proc),
// other than this one, that run static pods from manifestDir: a kubelet
// whose --pod-manifest-path, or the staticPodPath of its --config file
// (and --config-dir drop-ins), is that directory, and a `berth run` whose
// --pod-manifest-path (or config file, or default) is. The daemon refuses
// to start on one; berth doctor reports them.
//
// It is cheap and safe to call at start: it reads each process's
// cmdline and cwd link, and only for a kubelet or berth the config files
// it names, each bounded, opened without blocking and only if regular.
// Paths are compared after resolving relative ones against the process's
// working directory and every symbolic link, in this process's mount
// namespace. A process whose path cannot be told (an unreadable config
// file) is returned with that in its From and an empty ManifestPath, so
// the caller can say so; processes that exit meanwhile are skipped. The
// error is for a procRoot that cannot be listed.
func FindOtherAgents(procRoot, manifestDir string) ([]Agent, error) {
	return findAgents(procRoot, manifestDir, os.Getpid())
}

// findAgents is FindOtherAgents with the PID to skip.
func findAgents(procRoot, manifestDir string, self int) ([]Agent, error) {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return nil, fmt.Errorf("list processes in %s: %w", procRoot, err)
	}
	target := resolvePath("/", manifestDir)
	var out []Agent
	for _, en := range entries {
		pid, err := strconv.Atoi(en.Name())
		if err != nil || pid <= 0 || pid == self {
			continue
		}
		dir := filepath.Join(procRoot, en.Name())
		cmdline, err := readBounded(filepath.Join(dir, "cmdline"), maxCmdlineBytes)
		if err != nil {
			continue
		}
		kind, args := agentCommand(cmdline)
		if kind == "" {
			continue
		}
		cwd, err := os.Readlink(filepath.Join(dir, "cwd"))
		if err != nil || !filepath.IsAbs(cwd) {
			cwd = "/"
		}
		a := Agent{PID: pid, Kind: kind}
		var path string
		if kind == "kubelet" {
			path, a.From, err = kubeletManifestPath(args, cwd)
		} else {
			path, a.From, err = berthManifestPath(args, cwd)
		}
		switch {
		case err != nil:
			a.From = err.Error()
			out = append(out, a)
		case path != "" && resolvePath(cwd, path) == target:
			a.ManifestPath = path
			out = append(out, a)
		}
	}
	slices.SortFunc(out, func(a, b Agent) int { return a.PID - b.PID })
	return out, nil
}

// agentCommand tells from a NUL-separated command line whether the
// process is a kubelet (kubelet, or hyperkube kubelet) or a `berth run`,
// and returns its arguments after the command; "" for any other process.
func agentCommand(cmdline []byte) (kind string, args []string) {
	argv := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if len(argv) == 0 {
		return "", nil
	}
	switch filepath.Base(argv[0]) {
	case "kubelet":
		return "kubelet", argv[1:]
	case "hyperkube":
		if len(argv) > 1 && argv[1] == "kubelet" {
			return "kubelet", argv[2:]
		}
	case "berth":
		if len(argv) > 1 && argv[1] == "run" {
			return "berth", argv[2:]
		}
	}
	return "", nil
}

// flagValue returns the last value of flag name in args, in any form Go's
// flag package and pflag take: -name=v, --name=v, -name v, --name v.
func flagValue(args []string, name string) (string, bool) {
	var value string
	found := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		trimmed := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if trimmed == a {
			continue
		}
		if v, ok := strings.CutPrefix(trimmed, name+"="); ok {
			value, found = v, true
		} else if trimmed == name && i+1 < len(args) {
			value, found = args[i+1], true
			i++
		}
	}
	return value, found
}

// kubeletManifestPath is the static pod path a kubelet runs with: its
// --pod-manifest-path flag, which wins over its config as kubelet flags
// do, else the staticPodPath of its --config file (relative to that file's
// directory, as the kubelet resolves it), overridden by its --config-dir
// drop-ins (*.conf, in name order). "" when it runs no static pods.
func kubeletManifestPath(args []string, cwd string) (path, from string, err error) {
	if v, ok := flagValue(args, "pod-manifest-path"); ok {
		return v, "--pod-manifest-path", nil
	}
	var files []string
	if cfg, ok := flagValue(args, "config"); ok && cfg != "" {
		files = append(files, absPath(cwd, cfg))
	}
	if dropins, ok := flagValue(args, "config-dir"); ok && dropins != "" {
		dir := absPath(cwd, dropins)
		matches, _ := filepath.Glob(filepath.Join(dir, "*.conf"))
		slices.Sort(matches)
		files = append(files, matches...)
	}
	for _, f := range files {
		c, err := readAgentConfig(f)
		if err != nil {
			return "", "", fmt.Errorf("kubelet config %s: %w", f, err)
		}
		if c.StaticPodPath != "" {
			path, from = absPath(filepath.Dir(f), c.StaticPodPath), "staticPodPath in "+f
		}
	}
	return path, from, nil
}

// berthManifestPath is the manifest path a `berth run` runs with, by its
// own precedence: --pod-manifest-path, else its --config file's
// staticPodPath, else that of its kubelet config (--kubelet-config, or
// the config file's kubeletConfig), else the default. berth resolves
// relative paths against its working directory. "" when it is off.
func berthManifestPath(args []string, cwd string) (path, from string, err error) {
	if v, ok := flagValue(args, "pod-manifest-path"); ok {
		return v, "--pod-manifest-path", nil
	}
	kubeletConfig, _ := flagValue(args, "kubelet-config")
	if cfg, ok := flagValue(args, "config"); ok && cfg != "" {
		f := absPath(cwd, cfg)
		c, err := readAgentConfig(f)
		if err != nil {
			return "", "", fmt.Errorf("berth config %s: %w", f, err)
		}
		if c.StaticPodPath != "" {
			return c.StaticPodPath, "staticPodPath in " + f, nil
		}
		if kubeletConfig == "" {
			kubeletConfig = c.KubeletConfig
		}
	}
	if kubeletConfig != "" {
		f := absPath(cwd, kubeletConfig)
		c, err := readAgentConfig(f)
		if err != nil {
			return "", "", fmt.Errorf("kubelet config %s: %w", f, err)
		}
		if c.StaticPodPath != "" {
			return c.StaticPodPath, "staticPodPath in " + f, nil
		}
	}
	return berthDefaultManifestPath, "the default --pod-manifest-path", nil
}

// agentConfig is what FindOtherAgents reads of a kubelet or berth config
// file: both name the static pod path staticPodPath.
type agentConfig struct {
	StaticPodPath string `json:"staticPodPath"`
	KubeletConfig string `json:"kubeletConfig"`
}

// parseAgentConfig reads the static pod path of a config file's YAML or
// JSON, ignoring every other field.
func parseAgentConfig(data []byte) (agentConfig, error) {
	var c agentConfig
	if err := yaml.Unmarshal(data, &c); err != nil {
		return agentConfig{}, err
	}
	return c, nil
}

func readAgentConfig(path string) (agentConfig, error) {
	data, err := readBounded(path, maxConfigBytes)
	if err != nil {
		return agentConfig{}, err
	}
	return parseAgentConfig(data)
}

// readBounded reads at most limit bytes of a regular file (or a /proc
// file, which stat calls regular), opening it without blocking so a FIFO
// put in its place cannot hang the caller.
func readBounded(path string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return data, nil
}

// absPath joins a relative path to base.
func absPath(base, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(base, p)
}

// resolvePath is p made absolute against base with every symbolic link
// resolved; a path that does not exist (yet) is compared as written.
func resolvePath(base, p string) string {
	abs := absPath(base, p)
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	return abs
}

// checkOtherAgents: no kubelet and no other berth runs static pods from
// the manifest directory. serving is the PID of the berth that serves
// --socket (0: none): that berth is the one doctor checks, not another,
// so doctor run beside the installed service does not fail on it.
func checkOtherAgents(procRoot, manifestDir string, serving int) Result {
	r := Result{Check: "other-agents"}
	if manifestDir == "" {
		r.Status, r.Message = OK, "no --pod-manifest-path: no directory to share"
		return r
	}
	agents, err := FindOtherAgents(procRoot, manifestDir)
	if err != nil {
		r.Status, r.Message = Warn, err.Error()
		r.Fix = "run berth doctor as root on the host itself, where " + procRoot + " lists every process"
		return r
	}
	var same, unknown []string
	kinds := map[string]bool{}
	var this string
	for _, a := range agents {
		if a.Kind == "berth" && a.PID == serving {
			this = fmt.Sprintf("berth (PID %d), the one serving the socket, runs the static pods of %s", a.PID, manifestDir)
			continue
		}
		if a.ManifestPath == "" {
			unknown = append(unknown, fmt.Sprintf("%s (PID %d): %s", a.Kind, a.PID, a.From))
			continue
		}
		same = append(same, a.String())
		kinds[a.Kind] = true
	}
	switch {
	case len(same) > 0:
		r.Status = Fail
		r.Message = strings.Join(same, "; ") + ": both would start every pod of " + manifestDir + " and fight over their containers"
		var fixes []string
		if kinds["kubelet"] {
			fixes = append(fixes, "stop and disable the kubelet (systemctl disable --now kubelet), or take staticPodPath out of its config")
		}
		if kinds["berth"] {
			fixes = append(fixes, "stop the other berth (systemctl stop berth, or kill the PID named)")
		}
		r.Fix = strings.Join(fixes, "; ") + "; or give berth another --pod-manifest-path"
	case len(unknown) > 0:
		r.Status = Warn
		r.Message = "could not tell which directory these run static pods from: " + strings.Join(unknown, "; ")
		r.Fix = "make sure none of them uses " + manifestDir
	case this != "":
		r.Status, r.Message = OK, this+"; no kubelet or other berth does"
	default:
		r.Status, r.Message = OK, "no kubelet or other berth runs static pods from "+manifestDir
	}
	return r
}
