package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os/user"
	"reflect"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/berth-agent/berth/internal/api"
	"github.com/berth-agent/berth/internal/gc"
	"github.com/berth-agent/berth/internal/images"
	"github.com/berth-agent/berth/internal/logging"
	"github.com/berth-agent/berth/internal/nodestatus"
	"github.com/berth-agent/berth/internal/podsapi"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/source"
	"github.com/berth-agent/berth/internal/source/httpsource"
	"github.com/berth-agent/berth/internal/statusreport"
	"github.com/berth-agent/berth/internal/syncloop"
)

// Settings are berth run's settings. Field names in the config file follow
// the kubelet's KubeletConfiguration where one exists, so a kubelet config
// file's static-pod fields carry over unchanged.
type Settings struct {
	PodManifestPath          string              `json:"staticPodPath,omitempty"`
	PodManifestSigners       string              `json:"staticPodPathAllowedSigners,omitempty"`
	ManifestURL              string              `json:"staticPodURL,omitempty"`
	ManifestURLHeader        map[string][]string `json:"staticPodURLHeader,omitempty"`
	ManifestURLCA            string              `json:"staticPodURLCA,omitempty"`
	ManifestURLSigners       string              `json:"staticPodURLAllowedSigners,omitempty"`
	ManifestPermissions      string              `json:"staticPodPathPermissions,omitempty"`
	ContainerRuntimeEndpoint string              `json:"containerRuntimeEndpoint,omitempty"`
	ImageServiceEndpoint     string              `json:"imageServiceEndpoint,omitempty"`
	HostnameOverride         string              `json:"hostnameOverride,omitempty"`
	NodeIP                   string              `json:"nodeIP,omitempty"`
	RootDir                  string              `json:"rootDir,omitempty"`
	PodLogsDir               string              `json:"podLogsDir,omitempty"`
	FileCheckFrequency       metav1.Duration     `json:"fileCheckFrequency,omitempty"`
	HTTPCheckFrequency       metav1.Duration     `json:"httpCheckFrequency,omitempty"`
	HTTPCheckBackoffMax      metav1.Duration     `json:"httpCheckBackOffMax,omitempty"`
	SyncFrequency            metav1.Duration     `json:"syncFrequency,omitempty"`
	RuntimeRequestTimeout    metav1.Duration     `json:"runtimeRequestTimeout,omitempty"`
	Listen                   string              `json:"listen,omitempty"`
	Socket                   string              `json:"socket,omitempty"`
	// SocketGroup is the group (name or gid) whose members may use the
	// socket beside root; "" is root only.
	SocketGroup string `json:"socketGroup,omitempty"`
	ListenPods  string `json:"listenPods,omitempty"`
	// PodsAPI serves the kubelet's local pods API (internal/podsapi) on
	// PodsAPISocket; false is written, so the field is too.
	PodsAPI                 bool            `json:"podsAPI"`
	MaxPods                 int             `json:"maxPods,omitempty"`
	MaxParallelPodStarts    int             `json:"maxParallelPodStarts,omitempty"`
	ClusterDNS              []string        `json:"clusterDNS,omitempty"`
	ClusterDomain           string          `json:"clusterDomain,omitempty"`
	ResolvConf              string          `json:"resolvConf,omitempty"`
	CrashLoopBackoffInitial metav1.Duration `json:"crashLoopBackOffInitial,omitempty"`
	CrashLoopBackoffMax     metav1.Duration `json:"crashLoopBackOffMax,omitempty"`
	LogLevel                string          `json:"logLevel,omitempty"`
	LogFormat               string          `json:"logFormat,omitempty"`
	KubeletConfig           string          `json:"kubeletConfig,omitempty"`
	// Labels are this node's labels: config file only, for the {label.KEY}
	// placeholders of --manifest-url.
	Labels map[string]string `json:"labels,omitempty"`

	// Automatic rollback of a bad edit (internal/rollback): 0 disables
	// it, so the fields are written even when zero.
	FileRollbackAfter metav1.Duration `json:"fileRollbackAfter"`
	HTTPRollbackAfter metav1.Duration `json:"httpRollbackAfter"`
	RollbackMinReady  metav1.Duration `json:"rollbackMinReady"`

	// The status report to a fleet's server (internal/statusreport).
	StatusURL       string              `json:"statusURL,omitempty"`
	StatusURLHeader map[string][]string `json:"statusURLHeader,omitempty"`
	StatusURLCA     string              `json:"statusURLCA,omitempty"`
	StatusPeriod    metav1.Duration     `json:"statusPeriod,omitempty"`

	// Disk garbage collection (internal/gc, scheduled by internal/syncloop/gcloop.go),
	// named like the kubelet's.
	MinimumContainerTTLDuration       metav1.Duration `json:"minimumContainerTTLDuration"`
	MaximumDeadContainersPerContainer int             `json:"maximumDeadContainersPerContainer"`
	MaximumDeadContainers             int             `json:"maximumDeadContainers"`
	ContainerLogMaxSize               string          `json:"containerLogMaxSize,omitempty"`
	ContainerLogMaxFiles              int             `json:"containerLogMaxFiles,omitempty"`
	ContainerLogMaxWorkers            int             `json:"containerLogMaxWorkers,omitempty"`
	ContainerLogMonitorInterval       metav1.Duration `json:"containerLogMonitorInterval"`
	ImageGCHighThresholdPercent       int             `json:"imageGCHighThresholdPercent"`
	ImageGCLowThresholdPercent        int             `json:"imageGCLowThresholdPercent"`
	ImageMinimumGCAge                 metav1.Duration `json:"imageMinimumGCAge"`
	// ImagePreloadDir holds the image archives and lists berth preloads
	// (internal/preload); "" is <root-dir>/images.
	ImagePreloadDir string `json:"imagePreloadDir,omitempty"`

	// The kubelet's image credential provider plugins (internal/images,
	// credprovider.go here), named like the kubelet's flags; the timeout
	// is berth's bound on one run of a plugin.
	ImageCredentialProviderConfig  string          `json:"imageCredentialProviderConfig,omitempty"`
	ImageCredentialProviderBinDir  string          `json:"imageCredentialProviderBinDir,omitempty"`
	ImageCredentialProviderTimeout metav1.Duration `json:"imageCredentialProviderTimeout,omitempty"`

	ShutdownSettings `json:",inline"`
	ClusterSettings  `json:",inline"`
}

