package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// FuzzConfigFile reads arbitrary config files, berth's own and kubelet
// ones, as loadConfigFile does at start. It never panics; a kind berth
// does not know is refused; and what it accepts, written back as a
// BerthConfiguration, reads strictly to the same settings.
func FuzzConfigFile(f *testing.F) {
	for _, seed := range []string{"../../packaging/berth.yaml"} {
		data, err := os.ReadFile(seed)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, s := range []string{
		"",
		"kind: BerthConfiguration\nstaticPodPath: /opt/pods\nlisten: \"\"\ncrashLoopBackoffInitial: 1s\n",
		"apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: /srv/manifests\nstaticPodURLHeader:\n  Authorization: [\"Bearer x\"]\nfileCheckFrequency: 5s\nmaxPods: 20\nclusterDNS: [10.96.0.10]\nevictionHard:\n  memory.available: 100Mi\n",
		"kind: KubeletConfiguration\ncrashLoopBackOff:\n  maxContainerRestartPeriod: 30s\nshutdownGracePeriod: 30s\n",
		"kind: KubeletConfiguration\ncrashLoopBackOff: {maxContainerRestartPeriod: 1h}\n",
		"kind: KubeletConfiguration\ncrashLoopBackOff: {nope: 1}\nmaxPods: many\n",
		"kind: Pod\n",
		"{\"kind\": \"KubeletConfiguration\", \"syncFrequency\": \"-1s\"}",
		"nosuchfield: 1\n",
		"syncFrequency: 1\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		defer func() { configWarnings = nil }()
		dir := t.TempDir()
		path := filepath.Join(dir, "berth.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		var s Settings
		err := LoadConfigFile(path, &s)
		var h configHeader
		if yaml.Unmarshal(data, &h) == nil && h.Kind != "" && h.Kind != "BerthConfiguration" && h.Kind != kubeletKind && err == nil {
			t.Fatalf("kind %q accepted", h.Kind)
		}
		if err != nil {
			if !strings.Contains(err.Error(), path) && !strings.Contains(err.Error(), "config file") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		_ = s.Validate()
		out, err := yaml.Marshal(s)
		if err != nil {
			t.Fatalf("marshal accepted settings: %v", err)
		}
		again := filepath.Join(dir, "again.yaml")
		if err := os.WriteFile(again, append([]byte("kind: BerthConfiguration\n"), out...), 0o600); err != nil {
			t.Fatal(err)
		}
		var s2 Settings
		if err := LoadConfigFile(again, &s2); err != nil {
			t.Fatalf("settings written back do not read: %v\n%s", err, out)
		}
		if out2, _ := yaml.Marshal(s2); string(out2) != string(out) {
			t.Fatalf("settings changed on the way back:\n%s\nthen\n%s", out, out2)
		}
	})
}
