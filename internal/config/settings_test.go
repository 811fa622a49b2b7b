package config

import (
	"io"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseSettings(t *testing.T) {
	kubelet := writeConfig(t, `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: /srv/manifests
staticPodURL: http://10.0.0.1/pods
staticPodURLHeader:
  Authorization: ["Bearer x"]
fileCheckFrequency: 5s
syncFrequency: 30s
containerRuntimeEndpoint: unix:///run/crio/crio.sock
maxPods: 20
clusterDNS: [10.96.0.10]
evictionHard:
  memory.available: 100Mi
`)
	berth := writeConfig(t, `apiVersion: berth.io/v1alpha1
kind: BerthConfiguration
staticPodPath: /opt/pods
listen: ""
crashLoopBackOffInitial: 1s
crashLoopBackOffMax: 30s
`)
	tests := []struct {
		name  string
		args  []string
		check func(t *testing.T, s Settings)
	}{
		{"defaults are the kubelet's", nil, func(t *testing.T, s Settings) {
			if !reflect.DeepEqual(s, Defaults()) {
				t.Errorf("got %+v", s)
			}
		}},
		{"flags", []string{"--pod-manifest-path", "/m", "--manifest-url-header", "A: b", "--manifest-url-header", "A:c", "--cluster-dns", "1.1.1.1,8.8.8.8", "--sync-frequency", "10s"}, func(t *testing.T, s Settings) {
			if s.PodManifestPath != "/m" || s.SyncFrequency.Duration != 10*time.Second {
				t.Errorf("path=%q sync=%s", s.PodManifestPath, s.SyncFrequency.Duration)
			}
			if got := s.manifestHeaders().Values("A"); !reflect.DeepEqual(got, []string{"b", "c"}) {
				t.Errorf("headers = %v", got)
			}
			if !reflect.DeepEqual(s.ClusterDNS, []string{"1.1.1.1", "8.8.8.8"}) {
				t.Errorf("cluster dns = %v", s.ClusterDNS)
			}
		}},
		{"kubelet config carries its static-pod fields", []string{"--config", kubelet}, func(t *testing.T, s Settings) {
			if s.PodManifestPath != "/srv/manifests" || s.ManifestURL != "http://10.0.0.1/pods" || s.MaxPods != 20 ||
				s.FileCheckFrequency.Duration != 5*time.Second || s.ContainerRuntimeEndpoint != "unix:///run/crio/crio.sock" {
				t.Errorf("got %+v", s)
			}
			if got := s.manifestHeaders().Get("Authorization"); got != "Bearer x" {
				t.Errorf("header = %q", got)
			}
			if s.RootDir != "/var/lib/berth" {
				t.Errorf("unset fields keep defaults: root dir = %q", s.RootDir)
			}
		}},
		{"flags win over the file, lists replaced", []string{"--config", kubelet, "--max-pods", "7", "--cluster-dns", "9.9.9.9"}, func(t *testing.T, s Settings) {
			if s.MaxPods != 7 || !reflect.DeepEqual(s.ClusterDNS, []string{"9.9.9.9"}) || s.PodManifestPath != "/srv/manifests" {
				t.Errorf("got maxPods=%d dns=%v path=%q", s.MaxPods, s.ClusterDNS, s.PodManifestPath)
			}
		}},
		{"labels and URL placeholders", []string{"--config", writeConfig(t, `staticPodURL: https://m.example/{label.site}/{arch}/{node}.yaml
manifestURLAllowedSigners: /etc/berth/allowed_signers
labels:
  site: lyon
  example.com/ring: canary
`)}, func(t *testing.T, s Settings) {
			if s.ManifestURLSigners != "/etc/berth/allowed_signers" || s.Labels["example.com/ring"] != "canary" {
				t.Errorf("got %+v", s)
			}
			got, err := s.manifestURL("edge-7")
			if want := "https://m.example/lyon/" + runtime.GOARCH + "/edge-7.yaml"; err != nil || got != want {
				t.Errorf("manifestURL = %q, %v; want %q", got, err, want)
			}
		}},
		{"berth config", []string{"--config", berth}, func(t *testing.T, s Settings) {
			if s.PodManifestPath != "/opt/pods" || s.Listen != "" || s.CrashLoopBackoffMax.Duration != 30*time.Second {
				t.Errorf("got %+v", s)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, err := Parse(tt.args, io.Discard)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, s)
		})
	}
	t.Run("kubelet fields berth ignores are named", func(t *testing.T) {
		_, warnings, err := Parse([]string{"--config", kubelet}, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if len(warnings) != 1 || !strings.Contains(warnings[0], "evictionHard") {
			t.Errorf("warnings = %q", warnings)
		}
	})
}

func TestParseSettingsErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no source", []string{"--pod-manifest-path", ""}, "no pod source"},
		{"bad duration", []string{"--sync-frequency", "soon"}, "sync-frequency"},
		{"negative", []string{"--file-check-frequency", "-1s"}, "--file-check-frequency must be positive"},
		{"backoff order", []string{"--crashloop-backoff-initial", "1m", "--crashloop-backoff-max", "10s"}, "below --crashloop-backoff-initial"},
		{"bad header", []string{"--manifest-url-header", "novalue"}, "want Key:Value"},
		{"CR/LF in a header", []string{"--manifest-url", "http://h/p", "--manifest-url-header", "X-Key:abc\r\nX-Evil: 1"}, "--manifest-url-header: header X-Key: value has a CR, LF"},
		{"CR/LF in a config header", []string{"--config", writeConfig(t, "staticPodURL: http://h/p\nstaticPodURLHeader: {X-Key: [\"a\\nb\"]}\n")}, "config.yaml:2: staticPodURLHeader: header X-Key"},
		{"bad header name", []string{"--manifest-url", "http://h/p", "--manifest-url-header", "X Key:abc"}, `invalid header name "X Key"`},
		{"manifest permissions", []string{"--manifest-permissions", "lax"}, "--manifest-permissions: want strict or warn"},
		{"CA for plain http", []string{"--manifest-url", "http://h/p", "--manifest-url-ca", "/ca.pem"}, "--manifest-url-ca needs an https://"},
		{"log level", []string{"--log-level", "loud"}, "--log-level"},
		{"signers without URL", []string{"--manifest-url-allowed-signers", "/etc/berth/allowed_signers"}, "--manifest-url-allowed-signers needs a --manifest-url"},
		{"unknown placeholder", []string{"--manifest-url", "https://h/{host}.yaml"}, "--manifest-url: URL \"https://h/%7Bhost%7D.yaml\": placeholder {host}: unknown"},
		{"missing label", []string{"--manifest-url", "https://h/{label.site}.yaml"}, `no label "site"`},
		{"bad label key", []string{"--config", writeConfig(t, "labels: {\"-site\": a}\n")}, `labels: key "-site": name part must consist of alphanumeric`},
		{"bad label value", []string{"--config", writeConfig(t, "labels: {site: \"lyon/3\"}\n")}, `labels: site: value "lyon/3": a valid label must be`},
		{"status URL scheme", []string{"--status-url", "ftp://h/s?k=s3cret"}, `--status-url "ftp://h/s?k=REDACTED" must be an http://`},
		{"status CA for plain http", []string{"--status-url", "http://h/s", "--status-url-ca", "/ca.pem"}, "--status-url-ca needs an https://"},
		{"status header", []string{"--status-url", "http://h/s", "--status-url-header", "X-Key:a\x01"}, "--status-url-header"},
		{"status period", []string{"--status-period", "1s"}, "--status-period must be at least 10s"},
		{"poll back-off", []string{"--http-check-backoff-max", "0s"}, "--http-check-backoff-max must be positive"},
		{"stray argument", []string{"extra"}, `unexpected argument "extra"`},
		{"unknown field in berth config", []string{"--config", writeConfig(t, "staticPodPath: /x\nstaticPodPaht: /y\n")}, "config.yaml:2: staticPodPaht: unknown field (did you mean staticPodPath?)"},
		{"foreign kind", []string{"--config", writeConfig(t, "kind: Pod\n")}, `config.yaml:1: kind: want BerthConfiguration (or a kubelet's KubeletConfiguration), got "Pod"`},
		{"missing file", []string{"--config", "/nonexistent/berth.yaml"}, "/nonexistent/berth.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := Parse(tt.args, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestListenPodsSetting(t *testing.T) {
	for _, v := range []string{"none", "redacted", "full"} {
		if _, _, err := Parse([]string{"--listen-pods", v}, io.Discard); err != nil {
			t.Errorf("--listen-pods %s: %v", v, err)
		}
	}
	if _, _, err := Parse([]string{"--listen-pods", "all"}, io.Discard); err == nil || !strings.Contains(err.Error(), "--listen-pods") {
		t.Errorf("--listen-pods all: %v, want an error naming the flag", err)
	}
	s, _, err := Parse(nil, io.Discard)
	if err != nil || s.ListenPods != "none" {
		t.Errorf("default --listen-pods = %q %v, want none", s.ListenPods, err)
	}
}

// TestResolveCommandFlags: a command that binds berth run's settings
// beside flags of its own (berth doctor's --run, -o) resolves the
// settings with a config file as run does; its own flags are no setting.
func TestResolveCommandFlags(t *testing.T) {
	cfg := writeConfig(t, "staticPodPath: /from/file\nsyncFrequency: 7s\n")
	var configPath, output string
	var smoke bool
	s := Defaults()
	fs := pflag.NewFlagSet("berth doctor", pflag.ContinueOnError)
	fs.BoolVar(&smoke, "run", false, "")
	fs.StringVarP(&output, "output", "o", "", "")
	BindFlags(fs, &s, &configPath)
	if err := fs.Parse([]string{"--run", "-o", "json", "--config", cfg, "--pod-manifest-path", "/from/flag"}); err != nil {
		t.Fatal(err)
	}
	got, _, err := Resolve(fs, s, configPath)
	if err != nil {
		t.Fatal(err)
	}
	if got.PodManifestPath != "/from/flag" || got.SyncFrequency.Duration != 7*time.Second || !smoke || output != "json" {
		t.Errorf("path %q, sync %s, --run %v, -o %q; want the flag's path, the file's 7s and the command's own flags", got.PodManifestPath, got.SyncFrequency.Duration, smoke, output)
	}
}