// Defaults are the kubelet's defaults where berth shares a setting.
func Defaults() Settings {
	return Settings{
		PodManifestPath:          "/etc/kubernetes/manifests",
		ContainerRuntimeEndpoint: "unix:///run/containerd/containerd.sock",
		RootDir:                  "/var/lib/berth",
		PodLogsDir:               "/var/log/pods",
		ManifestPermissions:      string(source.PermissionsStrict),
		FileCheckFrequency:       metav1.Duration{Duration: 20 * time.Second},
		HTTPCheckFrequency:       metav1.Duration{Duration: 20 * time.Second},
		HTTPCheckBackoffMax:      metav1.Duration{Duration: httpsource.DefaultHTTPBackoffMax},
		SyncFrequency:            metav1.Duration{Duration: time.Minute},
		RuntimeRequestTimeout:    metav1.Duration{Duration: 2 * time.Minute},
		Listen:                   "127.0.0.1:10255",
		Socket:                   "/run/berth/berth.sock",
		ListenPods:               string(api.ExposeNone),
		// On, as the kubelet's PodsAPI feature gate is from 1.37: its
		// socket is root's alone (or --socket-group's), serving what
		// --socket serves them already, and idle it costs a goroutine.
		PodsAPI:                 true,
		MaxPods:                 110,
		ResolvConf:              "/etc/resolv.conf",
		CrashLoopBackoffInitial: metav1.Duration{Duration: 10 * time.Second},
		CrashLoopBackoffMax:     metav1.Duration{Duration: 5 * time.Minute},
		LogLevel:                "info",
		LogFormat:               "auto",
		// Off for files: whoever edits one is at the machine to see the
		// result, and control-plane manifests (kubeadm's) may take long
		// to become Ready while their peers come up. On for the URL: a
		// fleet's edit reaches devices nobody watches.
		HTTPRollbackAfter: metav1.Duration{Duration: 5 * time.Minute},
		RollbackMinReady:  metav1.Duration{Duration: 10 * time.Second},
		StatusPeriod:      metav1.Duration{Duration: statusreport.DefaultPeriod},

		MaximumDeadContainersPerContainer: 1,
		MaximumDeadContainers:             -1,
		ContainerLogMaxSize:               "10Mi",
		ContainerLogMaxFiles:              5,
		ContainerLogMaxWorkers:            1,
		ContainerLogMonitorInterval:       metav1.Duration{Duration: 10 * time.Second},
		ImageGCHighThresholdPercent:       85,
		ImageGCLowThresholdPercent:        80,
		ImageMinimumGCAge:                 metav1.Duration{Duration: 2 * time.Minute},

		ImageCredentialProviderTimeout: metav1.Duration{Duration: images.DefaultCredentialProviderTimeout},

		ClusterSettings: ClusterSettings{
			NodeStatusReportFrequency: metav1.Duration{Duration: nodestatus.DefaultReportFrequency},
			RotateCertificates:        true,
			HealthzBindAddress:        DefaultHealthzBindAddress,
			HealthzPort:               DefaultHealthzPort,
		},
	}
}

