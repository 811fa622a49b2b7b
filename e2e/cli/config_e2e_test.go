//go:build e2e

package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigFile: berth config check lists every problem of a broken file
// with its line and exits 1; berth run starts from a versioned file (here
// with logFormat: json, so every log line is a JSON object) and from an
// unversioned file with an older field name, which it warns about.
func TestConfigFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	broken := write("broken.yaml", "apiVersion: berth.io/v1alpha1\nkind: BerthConfiguration\nmaxPods: many\nstaticPodPth: /x\nmaxPods: 3\n")
	cmd := []string{"config", "check", broken}
	out, errb, code := berth(t, &daemon{}, cmd...)
	want := broken + `:3: maxPods: must be an integer, got string "many"` + "\n" +
		broken + ":4: staticPodPth: unknown field (did you mean staticPodPath?)\n" +
		broken + ":5: maxPods: given twice (first on line 3)\n"
	if code != 1 || out != want {
		t.Errorf("berth config check: exit %d, stdout\n%s\nwant\n%s\nstderr %s", code, out, want, errb)
	}

	t.Run("versioned", func(t *testing.T) {
		conf := write("berth.yaml", "apiVersion: berth.io/v1alpha1\nkind: BerthConfiguration\nlogFormat: json\nstaticPodPathPermissions: warn\n")
		if out, errb, code := berth(t, &daemon{}, "config", "check", conf); code != 0 || out != conf+": ok (0 warnings)\n" || errb != "" {
			t.Errorf("berth config check: exit %d, stdout %q, stderr %q", code, out, errb)
		}
		d := startDaemon(t, map[string]string{"ticker.yaml": tickerPod}, "--config", conf)
		waitFor(t, "berth is ready, logged as JSON", func() (bool, string) {
			d.mu.Lock()
			log := d.log.String()
			d.mu.Unlock()
			for _, line := range strings.Split(log, "\n") {
				var rec map[string]any
				if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "berth is ready" {
					return true, log
				}
			}
			return false, log
		})
		d.mu.Lock()
		log := d.log.String()
		d.mu.Unlock()
		for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
			if !json.Valid([]byte(line)) {
				t.Errorf("a log line that is no JSON object: %q", line)
			}
		}
		if strings.Contains(log, "deprecated") {
			t.Errorf("the versioned file warns:\n%s", log)
		}
	})

	t.Run("unversioned with an older name", func(t *testing.T) {
		conf := write("old.yaml", "kind: BerthConfiguration\nmanifestPermissions: warn\n")
		d := startDaemon(t, map[string]string{"ticker.yaml": tickerPod}, "--config", conf)
		waitFor(t, "ticker Running", func() (bool, string) {
			out, errb, _ := berth(t, d, "pods")
			f := row(out, "ticker-"+nodeName)
			return len(f) >= 3 && f[2] == "Running", out + errb
		})
		d.mu.Lock()
		log := d.log.String()
		d.mu.Unlock()
		for _, want := range []string{
			conf + ":1: a config file without apiVersion is deprecated",
			conf + ":2: manifestPermissions is deprecated: rename it staticPodPathPermissions",
		} {
			if !strings.Contains(log, want) {
				t.Errorf("berth's log has no %q:\n%s", want, log)
			}
		}
	})
}
