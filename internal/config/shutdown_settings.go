package config

import (
	"errors"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/berth-agent/berth/internal/nodeshutdown"
)

// ShutdownSettings are the kubelet's graceful node shutdown fields
// (KubeletConfiguration shutdownGracePeriod and
// shutdownGracePeriodCriticalPods), embedded in settings.
type ShutdownSettings struct {
	ShutdownGracePeriod             metav1.Duration `json:"shutdownGracePeriod"`
	ShutdownGracePeriodCriticalPods metav1.Duration `json:"shutdownGracePeriodCriticalPods"`
}

// bindShutdownFlags registers the shutdown settings as flags.
func bindShutdownFlags(fs *pflag.FlagSet, s *ShutdownSettings) {
	durationVar(fs, &s.ShutdownGracePeriod, "shutdown-grace-period", "on a machine shutdown (logind), the time berth delays it to stop pods, lowest priority first; 0 leaves pods to the shutdown")
	durationVar(fs, &s.ShutdownGracePeriodCriticalPods, "shutdown-grace-period-critical-pods", "the part of --shutdown-grace-period kept for critical pods (priority >= system-cluster-critical), stopped last")
}

// validateShutdown checks them as the kubelet does.
func (s ShutdownSettings) validateShutdown() error {
	switch {
	case s.ShutdownGracePeriod.Duration < 0 || s.ShutdownGracePeriodCriticalPods.Duration < 0:
		return errors.New("shutdownGracePeriod and shutdownGracePeriodCriticalPods must not be negative")
	case s.ShutdownGracePeriodCriticalPods.Duration > s.ShutdownGracePeriod.Duration:
		return errors.New("shutdownGracePeriodCriticalPods must not exceed shutdownGracePeriod")
	}
	return nil
}

// NodeShutdownConfig is the agent's share of them.
func (s ShutdownSettings) NodeShutdownConfig() *nodeshutdown.Config {
	return &nodeshutdown.Config{GracePeriod: s.ShutdownGracePeriod.Duration, CriticalPods: s.ShutdownGracePeriodCriticalPods.Duration}
}