// BindFlags registers every setting as a flag writing into s, named like the
// kubelet's flag where one exists.
func BindFlags(fs *pflag.FlagSet, s *Settings, configPath *string) {
	fs.StringVar(configPath, "config", "", "config file (berth's own, or a kubelet KubeletConfiguration whose static-pod fields are used)")
	fs.StringVar(&s.PodManifestPath, "pod-manifest-path", s.PodManifestPath, "directory (or single file) of static pod manifests; \"\" disables the file source")
	fs.StringVar(&s.PodManifestSigners, "pod-manifest-allowed-signers", s.PodManifestSigners, "allowed signers file, as --manifest-url-allowed-signers: each manifest file then runs only with a valid <file>.sig beside it")
	fs.StringVar(&s.ManifestURL, "manifest-url", s.ManifestURL, "URL serving a Pod, PodList or multi-document YAML of pods; {node}, {arch} and {label.KEY} (the config file's labels) are replaced")
	fs.Var(headerFlag{&s.ManifestURLHeader}, "manifest-url-header", "HTTP header for --manifest-url as Key:Value (repeatable)")
	fs.StringVar(&s.ManifestURLCA, "manifest-url-ca", s.ManifestURLCA, "PEM file of the CAs --manifest-url's certificate must chain to, instead of the system's")
	fs.StringVar(&s.ManifestURLSigners, "manifest-url-allowed-signers", s.ManifestURLSigners, "allowed signers file (ssh-keygen's format, or public keys one a line): --manifest-url then runs only bodies signed by one of them, in namespace berth-manifest, with a serial no older than the last one accepted from it or for any pod, ConfigMap or Secret it defines or replaces")
	fs.StringVar(&s.ManifestPermissions, "manifest-permissions", s.ManifestPermissions, "strict: refuse manifests (and their directories) not owned by root or writable by group or others, and manifests holding a Secret readable by group or others; warn: log them and read them anyway")
	fs.StringVar(&s.ContainerRuntimeEndpoint, "container-runtime-endpoint", s.ContainerRuntimeEndpoint, "CRI runtime endpoint (unix socket)")
	fs.StringVar(&s.ImageServiceEndpoint, "image-service-endpoint", s.ImageServiceEndpoint, "CRI image endpoint (default: the runtime endpoint)")
	fs.StringVar(&s.HostnameOverride, "hostname-override", s.HostnameOverride, "node name used in pod names (default: the lower-cased hostname)")
	fs.StringVar(&s.NodeIP, "node-ip", s.NodeIP, "node IP reported as hostIP (default: the first global unicast address)")
	fs.StringVar(&s.RootDir, "root-dir", s.RootDir, "directory for berth's state: per-pod (emptyDirs, etc-hosts) and the last good version of each manifest")
	fs.StringVar(&s.ImagePreloadDir, "image-preload-dir", s.ImagePreloadDir, "directory of image archives (docker save or OCI layout tarballs, plain, gzip or zstd) imported into the runtime at start and when added, and *.txt lists of images pulled at start; empty is <root-dir>/images (see docs/air-gapped.md)")
	fs.StringVar(&s.PodLogsDir, "pod-logs-dir", s.PodLogsDir, "root of the CRI container log layout")
	durationVar(fs, &s.FileCheckFrequency, "file-check-frequency", "full rescan period of the manifest directory (changes are also watched)")
	durationVar(fs, &s.HTTPCheckFrequency, "http-check-frequency", "poll period of --manifest-url (jittered by ±10%)")
	durationVar(fs, &s.HTTPCheckBackoffMax, "http-check-backoff-max", "longest wait between polls of --manifest-url after errors (the wait doubles from the period)")
	durationVar(fs, &s.SyncFrequency, "sync-frequency", "period of the full resync of every pod")
	durationVar(fs, &s.RuntimeRequestTimeout, "runtime-request-timeout", "timeout of every CRI call")
	fs.StringVar(&s.Listen, "listen", s.Listen, "TCP address of the local API (\"\" disables it)")
	fs.StringVar(&s.Socket, "socket", s.Socket, "unix socket of the local API and the CLI (\"\" disables it)")
	fs.StringVar(&s.SocketGroup, "socket-group", s.SocketGroup, "group (name or gid) whose members may use --socket as root does; \"\" is root only")
	fs.BoolVar(&s.PodsAPI, "pods-api", s.PodsAPI, "serve the kubelet's local pods API (gRPC, KEP-4188) on <root-dir>/"+podsapi.DirName+"/"+podsapi.SocketName+", to root alone (or also --socket-group)")
	fs.StringVar(&s.ListenPods, "listen-pods", s.ListenPods, "pod data the --listen address serves to every local user: none, redacted (pods without env values, commands, annotation values, messages) or full (pods, events, problems)")
	fs.IntVar(&s.MaxPods, "max-pods", s.MaxPods, "pods beyond this many are rejected")
	fs.IntVar(&s.MaxParallelPodStarts, "max-parallel-pod-starts", s.MaxParallelPodStarts, "most pods started at once (sandbox and containers up to running), higher priority first; fewer while the runtime is slow; 0: two per CPU")
	fs.Var(listFlag{&s.ClusterDNS}, "cluster-dns", "DNS server IP for dnsPolicy ClusterFirst (repeatable or comma-separated)")
	fs.StringVar(&s.ClusterDomain, "cluster-domain", s.ClusterDomain, "cluster domain for dnsPolicy ClusterFirst search paths")
	fs.StringVar(&s.ResolvConf, "resolv-conf", s.ResolvConf, "host resolver file for pods' DNS (\"\" disables)")
	durationVar(fs, &s.CrashLoopBackoffInitial, "crashloop-backoff-initial", "first restart delay of a crashing container")
	durationVar(fs, &s.CrashLoopBackoffMax, "crashloop-backoff-max", "longest restart delay of a crashing container")
	fs.StringVar(&s.LogLevel, "log-level", s.LogLevel, "debug, info, warn or error")
	fs.StringVar(&s.LogFormat, "log-format", s.LogFormat, "auto (journald when stderr is the journal's stream, else text), text, json or journald")
	fs.StringVar(&s.KubeletConfig, "kubelet-config", s.KubeletConfig, "a kubelet KubeletConfiguration file whose fields berth shares are read beneath --config and the flags (static-pod fields, crashLoopBackOff.maxContainerRestartPeriod)")
	durationVar(fs, &s.FileRollbackAfter, "file-rollback-after", "a new version of a pod from --pod-manifest-path not Ready this long after it started (or crash-looping) is replaced by the last Ready version of the same manifest; 0 disables (annotation berth.io/rollback-after overrides)")
	durationVar(fs, &s.HTTPRollbackAfter, "http-rollback-after", "the same for pods from --manifest-url; 0 disables")
	durationVar(fs, &s.RollbackMinReady, "rollback-min-ready", "how long a new version must stay Ready to become the version a failed edit rolls back to")
	fs.StringVar(&s.StatusURL, "status-url", s.StatusURL, "URL berth PUTs a JSON status summary to after changes and every --status-period; placeholders {node}, {arch}, {label.KEY}")
	fs.Var(headerFlag{&s.StatusURLHeader}, "status-url-header", "HTTP header for --status-url as Key:Value (repeatable)")
	fs.StringVar(&s.StatusURLCA, "status-url-ca", s.StatusURLCA, "PEM file of the CAs --status-url's certificate must chain to, instead of the system's")
	durationVar(fs, &s.StatusPeriod, "status-period", "period of the status report when nothing changes (jittered by ±10%)")

	durationVar(fs, &s.MinimumContainerTTLDuration, "minimum-container-ttl-duration", "minimum age of a dead container before garbage collection")
	fs.IntVar(&s.MaximumDeadContainersPerContainer, "maximum-dead-containers-per-container", s.MaximumDeadContainersPerContainer, "dead containers kept per container of a pod (below 0: no limit; the newest is always kept)")
	fs.IntVar(&s.MaximumDeadContainers, "maximum-dead-containers", s.MaximumDeadContainers, "dead containers kept in all (below 0: no limit)")
	fs.StringVar(&s.ContainerLogMaxSize, "container-log-max-size", s.ContainerLogMaxSize, "size at which a container log file is rotated (a quantity: 10Mi)")
	fs.IntVar(&s.ContainerLogMaxFiles, "container-log-max-files", s.ContainerLogMaxFiles, "log files kept per container, the current one included (at least 2)")
	fs.IntVar(&s.ContainerLogMaxWorkers, "container-log-max-workers", s.ContainerLogMaxWorkers, "containers whose logs are rotated at once")
	durationVar(fs, &s.ContainerLogMonitorInterval, "container-log-monitor-interval", "period of the check of container log sizes")
	fs.IntVar(&s.ImageGCHighThresholdPercent, "image-gc-high-threshold", s.ImageGCHighThresholdPercent, "image filesystem use (percent) that starts image garbage collection; 100 disables it")
	fs.IntVar(&s.ImageGCLowThresholdPercent, "image-gc-low-threshold", s.ImageGCLowThresholdPercent, "image filesystem use (percent) image garbage collection frees down to")
	durationVar(fs, &s.ImageMinimumGCAge, "minimum-image-gc-age", "minimum age of an unused image before garbage collection")
	fs.StringVar(&s.ImageCredentialProviderConfig, "image-credential-provider-config", s.ImageCredentialProviderConfig, "the kubelet's CredentialProviderConfig file (or a directory of them) of the image credential provider plugins to get registry credentials from, after the pods' image pull Secrets and the node's config.json")
	fs.StringVar(&s.ImageCredentialProviderBinDir, "image-credential-provider-bin-dir", s.ImageCredentialProviderBinDir, "directory of the credential provider plugins' executables, each named as its provider; it and they must be owned by root and writable by no one else")
	durationVar(fs, &s.ImageCredentialProviderTimeout, "image-credential-provider-timeout", "longest run of a credential provider plugin: it is then killed, with whatever it started, and the pull goes on without its credentials")
	bindShutdownFlags(fs, &s.ShutdownSettings)
	bindClusterFlags(fs, &s.ClusterSettings)
}

