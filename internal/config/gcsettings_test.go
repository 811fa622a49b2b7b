package config

import (
	"io"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/berth-agent/berth/internal/gc"
	"github.com/berth-agent/berth/internal/syncloop"
)

// TestGCSettings covers the garbage collection flags and config fields: the
// kubelet's defaults, the kubelet's flag names, a config file, and what
// the agent gets.
func TestGCSettings(t *testing.T) {
	defaults := &syncloop.GCConfig{
		Containers:         gc.Policy{MinAge: 0, MaxPerPodContainer: 1, MaxContainers: -1},
		Logs:               gc.LogRotationPolicy{MaxSize: 10 << 20, MaxFiles: 5, Workers: 1},
		LogMonitorInterval: 10 * time.Second,
		Images:             gc.ImagePolicy{HighThresholdPercent: 85, LowThresholdPercent: 80, MinAge: 2 * time.Minute},
	}
	config := writeConfig(t, `apiVersion: berth.io/v1alpha1
kind: BerthConfiguration
minimumContainerTTLDuration: 1m
maximumDeadContainersPerContainer: 0
maximumDeadContainers: 100
containerLogMaxSize: 512Ki
containerLogMaxFiles: 3
containerLogMaxWorkers: 2
containerLogMonitorInterval: 30s
imageGCHighThresholdPercent: 90
imageGCLowThresholdPercent: 70
imageMinimumGCAge: 10m
`)
	fromFile := &syncloop.GCConfig{
		Containers:         gc.Policy{MinAge: time.Minute, MaxPerPodContainer: 0, MaxContainers: 100},
		Logs:               gc.LogRotationPolicy{MaxSize: 512 << 10, MaxFiles: 3, Workers: 2},
		LogMonitorInterval: 30 * time.Second,
		Images:             gc.ImagePolicy{HighThresholdPercent: 90, LowThresholdPercent: 70, MinAge: 10 * time.Minute},
	}
	tests := []struct {
		name string
		args []string
		want *syncloop.GCConfig
		err  string
	}{
		{name: "defaults are the kubelet's", want: defaults},
		{name: "kubelet flag names", args: []string{
			"--minimum-container-ttl-duration", "1m", "--maximum-dead-containers-per-container", "0", "--maximum-dead-containers", "100",
			"--container-log-max-size", "512Ki", "--container-log-max-files", "3", "--container-log-max-workers", "2",
			"--container-log-monitor-interval", "30s", "--image-gc-high-threshold", "90", "--image-gc-low-threshold", "70",
			"--minimum-image-gc-age", "10m",
		}, want: fromFile},
		{name: "config file", args: []string{"--config", config}, want: fromFile},
		{name: "flag over config file", args: []string{"--config", config, "--container-log-max-files", "7"}, want: func() *syncloop.GCConfig {
			c := *fromFile
			c.Logs.MaxFiles = 7
			return &c
		}()},
		{name: "image GC disabled", args: []string{"--image-gc-high-threshold", "100", "--image-gc-low-threshold", "100"}, want: func() *syncloop.GCConfig {
			c := *defaults
			c.Images.HighThresholdPercent, c.Images.LowThresholdPercent = 100, 100
			return &c
		}()},
		{name: "bad log size", args: []string{"--container-log-max-size", "ten"}, err: "--container-log-max-size"},
		{name: "zero log size", args: []string{"--container-log-max-size", "0"}, err: "--container-log-max-size must be positive"},
		{name: "one log file", args: []string{"--container-log-max-files", "1"}, err: "--container-log-max-files must be at least 2"},
		{name: "no workers", args: []string{"--container-log-max-workers", "0"}, err: "--container-log-max-workers must be at least 1"},
		{name: "fast monitor", args: []string{"--container-log-monitor-interval", "100ms"}, err: "--container-log-monitor-interval must be at least 1s"},
		{name: "negative TTL", args: []string{"--minimum-container-ttl-duration", "-1s"}, err: "must not be negative"},
		{name: "low above high", args: []string{"--image-gc-high-threshold", "80", "--image-gc-low-threshold", "85"}, err: "--image-gc-low-threshold (85) must be below --image-gc-high-threshold (80)"},
		{name: "threshold over 100", args: []string{"--image-gc-high-threshold", "101"}, err: "must be between 0 and 100"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, _, err := Parse(tc.args, io.Discard)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := s.GCConfig(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("gcConfig = %+v\nwant       %+v", got, tc.want)
			}
		})
	}
}
