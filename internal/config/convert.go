package config

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/kuberuntime"
	"github.com/berth-agent/berth/internal/podenv"
	"github.com/berth-agent/berth/internal/podevents"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/rollback"
	"github.com/berth-agent/berth/internal/source"
	"github.com/berth-agent/berth/internal/statusreport"
	"github.com/berth-agent/berth/internal/syncloop"
)

// SourceConfig is the manifest sources' configuration: the file and URL
// sources, their signers and persisted state, with signature metrics on
// reg.
func (s Settings) SourceConfig(nodeName string, reg prometheus.Registerer, log *slog.Logger) (source.Config, error) {
	manifestURL, err := s.manifestURL(nodeName)
	if err != nil {
		return source.Config{}, fmt.Errorf("--manifest-url: %w", err)
	}
	var signers, fileSigners *source.Signers
	if s.ManifestURLSigners != "" {
		if signers, err = source.LoadAllowedSigners(s.ManifestURLSigners); err != nil {
			return source.Config{}, fmt.Errorf("--manifest-url-allowed-signers: %w", err)
		}
	}
	if s.PodManifestSigners != "" {
		if fileSigners, err = source.LoadAllowedSigners(s.PodManifestSigners); err != nil {
			return source.Config{}, fmt.Errorf("--pod-manifest-allowed-signers: %w", err)
		}
	}
	return source.Config{
		NodeName:           nodeName,
		ManifestPath:       s.PodManifestPath,
		FileSigners:        fileSigners,
		FileCheckFrequency: s.FileCheckFrequency.Duration,
		URL:                manifestURL,
		URLHeader:          s.manifestHeaders(),
		URLCAFile:          s.ManifestURLCA,
		URLSigners:         signers,
		Metrics:            source.NewMetrics(reg),
		MaxPods:            s.MaxPods,
		Permissions:        source.Permissions(s.ManifestPermissions),
		HTTPCheckFrequency: s.HTTPCheckFrequency.Duration,
		HTTPBackoffMax:     s.HTTPCheckBackoffMax.Duration,
		StateDir:           s.ManifestStateDir(),
		Logger:             log,
	}, nil
}

// RuntimeOptions are the runtime manager's options: it records into
// events and reads the pods' ConfigMaps and Secrets through objects. The
// image credential provider config is read again here, as Validate read
// it: an edit since is an error, never half a config.
func (s Settings) RuntimeOptions(nodeName, hostIP string, events *podevents.Log, objects func(types.UID) podenv.PodObjects, log *slog.Logger) (kuberuntime.Options, error) {
	providers, errs := s.credentialProviders()
	if len(errs) > 0 {
		return kuberuntime.Options{}, errors.Join(errs...)
	}
	return kuberuntime.Options{
		NodeName:                nodeName,
		RootDir:                 s.RootDir,
		PodLogsDir:              s.PodLogsDir,
		ResolvConf:              s.ResolvConf,
		ClusterDNS:              s.ClusterDNS,
		ClusterDomain:           s.ClusterDomain,
		CrashLoopBackoffInitial: s.CrashLoopBackoffInitial.Duration,
		CrashLoopBackoffMax:     s.CrashLoopBackoffMax.Duration,
		HostIP:                  hostIP,
		Recorder:                events,
		Objects:                 objects,
		Logger:                  log,

		CredentialProviders:       providers,
		CredentialProviderBinDir:  s.ImageCredentialProviderBinDir,
		CredentialProviderTimeout: s.ImageCredentialProviderTimeout.Duration,
	}, nil
}

// AgentConfig is the sync loop's configuration, but for OnReady; version
// is berth's, for the status report.
func (s Settings) AgentConfig(nodeName, hostIP, version string, reg *prometheus.Registry, log *slog.Logger, status *statusreport.Config) syncloop.Config {
	return syncloop.Config{
		NodeName:             nodeName,
		HostIP:               hostIP,
		MaxPods:              s.MaxPods,
		MaxParallelPodStarts: s.MaxParallelPodStarts,
		SyncFrequency:        s.SyncFrequency.Duration,
		Metrics:              reg,
		Logger:               log,
		GC:                   s.GCConfig(),
		Rollback: rollback.Config{
			After: map[string]time.Duration{
				podspec.SourceFile: s.FileRollbackAfter.Duration,
				podspec.SourceHTTP: s.HTTPRollbackAfter.Duration,
			},
			MinReady: s.RollbackMinReady.Duration,
			StateDir: s.RollbackStateDir(),
		},
		Shutdown: s.ShutdownSettings.NodeShutdownConfig(),
		Status:   status,
		Version:  version,
	}
}

// NodeName is the kubelet's: the override, or the hostname, lower-cased.
func NodeName(override string) (string, error) {
	name := override
	if name == "" {
		h, err := os.Hostname()
		if err != nil {
			return "", fmt.Errorf("node name: %w (set --hostname-override)", err)
		}
		name = h
	}
	name = strings.ToLower(strings.TrimSpace(name))
	if name == "" {
		return "", errors.New("node name is empty: set --hostname-override")
	}
	return name, nil
}

// RollbackStateDir is where the agent keeps each pod's last Ready version
// and the rollbacks in force across restarts; with no root dir, nowhere.
func (s *Settings) RollbackStateDir() string {
	if s.RootDir == "" {
		return ""
	}
	return filepath.Join(s.RootDir, "rollback")
}

// ImagePreloadPath is the image preload directory: --image-preload-dir,
// else <root-dir>/images.
func (s *Settings) ImagePreloadPath() string {
	if s.ImagePreloadDir != "" || s.RootDir == "" {
		return s.ImagePreloadDir
	}
	return filepath.Join(s.RootDir, "images")
}

// EventsStateDir is where the pods' recent events are kept across
// restarts; with no root dir, in memory only.
func (s *Settings) EventsStateDir() string {
	if s.RootDir == "" {
		return ""
	}
	return filepath.Join(s.RootDir, "events")
}

// ManifestStateDir is where the sources keep each manifest's last good
// version across restarts; with no root dir they keep it in memory only
// (a relative "manifests" would land wherever berth was started).
func (s *Settings) ManifestStateDir() string {
	if s.RootDir == "" {
		return ""
	}
	return filepath.Join(s.RootDir, "manifests")
}