// Parse reads args as `berth run`'s flags over the defaults, then
// resolves them with the config files (Resolve). A bad flag is printed,
// with the usage, on stderr as well as returned.
func Parse(args []string, stderr io.Writer) (Settings, []string, error) {
	var configPath string
	s := Defaults()
	fs := pflag.NewFlagSet("berth run", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	BindFlags(fs, &s, &configPath)
	if err := fs.Parse(args); err != nil {
		return Settings{}, nil, err
	}
	if fs.NArg() > 0 {
		return Settings{}, nil, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	return Resolve(fs, s, configPath)
}

// Resolve finishes the settings fs parsed into s (bound by BindFlags,
// with configPath the --config given): it reads defaults, then the
// kubelet config file (--kubelet-config), then berth's config file, then
// replays the flags given: flags win over the files, as with the kubelet,
// and berth's file over the kubelet's. Flags of fs that BindFlags does not
// bind are left out. A repeatable flag given on the
// command line replaces the file's list instead of adding to it.
//
// It also returns the warnings of the files read (an unversioned file, an
// older field name, kubelet fields berth does not use), with or without
// an error, for the caller to print or log: they are not problems.
func Resolve(fs *pflag.FlagSet, s Settings, configPath string) (Settings, []string, error) {
	if configPath == "" && s.KubeletConfig == "" {
		return s, nil, s.Validate()
	}
	given := map[string]bool{}
	fs.Visit(func(f *pflag.Flag) { given[f.Name] = true })
	kubeletPath, err := kubeletConfigPath(s.KubeletConfig, configPath, given)
	if err != nil {
		return Settings{}, nil, err
	}
	s, files, problems, err := loadFiles(kubeletPath, configPath)
	if err != nil {
		return Settings{}, nil, err
	}
	var warnings []string
	for _, f := range files {
		warnings = append(warnings, f.warnings...)
	}
	if err := replayFlags(fs, &s, configPath, given); err != nil {
		return Settings{}, warnings, err
	}
	// Every problem at once: the fields the files could not give, then
	// what validation finds in the others.
	errs := s.validate()
	for i, e := range errs {
		errs[i] = inFile(e, given, files)
	}
	if err := errors.Join(append(problems, errs...)...); err != nil {
		return Settings{}, warnings, err
	}
	return s, warnings, nil
}

// kubeletConfigPath is the kubelet config file to read: --kubelet-config's
// (flagPath) when given, else the one berth's config file names, else
// flagPath's default.
func kubeletConfigPath(flagPath, configPath string, given map[string]bool) (string, error) {
	if given["kubelet-config"] || configPath == "" {
		return flagPath, nil
	}
	// berth's config file may name the kubelet's: read it once to learn
	// the name, since the kubelet's file goes beneath it. Its warnings
	// come with the second read.
	scratch := Defaults()
	if _, err := loadConfigFile(configPath, &scratch); err != nil {
		return "", err
	}
	return scratch.KubeletConfig, nil
}

// loadFiles reads the defaults, then the kubelet config file at
// kubeletPath, then berth's at configPath ("" for none), each over the
// last; it returns the settings, the files read and the fields they could
// not give.
func loadFiles(kubeletPath, configPath string) (Settings, []fileLines, []error, error) {
	s := Defaults()
	var files []fileLines
	var problems []error
	if kubeletPath != "" {
		f, err := loadKubeletConfig(kubeletPath, &s)
		if err != nil {
			return Settings{}, nil, nil, err
		}
		s.KubeletConfig = kubeletPath
		files, problems = append(files, f), append(problems, f.problems...)
	}
	if configPath != "" {
		f, err := loadConfigFile(configPath, &s)
		if err != nil {
			return Settings{}, nil, nil, err
		}
		files, problems = append(files, f), append(problems, f.problems...)
	}
	return s, files, problems, nil
}

// replayFlags sets on s each settings flag fs was given, from the value fs
// parsed, over the files' values: every value here prints back as what
// sets it (a repeatable one item by item), and a repeatable flag given
// replaces the file's list instead of adding to it.
func replayFlags(fs *pflag.FlagSet, s *Settings, configPath string, given map[string]bool) error {
	if given["manifest-url-header"] {
		s.ManifestURLHeader = nil
	}
	if given["status-url-header"] {
		s.StatusURLHeader = nil
	}
	if given["cluster-dns"] {
		s.ClusterDNS = nil
	}
	if given["node-labels"] {
		s.NodeLabels = nil
	}
	if given["register-with-taints"] {
		s.RegisterWithTaints = nil
	}
	replay := pflag.NewFlagSet("berth run", pflag.ContinueOnError)
	replay.SetOutput(io.Discard)
	BindFlags(replay, s, &configPath)
	var err error
	fs.Visit(func(f *pflag.Flag) {
		// fs may hold a command's own flags beside the settings (berth
		// doctor's --run and -o): they are no setting.
		if replay.Lookup(f.Name) == nil {
			return
		}
		values := []string{f.Value.String()}
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			values = sv.GetSlice()
		}
		for _, v := range values {
			if e := replay.Set(f.Name, v); e != nil && err == nil {
				err = e
			}
		}
	})
	return err
}

// leadingName is the setting a validation error begins with: a flag
// (--max-pods must be positive) or a config file field (labels: ...).
var leadingName = regexp.MustCompile(`^(--[a-z0-9-]+|[a-zA-Z]+)(: | |$)`)

// inFile gives a validation error the file and line of the setting it is
// about, FILE:LINE: field: message, when the last file read set it and no
// flag overrode it; other errors are returned as they are.
func inFile(err error, given map[string]bool, files []fileLines) error {
	m := leadingName.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	key := m[1]
	if flag, ok := strings.CutPrefix(key, "--"); ok {
		if given[flag] {
			return err
		}
		if key, ok = flagKeys()[flag]; !ok {
			return err
		}
	}
	for i := len(files) - 1; i >= 0; i-- {
		line, ok := files[i].lines[key]
		if !ok {
			continue
		}
		msg := strings.TrimPrefix(err.Error(), m[0])
		if m[2] == " " && (msg == "" || msg[0] < 'a' || msg[0] > 'z') {
			msg = err.Error()
		}
		return &FileError{Path: files[i].path, Line: line, Field: key, Msg: msg}
	}
	return err
}

// flagKeys maps each flag of BindFlags to the config file field it sets,
// found by the address each flag writes to.
var flagKeys = sync.OnceValue(func() map[string]string {
	var s Settings
	var configPath string
	fs := pflag.NewFlagSet("keys", pflag.ContinueOnError)
	BindFlags(fs, &s, &configPath)
	byAddr := map[uintptr]string{}
	for key, f := range settingFields() {
		byAddr[reflect.ValueOf(&s).Elem().FieldByIndex(f.index).Addr().Pointer()] = key
	}
	out := map[string]string{}
	fs.VisitAll(func(f *pflag.Flag) {
		v := reflect.ValueOf(f.Value)
		if v.Kind() == reflect.Struct {
			v = v.Field(0)
		}
		if v.Kind() != reflect.Pointer {
			return
		}
		if key, ok := byAddr[v.Pointer()]; ok {
			out[f.Name] = key
		}
	})
	return out
})

// Validate rejects settings berth cannot run with, naming the setting.
func (s Settings) Validate() error { return errors.Join(s.validate()...) }

// validate is every problem of the settings, sorted.
func (s Settings) validate() []error {
	var errs []error
	errs = append(errs, s.validateSources()...)
	errs = append(errs, validateLabels(s.Labels)...)
	errs = append(errs, s.validateCluster()...)
	errs = append(errs, s.validateStatus()...)
	errs = append(errs, s.validateDurations()...)
	errs = append(errs, s.validateRuntime()...)
	errs = append(errs, s.validateGC()...)
	errs = append(errs, s.validateCredentialProviders()...)
	if err := s.validateShutdown(); err != nil {
		errs = append(errs, err)
	}
	sort.Slice(errs, func(i, j int) bool { return errs[i].Error() < errs[j].Error() })
	return errs
}

// validateSources is the problems of the pod sources' settings: a source
// at all, the URL's, its headers, CA and signers, the files' permissions
// and signers.
func (s Settings) validateSources() []error {
	var errs []error
	if s.PodManifestPath == "" && s.ManifestURL == "" {
		errs = append(errs, errors.New("no pod source: set --pod-manifest-path or --manifest-url"))
	}
	if err := httpsource.ValidateHeader(s.manifestHeaders()); err != nil {
		errs = append(errs, fmt.Errorf("--manifest-url-header: %w", err))
	}
	if _, err := source.ParsePermissions(s.ManifestPermissions); err != nil {
		errs = append(errs, fmt.Errorf("--manifest-permissions: %w", err))
	}
	if s.ManifestURLCA != "" && !strings.HasPrefix(strings.ToLower(s.ManifestURL), "https://") {
		errs = append(errs, errors.New("--manifest-url-ca needs an https:// --manifest-url"))
	}
	if s.ManifestURLSigners != "" && s.ManifestURL == "" {
		errs = append(errs, errors.New("--manifest-url-allowed-signers needs a --manifest-url"))
	}
	if s.PodManifestSigners != "" && s.PodManifestPath == "" {
		errs = append(errs, errors.New("--pod-manifest-allowed-signers needs a --pod-manifest-path"))
	}
	if _, err := s.manifestURL("node"); err != nil {
		errs = append(errs, fmt.Errorf("--manifest-url: %w", err))
	}
	return errs
}

// validateDurations is the problems of the periods, timeouts and backoffs:
// positive, the crash loop backoff's bounds in order, and the rollback
// delays not negative.
func (s Settings) validateDurations() []error {
	var errs []error
	for name, d := range map[string]time.Duration{
		"file-check-frequency": s.FileCheckFrequency.Duration, "http-check-frequency": s.HTTPCheckFrequency.Duration,
		"sync-frequency": s.SyncFrequency.Duration, "runtime-request-timeout": s.RuntimeRequestTimeout.Duration,
		"crashloop-backoff-initial": s.CrashLoopBackoffInitial.Duration, "crashloop-backoff-max": s.CrashLoopBackoffMax.Duration,
		"http-check-backoff-max": s.HTTPCheckBackoffMax.Duration,
	} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("--%s must be positive, got %s", name, d))
		}
	}
	if s.CrashLoopBackoffMax.Duration < s.CrashLoopBackoffInitial.Duration {
		errs = append(errs, fmt.Errorf("--crashloop-backoff-max (%s) is below --crashloop-backoff-initial (%s)", s.CrashLoopBackoffMax.Duration, s.CrashLoopBackoffInitial.Duration))
	}
	for name, d := range map[string]time.Duration{
		"file-rollback-after": s.FileRollbackAfter.Duration, "http-rollback-after": s.HTTPRollbackAfter.Duration,
		"rollback-min-ready": s.RollbackMinReady.Duration,
	} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("--%s must not be negative, got %s", name, d))
		}
	}
	return errs
}

