package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	yamlv3 "go.yaml.in/yaml/v3"
)

// FuzzConfigFile reads arbitrary config files, berth's own and kubelet
// ones, as loadConfigFile does at start. It never panics; every error
// names the file; a kind berth does not know is refused; and what it
// accepts, written back as a versioned BerthConfiguration (Marshal),
// reads strictly to the same settings.
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
		"apiVersion: berth.io/v1alpha1\nkind: BerthConfiguration\nmaxPods: many\nstaticPodPth: /x\nclusterDNS: [a, {b: c}]\nlabels: {a: [b]}\n",
		"apiVersion: berth.io/v1\nkind: BerthConfiguration\n",
		"manifestURLCA: /a\nstaticPodURLCA: /b\nmaxPods: 1\nmaxPods: 2\n",
		"a: &x 1\nmaxPods: *x\n",
		"- 1\n",
		"key: [\n",
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
		dir := t.TempDir()
		path := filepath.Join(dir, "berth.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		var s Settings
		warnings, err := LoadConfigFile(path, &s)
		for _, w := range warnings {
			if !strings.HasPrefix(w, path) {
				t.Fatalf("warning does not name the file: %q", w)
			}
		}
		var root yamlv3.Node
		if yamlv3.Unmarshal(data, &root) == nil && len(root.Content) > 0 && root.Content[0].Kind == yamlv3.MappingNode && err == nil {
			doc := root.Content[0]
			for i := 0; i+1 < len(doc.Content); i += 2 {
				if kind := scalarOf(doc.Content[i+1]); doc.Content[i].Value == "kind" && kind != "" && kind != Kind && kind != kubeletKind {
					t.Fatalf("kind %q accepted", kind)
				}
			}
		}
		if err != nil {
			if !strings.Contains(err.Error(), path) && !strings.Contains(err.Error(), "config file") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		_ = s.Validate()
		out, err := s.Marshal()
		if err != nil {
			t.Fatalf("marshal accepted settings: %v", err)
		}
		again := filepath.Join(dir, "again.yaml")
		if err := os.WriteFile(again, out, 0o600); err != nil {
			t.Fatal(err)
		}
		var s2 Settings
		if warnings, err := LoadConfigFile(again, &s2); err != nil || len(warnings) > 0 {
			t.Fatalf("settings written back do not read cleanly: %v, warnings %q\n%s", err, warnings, out)
		}
		if out2, _ := s2.Marshal(); string(out2) != string(out) {
			t.Fatalf("settings changed on the way back:\n%s\nthen\n%s", out, out2)
		}
	})
}
