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
	if err := LoadConfigFile(defaultConfigPath, &s); err != nil {
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
	if err := LoadConfigFile(path, &got); err != nil {
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

// TestDebPackage builds the package as `make deb` does and checks what it
// installs.
func TestDebPackage(t *testing.T) {
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Skip("dpkg-deb not installed")
	}
	// A small stand-in keeps the compression quick; the script only copies
	// the binary.
	out := t.TempDir()
	fake := filepath.Join(out, "berth")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho berth\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "../../packaging/deb/build.sh", fake, "v1.2.3-4-gabcdef", out)
	cmd.Env = append(os.Environ(), "DEB_ARCH=arm64")
	printed, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("build.sh: %v\n%s", err, printed)
	}
	deb := strings.TrimSpace(string(printed))
	if want := filepath.Join(out, "berth_1.2.3+4+gabcdef_arm64.deb"); deb != want {
		t.Fatalf("build.sh printed %q, want %q", deb, want)
	}
	field := func(name string) string {
		b, err := exec.Command("dpkg-deb", "-f", deb, name).Output()
		if err != nil {
			t.Fatalf("dpkg-deb -f %s: %v", name, err)
		}
		return strings.TrimSpace(string(b))
	}
	for name, want := range map[string]string{"Package": "berth", "Version": "1.2.3+4+gabcdef", "Architecture": "arm64"} {
		if got := field(name); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	contents, err := exec.Command("dpkg-deb", "-c", deb).Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"-rwxr-xr-x root/root .* ./usr/bin/berth$",
		"-rw-r--r-- root/root .* ./lib/systemd/system/berth.service$",
		"-rw------- root/root .* ./etc/berth/berth.yaml$",
		"drwxr-xr-x root/root .* ./etc/kubernetes/manifests/$",
		"./usr/share/doc/berth/examples/http/pods.yaml$",
		"./usr/share/doc/berth/docs/install.md$",
	} {
		if !regexp.MustCompile(`(?m)` + want).Match(contents) {
			t.Errorf("package lacks %s:\n%s", want, contents)
		}
	}
	ctl := t.TempDir()
	if b, err := exec.Command("dpkg-deb", "-e", deb, ctl).CombinedOutput(); err != nil {
		t.Fatalf("dpkg-deb -e: %v\n%s", err, b)
	}
	conffiles, err := os.ReadFile(filepath.Join(ctl, "conffiles"))
	if err != nil || string(conffiles) != "/etc/berth/berth.yaml\n" {
		t.Errorf("conffiles = %q (%v), want the config file", conffiles, err)
	}
	for _, script := range []string{"postinst", "prerm", "postrm"} {
		if b, err := exec.Command("sh", "-n", filepath.Join(ctl, script)).CombinedOutput(); err != nil {
			t.Errorf("%s: %v\n%s", script, err, b)
		}
	}
}

// TestDebInstallKeepsConfigPrivate installs the package with dpkg into a
// scratch root (maintainer scripts chrooted there, so the host's systemd
// is never touched) and checks that /etc/berth/berth.yaml, which may hold a
// bearer token, is readable by root only: fresh, and over an edited copy an
// older package left world-readable.
func TestDebInstallKeepsConfigPrivate(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("dpkg runs the maintainer scripts in a chroot: needs root")
	}
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("busybox (the chroot's /bin/sh) not installed")
	}
	for _, tool := range []string{"dpkg", "dpkg-deb"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip(tool + " not installed")
		}
	}
	out := t.TempDir()
	fake := filepath.Join(out, "berth")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho berth\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "../../packaging/deb/build.sh", fake, "v1.2.3", out)
	cmd.Env = append(os.Environ(), "DEB_ARCH=all")
	printed, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("build.sh: %v\n%s", err, printed)
	}
	deb := strings.TrimSpace(string(printed))
	for _, tt := range []struct {
		name     string
		existing string // an edited config already there, mode 0644
	}{
		{name: "fresh install"},
		{name: "over an edited world-readable config", existing: "manifestURLHeader: {Authorization: [Bearer secret]}\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			for _, d := range []string{"var/lib/dpkg/updates", "var/lib/dpkg/info", "bin", "etc/berth"} {
				if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, f := range []string{"var/lib/dpkg/status", "var/lib/dpkg/available"} {
				if err := os.WriteFile(filepath.Join(root, f), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			b, err := os.ReadFile(busybox)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, "bin", "sh"), b, 0o755); err != nil {
				t.Fatal(err)
			}
			conf := filepath.Join(root, "etc", "berth", "berth.yaml")
			if tt.existing != "" {
				if err := os.WriteFile(conf, []byte(tt.existing), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			dpkg := exec.Command("dpkg", "--root="+root, "--force-confold", "--force-architecture", "-i", deb)
			if b, err := dpkg.CombinedOutput(); err != nil {
				t.Fatalf("dpkg -i: %v\n%s", err, b)
			}
			fi, err := os.Stat(conf)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o600 {
				t.Errorf("%s installed %v, want -rw-------", conf, fi.Mode().Perm())
			}
			if tt.existing != "" {
				if b, _ := os.ReadFile(conf); string(b) != tt.existing {
					t.Errorf("the admin's config was replaced: %q", b)
				}
			}
		})
	}
}