// validateRuntime is the problems of the daemon's own settings: the
// runtime endpoint, the pod limits, logging, and the API socket's
// exposure and group.
func (s Settings) validateRuntime() []error {
	var errs []error
	if s.ContainerRuntimeEndpoint == "" {
		errs = append(errs, errors.New("--container-runtime-endpoint must not be empty"))
	}
	if s.MaxPods <= 0 {
		errs = append(errs, fmt.Errorf("--max-pods must be positive, got %d", s.MaxPods))
	}
	if s.MaxParallelPodStarts < 0 {
		errs = append(errs, fmt.Errorf("--max-parallel-pod-starts must not be negative, got %d", s.MaxParallelPodStarts))
	}
	if _, err := ParseLogLevel(s.LogLevel); err != nil {
		errs = append(errs, err)
	}
	if _, err := logging.ParseFormat(s.LogFormat); err != nil {
		errs = append(errs, fmt.Errorf("--log-format: %w", err))
	}
	if _, err := api.ParseExposure(s.ListenPods); err != nil {
		errs = append(errs, err)
	}
	if _, err := s.SocketGroupID(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// PodsAPISocket is the socket of the kubelet's pods API, where the kubelet
// has it under its root directory; "" with --pods-api off.
func (s Settings) PodsAPISocket() string {
	if !s.PodsAPI {
		return ""
	}
	return podsapi.SocketPath(s.RootDir)
}

// SocketGroupID resolves --socket-group, a group name or a numeric gid,
// with the system's group database: -1 for none (the socket is root's
// only).
func (s Settings) SocketGroupID() (int, error) {
	if s.SocketGroup == "" {
		return -1, nil
	}
	if gid, err := strconv.Atoi(s.SocketGroup); err == nil {
		if gid < 0 {
			return 0, fmt.Errorf("--socket-group: gid %d is negative", gid)
		}
		return gid, nil
	}
	g, err := user.LookupGroup(s.SocketGroup)
	if err != nil {
		return 0, fmt.Errorf("--socket-group: %w", err)
	}
	gid, err := strconv.Atoi(g.Gid)
	if err != nil {
		return 0, fmt.Errorf("--socket-group: group %s has gid %q", s.SocketGroup, g.Gid)
	}
	return gid, nil
}

// fullSettingsForKeys has every field set so its YAML lists every key.
func fullSettingsForKeys() Settings {
	s := Defaults()
	s.ManifestURL, s.ImageServiceEndpoint, s.HostnameOverride, s.NodeIP, s.ClusterDomain = "x", "x", "x", "x", "x"
	s.ManifestURLCA, s.ManifestURLSigners, s.PodManifestSigners, s.KubeletConfig = "x", "x", "x", "x"
	s.StatusURL, s.StatusURLCA, s.SocketGroup = "x", "x", "x"
	s.ImageCredentialProviderConfig, s.ImageCredentialProviderBinDir = "x", "x"
	s.Labels = map[string]string{"x": "x"}
	s.ManifestURLHeader = map[string][]string{"x": {"x"}}
	s.StatusURLHeader = map[string][]string{"x": {"x"}}
	s.ClusterDNS = []string{"x"}
	s.Kubeconfig, s.BootstrapKubeconfig = "x", "x"
	s.NodeLabels = map[string]string{"x": "x"}
	s.RegisterWithTaints = []v1.Taint{{Key: "x", Effect: v1.TaintEffectNoSchedule}}
	return s
}

// validateLabels checks the config file's labels as the API server checks
// a node's: qualified names for keys, label values for values.
func validateLabels(labels map[string]string) []error {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs []error
	for _, k := range keys {
		for _, msg := range validation.IsQualifiedName(k) {
			errs = append(errs, fmt.Errorf("labels: key %q: %s", k, msg))
		}
		for _, msg := range validation.IsValidLabelValue(labels[k]) {
			errs = append(errs, fmt.Errorf("labels: %s: value %q: %s", k, labels[k], msg))
		}
	}
	return errs
}

// manifestURL is --manifest-url with its placeholders replaced for this
// node.
func (s Settings) manifestURL(nodeName string) (string, error) {
	if s.ManifestURL == "" {
		return "", nil
	}
	return httpsource.ExpandURL(s.ManifestURL, httpsource.URLVars{Node: nodeName, Arch: runtime.GOARCH, Labels: s.Labels})
}

// manifestHeaders converts the configured headers for the HTTP source.
func (s Settings) manifestHeaders() http.Header { return toHeader(s.ManifestURLHeader) }

// statusHeaders converts the configured headers for the status report.
func (s Settings) statusHeaders() http.Header { return toHeader(s.StatusURLHeader) }

func toHeader(m map[string][]string) http.Header {
	h := http.Header{}
	for k, vs := range m {
		for _, v := range vs {
			h.Add(k, v)
		}
	}
	return h
}

// validateStatus checks the status report's settings. The URL's
// placeholders are checked when the node name is known (StatusConfig).
func (s Settings) validateStatus() []error {
	var errs []error
	if err := httpsource.ValidateHeader(s.statusHeaders()); err != nil {
		errs = append(errs, fmt.Errorf("--status-url-header: %w", err))
	}
	lower := strings.ToLower(s.StatusURL)
	if s.StatusURL != "" && !strings.HasPrefix(lower, "http://") && !strings.HasPrefix(lower, "https://") {
		errs = append(errs, fmt.Errorf("--status-url %q must be an http:// or https:// URL", podspec.RedactURL(s.StatusURL)))
	}
	if s.StatusURLCA != "" && !strings.HasPrefix(lower, "https://") {
		errs = append(errs, errors.New("--status-url-ca needs an https:// --status-url"))
	}
	if s.StatusPeriod.Duration < 10*time.Second {
		errs = append(errs, fmt.Errorf("--status-period must be at least 10s, got %s", s.StatusPeriod.Duration))
	}
	return errs
}

// StatusConfig is the agent's status report configuration, nil without
// --status-url: the URL with its placeholders expanded, the headers, and
// a client trusting --status-url-ca. The manifest URL's headers and CA are
// not reused: they may carry a token meant for that server only.
func (s Settings) StatusConfig(node string) (*statusreport.Config, error) {
	if s.StatusURL == "" {
		return nil, nil
	}
	u, err := httpsource.ExpandURL(s.StatusURL, httpsource.URLVars{Node: node, Arch: runtime.GOARCH, Labels: s.Labels})
	if err != nil {
		return nil, fmt.Errorf("--status-url: %w", err)
	}
	if parsed, err := url.Parse(u); err != nil || parsed.Host == "" {
		return nil, fmt.Errorf("--status-url %q is not a URL with a host", podspec.RedactURL(u))
	}
	client, err := httpsource.NewHTTPClient(s.StatusURLCA)
	if err != nil {
		return nil, fmt.Errorf("--status-url-ca: %w", err)
	}
	return &statusreport.Config{URL: u, Header: s.statusHeaders(), Client: client, Period: s.StatusPeriod.Duration}, nil
}

// headerFlag collects repeatable Key:Value flags.
type headerFlag struct{ m *map[string][]string }

func (f headerFlag) String() string { return strings.Join(f.GetSlice(), ",") }

// Type names the value in help: a header.
func (f headerFlag) Type() string { return "Key:Value" }

// GetSlice is every header as Key:Value, sorted.
func (f headerFlag) GetSlice() []string {
	if f.m == nil || *f.m == nil {
		return nil
	}
	var parts []string
	for k, vs := range *f.m {
		for _, v := range vs {
			parts = append(parts, k+":"+v)
		}
	}
	sort.Strings(parts)
	return parts
}

func (f headerFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, ":")
	if !ok || strings.TrimSpace(k) == "" {
		return fmt.Errorf("want Key:Value, got %q", v)
	}
	if *f.m == nil {
		*f.m = map[string][]string{}
	}
	k = http.CanonicalHeaderKey(strings.TrimSpace(k))
	(*f.m)[k] = append((*f.m)[k], strings.TrimSpace(val))
	return nil
}

// Append adds one header, as Set.
func (f headerFlag) Append(v string) error { return f.Set(v) }

// Replace sets the headers to vs.
func (f headerFlag) Replace(vs []string) error {
	*f.m = nil
	for _, v := range vs {
		if err := f.Set(v); err != nil {
			return err
		}
	}
	return nil
}

// listFlag collects repeatable or comma-separated values.
type listFlag struct{ l *[]string }

func (f listFlag) String() string { return strings.Join(f.GetSlice(), ",") }

// Type names the value in help: a list.
func (f listFlag) Type() string { return "strings" }

// GetSlice is the list.
func (f listFlag) GetSlice() []string {
	if f.l == nil {
		return nil
	}
	return *f.l
}

func (f listFlag) Set(v string) error {
	for _, part := range strings.Split(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*f.l = append(*f.l, part)
		}
	}
	return nil
}

