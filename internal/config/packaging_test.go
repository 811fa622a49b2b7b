package config

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const (
	unitPath          = "../../packaging/systemd/berth.service"
	defaultConfigPath = "../../packaging/berth.yaml"
)

// TestDefaultConfigFile checks packaging/berth.yaml: it loads as is, it
// names every setting, and the defaults its comments show are the real
// ones (uncommenting them all changes nothing).
func TestDefaultConfigFile(t *testing.T) {
	s := Defaults()
	if _, err := LoadConfigFile(defaultConfigPath, &s); err != nil {
		t.Fatalf("the shipped config does not load: %v", err)
	}
	data, err := os.ReadFile(defaultConfigPath)
	if err != nil {
		t.Fatal(err)
	}
	for key := range settingsJSON(t, fullSettingsForKeys()) {
		if !regexp.MustCompile(`(?m)^#` + key + `: `).Match(data) {
			t.Errorf("berth.yaml does not show %s as `#%s: <default>`", key, key)
		}
	}
	uncommented := regexp.MustCompile(`(?m)^#([a-zA-Z]+: )`).ReplaceAll(data, []byte("$1"))
	path := filepath.Join(t.TempDir(), "berth.yaml")
	if err := os.WriteFile(path, uncommented, 0o644); err != nil {
		t.Fatal(err)
	}
	got := Defaults()
	if _, err := LoadConfigFile(path, &got); err != nil {
		t.Fatalf("berth.yaml with every setting uncommented: %v", err)
	}
	gotJSON, wantJSON := settingsJSON(t, got), settingsJSON(t, Defaults())
	for k, v := range wantJSON {
		if renderDefault(gotJSON[k]) != renderDefault(v) {
			t.Errorf("berth.yaml shows %s: %v, but the default is %v", k, gotJSON[k], v)
		}
	}
	for k, v := range gotJSON {
		if _, ok := wantJSON[k]; !ok {
			t.Errorf("berth.yaml sets %s: %v, which has no default", k, v)
		}
	}
}

// TestSystemdUnit checks the directives berth's contract with systemd
// rests on, and has systemd-analyze verify the unit where it is installed.
func TestSystemdUnit(t *testing.T) {
	data, err := os.ReadFile(unitPath)
	if err != nil {
		t.Fatal(err)
	}
	unit := string(data)
	for _, want := range []string{
		"Type=notify", "KillMode=process", "Restart=always", "WatchdogSec=",
		"Wants=containerd.service", "After=containerd.service",
		"ExecStart=/usr/bin/berth run --config /etc/berth/berth.yaml",
		"RuntimeDirectory=berth", "StateDirectory=berth", "LogsDirectory=pods",
		"RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK",
		"CapabilityBoundingSet=", "SystemCallFilter=@system-service @mount",
	} {
		if !strings.Contains(unit, want+"\n") && !strings.Contains(unit, want) {
			t.Errorf("berth.service lacks %q", want)
		}
	}
	// Any of these would give berth a private mount namespace, hiding the
	// tmpfs it mounts for emptyDir medium Memory from containerd.
	for _, forbidden := range []string{"ProtectSystem=", "ProtectHome=", "PrivateTmp=", "PrivateDevices=", "PrivateMounts=",
		"ProtectKernelTunables=", "ProtectKernelModules=", "ProtectKernelLogs=", "ProtectControlGroups=", "ReadOnlyPaths=",
		"InaccessiblePaths=", "ProtectProc=", "MountFlags=", "ProtectHostname=", "TemporaryFileSystem="} {
		if regexp.MustCompile(`(?m)^` + forbidden).MatchString(unit) {
			t.Errorf("berth.service sets %s: it gives berth its own mount namespace", forbidden)
		}
	}

	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed: `apt-get install systemd` to verify the unit")
	}
	// verify wants ExecStart's binary to exist: point it at this test's
	// own executable.
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	copyPath := filepath.Join(dir, "berth.service")
	if err := os.WriteFile(copyPath, []byte(strings.ReplaceAll(unit, "/usr/bin/berth", self)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", copyPath).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}
