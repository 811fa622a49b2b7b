// Package packaging holds the tests of berth's release (release.sh): what
// the binaries, packages and signature are. check.sh lints the packages and
// runs the arm builds under qemu-user; e2e/systemdbed installs the .deb on
// a booted Debian.
package packaging

import (
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// release runs release.sh for linux/amd64 into a new directory, with the
// environment extra, and returns the directory and what it printed.
func release(t *testing.T, extra ...string) (string, string) {
	t.Helper()
	for _, tool := range []string{"dpkg-deb", "rpm", "ssh-keygen", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s not installed: `make testbed` installs what the release needs", tool)
		}
	}
	dir := t.TempDir()
	cmd := exec.Command("sh", "release.sh", dir)
	cmd.Env = append(os.Environ(), append([]string{"RELEASE_ARCHES=amd64", "VERSION=v1.2.3-4-gabcdef"}, extra...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("release.sh: %v\n%s", err, out)
	}
	return dir, string(out)
}

// TestRelease checks one release: the binary is static, stripped of
// build paths and carries its module and VCS data; SHA256SUMS covers
// every file and its SSH signature verifies with the signing key and
// fails on a changed SHA256SUMS; a second build of the same commit is
// byte-identical; and the .deb and .rpm hold the files, modes, conffiles
// and scripts Debian's and RPM's conventions ask for.
func TestRelease(t *testing.T) {
	keyDir := t.TempDir()
	key := filepath.Join(keyDir, "key")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "throwaway", "-f", key).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	dir, printed := release(t, "BERTH_RELEASE_KEY="+key)
	const version = "1.2.3+4+gabcdef"
	bin := filepath.Join(dir, "berth_"+version+"_linux_amd64")
	deb := filepath.Join(dir, "berth_"+version+"_amd64.deb")
	rpm := filepath.Join(dir, "berth-"+version+"-1.x86_64.rpm")

	t.Run("binary", func(t *testing.T) {
		f, err := elf.Open(bin)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Errorf("%s has an ELF interpreter: not static", bin)
			}
		}
		info, err := buildinfo.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		if info.Path != "github.com/berth-agent/berth/cmd/berth" || info.Main.Path != "github.com/berth-agent/berth" {
			t.Errorf("build info names %s in %s", info.Path, info.Main.Path)
		}
		settings := map[string]string{}
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
		for k, want := range map[string]string{"CGO_ENABLED": "0", "-trimpath": "true", "GOOS": "linux", "GOARCH": "amd64", "vcs": "git"} {
			if settings[k] != want {
				t.Errorf("build setting %s = %q, want %q", k, settings[k], want)
			}
		}
		for _, k := range []string{"vcs.revision", "vcs.time"} {
			if settings[k] == "" {
				t.Errorf("no %s in the build info: go version -m would not show the commit", k)
			}
		}
		out, err := exec.Command(bin, "version", "--client").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "v1.2.3-4-gabcdef") {
			t.Errorf("berth version: %q, %v", out, err)
		}
	})

	t.Run("checksums and signature", func(t *testing.T) {
		sums, err := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if n := e.Name(); !strings.HasPrefix(n, "SHA256SUMS") && !regexp.MustCompile(`(?m)  `+regexp.QuoteMeta(n)+`$`).Match(sums) {
				t.Errorf("SHA256SUMS lacks %s", n)
			}
		}
		check := exec.Command("sha256sum", "-c", "SHA256SUMS")
		check.Dir = dir
		if out, err := check.CombinedOutput(); err != nil {
			t.Errorf("sha256sum -c: %v\n%s", err, out)
		}
		pub, err := os.ReadFile(key + ".pub")
		if err != nil {
			t.Fatal(err)
		}
		fields := strings.Fields(string(pub))
		signers := filepath.Join(t.TempDir(), "allowed_signers")
		line := "berth-release namespaces=\"berth-release\" " + fields[0] + " " + fields[1] + "\n"
		if err := os.WriteFile(signers, []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
		verify := func(data []byte) error {
			cmd := exec.Command("ssh-keygen", "-Y", "verify", "-f", signers, "-I", "berth-release", "-n", "berth-release", "-s", filepath.Join(dir, "SHA256SUMS.sig"))
			cmd.Stdin = bytes.NewReader(data)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Logf("ssh-keygen -Y verify: %s", out)
			}
			return err
		}
		if err := verify(sums); err != nil {
			t.Errorf("the signature of SHA256SUMS does not verify: %v", err)
		}
		if err := verify(append([]byte("0000  evil\n"), sums...)); err == nil {
			t.Error("the signature verifies a changed SHA256SUMS")
		}
		if !strings.Contains(printed, "not in packaging/release-allowed-signers") {
			t.Errorf("release.sh does not warn that the throwaway key is not the published one:\n%s", printed)
		}
	})

	t.Run("reproducible and unsigned", func(t *testing.T) {
		again, printed := release(t)
		if !strings.Contains(printed, "SHA256SUMS IS NOT SIGNED") {
			t.Errorf("an unsigned release does not say so:\n%s", printed)
		}
		if _, err := os.Stat(filepath.Join(again, "SHA256SUMS.sig")); err == nil {
			t.Error("an unsigned release has a SHA256SUMS.sig")
		}
		a, _ := os.ReadFile(filepath.Join(dir, "SHA256SUMS"))
		b, _ := os.ReadFile(filepath.Join(again, "SHA256SUMS"))
		if !bytes.Equal(a, b) {
			t.Errorf("two builds of one commit differ:\n%s\n%s", a, b)
		}
	})

	t.Run("deb", func(t *testing.T) {
		field := func(name string) string {
			b, err := exec.Command("dpkg-deb", "-f", deb, name).Output()
			if err != nil {
				t.Fatalf("dpkg-deb -f %s: %v", name, err)
			}
			return strings.TrimSpace(string(b))
		}
		for name, want := range map[string]string{"Package": "berth", "Version": version, "Architecture": "amd64"} {
			if got := field(name); got != want {
				t.Errorf("%s: %q, want %q", name, got, want)
			}
		}
		contents, err := exec.Command("dpkg-deb", "-c", deb).Output()
		if err != nil {
			t.Fatal(err)
		}
		wantFiles(t, string(contents), []string{
			"-rwxr-xr-x root/root .* ./usr/bin/berth$",
			"-rw-r--r-- root/root .* ./usr/lib/systemd/system/berth.service$",
			"-rw-r--r-- root/root .* ./usr/lib/sysusers.d/berth.conf$",
			"-rw------- root/root .* ./etc/berth/berth.yaml$",
			"-rw-r--r-- root/root .* ./etc/default/berth$",
			"-rw-r--r-- root/root .* ./usr/share/doc/berth/copyright$",
			"./usr/share/doc/berth/changelog.gz$",
			"./usr/share/doc/berth/README.md.gz$",
			"./usr/share/doc/berth/docs/install.md.gz$",
			"./usr/share/doc/berth/examples/http/pods.yaml$",
			"./usr/share/man/man1/berth.1.gz$",
			"./usr/share/bash-completion/completions/berth$",
			"./usr/share/zsh/vendor-completions/_berth$",
			"./usr/share/fish/vendor_completions.d/berth.fish$",
			"./usr/share/lintian/overrides/berth$",
		})
		for _, absent := range []string{" ./lib/systemd/", "./etc/kubernetes/", "doc/berth/README.md$"} {
			if regexp.MustCompile(`(?m)` + absent).MatchString(string(contents)) {
				t.Errorf("the package holds %s:\n%s", absent, contents)
			}
		}
		ctl := t.TempDir()
		if b, err := exec.Command("dpkg-deb", "-e", deb, ctl).CombinedOutput(); err != nil {
			t.Fatalf("dpkg-deb -e: %v\n%s", err, b)
		}
		conffiles, err := os.ReadFile(filepath.Join(ctl, "conffiles"))
		if err != nil || string(conffiles) != "/etc/berth/berth.yaml\n/etc/default/berth\n" {
			t.Errorf("conffiles = %q (%v), want the config and the defaults file", conffiles, err)
		}
		postinst, _ := os.ReadFile(filepath.Join(ctl, "postinst"))
		for _, want := range []string{"deb-systemd-helper --quiet was-enabled", "deb-systemd-helper update-state", "_dh_action=try-restart", "deb-systemd-invoke $_dh_action"} {
			if !strings.Contains(string(postinst), want) {
				t.Errorf("postinst lacks %q", want)
			}
		}
		postrm, _ := os.ReadFile(filepath.Join(ctl, "postrm"))
		for _, want := range []string{"deb-systemd-helper mask", "deb-systemd-helper purge", "deb-systemd-helper unmask"} {
			if !strings.Contains(string(postrm), want) {
				t.Errorf("postrm lacks %q", want)
			}
		}
	})

	t.Run("rpm", func(t *testing.T) {
		list, err := exec.Command("rpm", "-qlp", rpm).Output()
		if err != nil {
			t.Fatal(err)
		}
		wantFiles(t, string(list), []string{
			"^/usr/bin/berth$", "^/usr/lib/systemd/system/berth.service$", "^/usr/lib/systemd/system-preset/90-berth.preset$",
			"^/usr/lib/sysusers.d/berth.conf$", "^/etc/berth/berth.yaml$", "^/etc/default/berth$",
			"^/usr/share/licenses/berth/LICENSE$", "^/usr/share/doc/berth/copyright$", "^/usr/share/doc/berth/changelog.gz$",
			"^/usr/share/man/man1/berth.1.gz$", "^/usr/share/zsh/site-functions/_berth$",
		})
		config, err := exec.Command("rpm", "-qcp", rpm).Output()
		if err != nil || string(config) != "/etc/berth/berth.yaml\n/etc/default/berth\n" {
			t.Errorf("config files = %q (%v)", config, err)
		}
		scripts, err := exec.Command("rpm", "-qp", "--scripts", rpm).Output()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"preset berth.service", "disable --now berth.service", "try-restart berth.service", "groupadd --system berth"} {
			if !strings.Contains(string(scripts), want) {
				t.Errorf("the scriptlets lack %q:\n%s", want, scripts)
			}
		}
	})
}

// wantFiles reports each pattern (a multi-line regexp) listing lacks.
func wantFiles(t *testing.T, listing string, patterns []string) {
	t.Helper()
	for _, want := range patterns {
		if !regexp.MustCompile(`(?m)` + want).MatchString(listing) {
			t.Errorf("the package lacks %s:\n%s", want, listing)
		}
	}
}