// Append adds one value (or several, comma-separated), as Set.
func (f listFlag) Append(v string) error { return f.Set(v) }

// Replace sets the list to vs.
func (f listFlag) Replace(vs []string) error {
	*f.l = nil
	for _, v := range vs {
		if err := f.Set(v); err != nil {
			return err
		}
	}
	return nil
}

// durationFlag binds a metav1.Duration (the config file's type) to a
// flag, parsed as time.ParseDuration parses.
type durationFlag struct{ d *metav1.Duration }

func (f durationFlag) String() string { return f.d.Duration.String() }

// Type names the value in help.
func (f durationFlag) Type() string { return "duration" }

func (f durationFlag) Set(v string) error {
	parsed, err := time.ParseDuration(v)
	if err != nil {
		return err
	}
	f.d.Duration = parsed
	return nil
}

// durationVar binds d to the flag name; help shows d's value as the
// default.
func durationVar(fs *pflag.FlagSet, d *metav1.Duration, name, usage string) {
	fs.Var(durationFlag{d}, name, usage)
}

// ParseLogLevel maps --log-level onto slog.
func ParseLogLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, fmt.Errorf("--log-level: want debug, info, warn or error, got %q", s)
	}
	return l, nil
}

// validateGC checks the garbage collection settings as the kubelet does.
func (s Settings) validateGC() []error {
	var errs []error
	if _, err := s.containerLogMaxSize(); err != nil {
		errs = append(errs, err)
	}
	if s.ContainerLogMaxFiles < 2 {
		errs = append(errs, fmt.Errorf("--container-log-max-files must be at least 2, got %d", s.ContainerLogMaxFiles))
	}
	if s.ContainerLogMaxWorkers < 1 {
		errs = append(errs, fmt.Errorf("--container-log-max-workers must be at least 1, got %d", s.ContainerLogMaxWorkers))
	}
	if s.ContainerLogMonitorInterval.Duration < time.Second {
		errs = append(errs, fmt.Errorf("--container-log-monitor-interval must be at least 1s, got %s", s.ContainerLogMonitorInterval.Duration))
	}
	if s.MinimumContainerTTLDuration.Duration < 0 || s.ImageMinimumGCAge.Duration < 0 {
		errs = append(errs, errors.New("--minimum-container-ttl-duration and --minimum-image-gc-age must not be negative"))
	}
	high, low := s.ImageGCHighThresholdPercent, s.ImageGCLowThresholdPercent
	switch {
	case high < 0 || high > 100 || low < 0 || low > 100:
		errs = append(errs, fmt.Errorf("--image-gc-high-threshold (%d) and --image-gc-low-threshold (%d) must be between 0 and 100", high, low))
	case low >= high && high != 100:
		errs = append(errs, fmt.Errorf("--image-gc-low-threshold (%d) must be below --image-gc-high-threshold (%d)", low, high))
	}
	return errs
}

