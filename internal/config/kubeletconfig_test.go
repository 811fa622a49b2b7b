package config

import (
	"strings"
	"testing"
	"time"
)

// TestKubeletConfig reads kubelet config files through --kubelet-config:
// the fields berth honours strictly, with file:line errors, the others
// reported with their lines, and berth's own file and flags on top.
func TestKubeletConfig(t *testing.T) {
	const header = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
	tests := []struct {
		name     string
		kubelet  string
		berth    string // berth's own config file, if any
		args     []string
		wantErr  string
		initial  time.Duration
		max      time.Duration
		warnings string
	}{
		{name: "maxContainerRestartPeriod is the node's ceiling", kubelet: header + "crashLoopBackOff:\n  maxContainerRestartPeriod: 30s\n",
			initial: 10 * time.Second, max: 30 * time.Second},
		{name: "below the first delay it lowers that too (KEP-5593)", kubelet: header + "crashLoopBackOff:\n  maxContainerRestartPeriod: 5s\n",
			initial: 5 * time.Second, max: 5 * time.Second},
		{name: "too long", kubelet: header + "maxPods: 10\ncrashLoopBackOff:\n  maxContainerRestartPeriod: 10m\n",
			wantErr: ":4: crashLoopBackOff.maxContainerRestartPeriod: must be between 1s and 5m0s, got 10m0s"},
		{name: "too short", kubelet: header + "crashLoopBackOff: {maxContainerRestartPeriod: 500ms}\n",
			wantErr: ":3: crashLoopBackOff.maxContainerRestartPeriod: must be between 1s and 5m0s, got 500ms"},
		{name: "an unknown field inside an honoured one is an error", kubelet: header + "crashLoopBackOff:\n  maxRestartPeriod: 30s\n",
			wantErr: `:3: crashLoopBackOff: unknown field "maxRestartPeriod"`},
		{name: "a wrong type is an error with its line", kubelet: header + "staticPodPath: /srv\nmaxPods: many\n",
			wantErr: ":4: maxPods:"},
		{name: "other fields are reported with their lines", kubelet: header + "evictionHard:\n  memory.available: 100Mi\ncpuManagerPolicy: static\n",
			initial: 10 * time.Second, max: 5 * time.Minute, warnings: "fields berth does not use: evictionHard (line 3), cpuManagerPolicy (line 5)"},
		{name: "berth's file wins over the kubelet's", kubelet: header + "crashLoopBackOff: {maxContainerRestartPeriod: 30s}\n",
			berth: "apiVersion: berth.io/v1alpha1\nkind: BerthConfiguration\ncrashLoopBackOffMax: 1m\n", initial: 10 * time.Second, max: time.Minute},
		{name: "flags win over both", kubelet: header + "crashLoopBackOff: {maxContainerRestartPeriod: 30s}\n",
			berth: "apiVersion: berth.io/v1alpha1\nkind: BerthConfiguration\ncrashLoopBackOffMax: 1m\n", args: []string{"--crashloop-backoff-max", "2m"}, initial: 10 * time.Second, max: 2 * time.Minute},
		{name: "not a KubeletConfiguration", kubelet: "kind: BerthConfiguration\n", wantErr: `: kind "BerthConfiguration", want KubeletConfiguration`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kubelet := writeConfig(t, tt.kubelet)
			args := []string{"--kubelet-config", kubelet}
			if tt.berth != "" {
				args = append(args, "--config", writeConfig(t, tt.berth))
			}
			s, warnings, err := Parse(append(args, tt.args...), new(strings.Builder))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), kubelet+tt.wantErr) {
					t.Fatalf("error %v, want it to contain %q", err, kubelet+tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.CrashLoopBackoffInitial.Duration != tt.initial || s.CrashLoopBackoffMax.Duration != tt.max {
				t.Errorf("back-off %s to %s, want %s to %s", s.CrashLoopBackoffInitial.Duration, s.CrashLoopBackoffMax.Duration, tt.initial, tt.max)
			}
			if s.KubeletConfig != kubelet {
				t.Errorf("kubeletConfig = %q", s.KubeletConfig)
			}
			got := strings.Join(warnings, "\n")
			if (tt.warnings == "") != (got == "") || !strings.Contains(got, tt.warnings) {
				t.Errorf("warnings %q, want %q", got, tt.warnings)
			}
		})
	}
}

// TestKubeletConfigNamedByBerthConfig: berth's file may name the kubelet's,
// which is then read beneath it.
func TestKubeletConfigNamedByBerthConfig(t *testing.T) {
	kubelet := writeConfig(t, "kind: KubeletConfiguration\nmaxPods: 12\ncrashLoopBackOff: {maxContainerRestartPeriod: 40s}\nevictionHard: {}\n")
	berth := writeConfig(t, "apiVersion: berth.io/v1alpha1\nkind: BerthConfiguration\nkubeletConfig: "+kubelet+"\nmaxPods: 13\n")
	s, warnings, err := Parse([]string{"--config", berth}, new(strings.Builder))
	if err != nil {
		t.Fatal(err)
	}
	if s.MaxPods != 13 || s.CrashLoopBackoffMax.Duration != 40*time.Second {
		t.Errorf("maxPods %d (want berth's 13), max back-off %s (want the kubelet's 40s)", s.MaxPods, s.CrashLoopBackoffMax.Duration)
	}
	if len(warnings) != 1 {
		t.Errorf("warnings %q, want the kubelet file's one, once", warnings)
	}
}
