package config

import (
	"io"
	"strings"
	"testing"
	"time"
)

// TestShutdownSettings: the kubelet's graceful node shutdown fields come
// from a KubeletConfiguration (and berth's config, and flags), checked as
// the kubelet checks them.
func TestShutdownSettings(t *testing.T) {
	kubelet := writeConfig(t, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
shutdownGracePeriod: 30s
shutdownGracePeriodCriticalPods: 10s
`)
	s, _, err := Parse([]string{"--config", kubelet}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if c := s.ShutdownSettings.NodeShutdownConfig(); c.GracePeriod != 30*time.Second || c.CriticalPods != 10*time.Second {
		t.Errorf("shutdown config = %+v", c)
	}
	if d := Defaults().NodeShutdownConfig(); d.GracePeriod != 0 {
		t.Errorf("default grace period %s: graceful node shutdown must be off by default, as in the kubelet", d.GracePeriod)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--shutdown-grace-period", "10s", "--shutdown-grace-period-critical-pods", "20s"}, "must not exceed shutdownGracePeriod"},
		{[]string{"--shutdown-grace-period", "-1s"}, "must not be negative"},
	} {
		if _, _, err := Parse(tt.args, io.Discard); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err = %v, want %q", tt.args, err, tt.want)
		}
	}
}