// containerLogMaxSize parses --container-log-max-size, a Kubernetes
// quantity.
func (s Settings) containerLogMaxSize() (int64, error) {
	q, err := resource.ParseQuantity(s.ContainerLogMaxSize)
	if err != nil {
		return 0, fmt.Errorf("--container-log-max-size: %w", err)
	}
	if q.Value() <= 0 {
		return 0, fmt.Errorf("--container-log-max-size must be positive, got %s", s.ContainerLogMaxSize)
	}
	return q.Value(), nil
}

// GCConfig is the agent's garbage collection configuration from the settings.
func (s Settings) GCConfig() *syncloop.GCConfig {
	maxSize, _ := s.containerLogMaxSize() // validated
	return &syncloop.GCConfig{
		Containers: gc.Policy{
			MinAge:             s.MinimumContainerTTLDuration.Duration,
			MaxPerPodContainer: s.MaximumDeadContainersPerContainer,
			MaxContainers:      s.MaximumDeadContainers,
		},
		Logs:               gc.LogRotationPolicy{MaxSize: maxSize, MaxFiles: s.ContainerLogMaxFiles, Workers: s.ContainerLogMaxWorkers},
		LogMonitorInterval: s.ContainerLogMonitorInterval.Duration,
		Images: gc.ImagePolicy{
			HighThresholdPercent: s.ImageGCHighThresholdPercent,
			LowThresholdPercent:  s.ImageGCLowThresholdPercent,
			MinAge:               s.ImageMinimumGCAge.Duration,
		},
	}
}
