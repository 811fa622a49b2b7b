package config

import (
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// pluginBinDir is a bin directory with an executable for each name.
func pluginBinDir(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const goodProviders = `apiVersion: kubelet.config.k8s.io/v1
kind: CredentialProviderConfig
providers:
  - name: ecr-credential-provider
    matchImages:
      - "*.dkr.ecr.*.amazonaws.com"
      - "registry.example.com:5000/team"
    defaultCacheDuration: 12h
    apiVersion: credentialprovider.kubelet.k8s.io/v1
    args: [get-credentials]
    env:
      - name: AWS_PROFILE
        value: node
  - name: acr-credential-provider
    matchImages: ["*.azurecr.io"]
    defaultCacheDuration: 10m
    apiVersion: credentialprovider.kubelet.k8s.io/v1beta1
`

// TestCredentialProviderConfig: the CredentialProviderConfig is read as
// the kubelet reads it, every problem named with its file, line and
// field; tokenAttributes is refused; each provider's executable must be
// in the bin dir.
func TestCredentialProviderConfig(t *testing.T) {
	bin := pluginBinDir(t, "ecr-credential-provider", "acr-credential-provider", "p")
	header := "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n"
	provider := "  - name: p\n    matchImages: [reg.example.com]\n    defaultCacheDuration: 1m\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n"
	tests := []struct {
		name, body string
		wantErrs   []string // each FILE-relative: ":LINE: field: message" substrings
	}{
		{"good", goodProviders, nil},
		{"json", `{"apiVersion":"kubelet.config.k8s.io/v1","kind":"CredentialProviderConfig","providers":[{"name":"p","matchImages":["reg.example.com"],"defaultCacheDuration":"0s","apiVersion":"credentialprovider.kubelet.k8s.io/v1"}]}`, nil},
		{"token attributes refused", header + provider + "    tokenAttributes:\n      serviceAccountTokenAudience: sts.amazonaws.com\n",
			[]string{":8: providers[0].tokenAttributes: service account token mode needs tokens from an API server"}},
		{"wrong kind and version", "apiVersion: kubelet.config.k8s.io/v2\nkind: KubeletConfiguration\nproviders: []\n",
			[]string{`:1: apiVersion: want kubelet.config.k8s.io/v1, got "kubelet.config.k8s.io/v2"`, `:2: kind: want CredentialProviderConfig, got "KubeletConfiguration"`}},
		{"unknown fields", header + provider + "    image: x\nextra: 1\n",
			[]string{":8: providers[0].image: unknown field", ":9: extra: unknown field"}},
		{"missing fields", header + "  - name: p\n", []string{
			":4: providers[0].apiVersion: missing", ":4: providers[0].matchImages: at least one image pattern",
			":4: providers[0].defaultCacheDuration: missing"}},
		{"bad values", header + "  - name: ../p\n    matchImages: [\"%zz\"]\n    defaultCacheDuration: -1m\n    apiVersion: credentialprovider.kubelet.k8s.io/v2\n    args: arg\n", []string{
			`:4: providers[0].name: name "../p" must be a plain file name`,
			`:5: providers[0].matchImages[0]: "%zz" is not an image pattern`,
			`:6: providers[0].defaultCacheDuration: must not be negative, got -1m0s`,
			`:7: providers[0].apiVersion: want one of credentialprovider.kubelet.k8s.io/v1alpha1, credentialprovider.kubelet.k8s.io/v1beta1, credentialprovider.kubelet.k8s.io/v1, got "credentialprovider.kubelet.k8s.io/v2"`,
			`:8: providers[0].args: must be a list of strings, got string "arg"`}},
		{"bad duration", header + strings.Replace(provider, "1m", "soon", 1),
			[]string{`:6: providers[0].defaultCacheDuration: must be a duration such as 12h or 5m, got string "soon"`}},
		{"duplicate names", header + provider + provider, []string{`:8: providers[1].name: "p" is given twice (first at `}},
		{"no executable", header + strings.Replace(provider, "name: p", "name: missing", 1),
			[]string{":4: providers[0].name: no plugin missing in --image-credential-provider-bin-dir: executable: lstat "}},
		{"no providers", header, []string{"no providers: at least one is needed"}},
		{"providers not a list", "apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders: {}\n", []string{":3: providers: must be a list, got a mapping"}},
		{"syntax", header + "  - name: [\n", []string{":4: did not find expected node content"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "providers.yaml")
			if err := os.WriteFile(path, []byte(tt.body), 0o600); err != nil {
				t.Fatal(err)
			}
			_, _, err := Parse([]string{"--image-credential-provider-config", path, "--image-credential-provider-bin-dir", bin}, io.Discard)
			if len(tt.wantErrs) == 0 {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want %q", tt.wantErrs)
			}
			for _, want := range tt.wantErrs {
				if want[0] == ':' {
					want = path + want
				}
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error\n%v\nlacks %q", err, want)
				}
			}
		})
	}
}

// TestCredentialProviderSettings: the providers reach the runtime
// manager's options in order, from one file or a directory of them
// (merged in name order); the config needs the bin dir and the other
// way round; the timeout is positive; a berth config file sets them,
// its line named in their errors.
func TestCredentialProviderSettings(t *testing.T) {
	bin := pluginBinDir(t, "ecr-credential-provider", "acr-credential-provider", "p")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "20-p.yml"), []byte("apiVersion: kubelet.config.k8s.io/v1\nkind: CredentialProviderConfig\nproviders:\n  - name: p\n    matchImages: [reg.example.com]\n    defaultCacheDuration: 1m\n    apiVersion: credentialprovider.kubelet.k8s.io/v1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "10-cloud.yaml"), []byte(goodProviders), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("not read"), 0o600); err != nil {
		t.Fatal(err)
	}
	s, _, err := Parse([]string{"--image-credential-provider-config", dir, "--image-credential-provider-bin-dir", bin, "--image-credential-provider-timeout", "10s"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	opts, err := s.RuntimeOptions("node", "", nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range opts.CredentialProviders {
		names = append(names, p.Name)
	}
	if got := strings.Join(names, " "); got != "ecr-credential-provider acr-credential-provider p" || opts.CredentialProviderBinDir != bin || opts.CredentialProviderTimeout != 10*time.Second {
		t.Errorf("providers %q, bin dir %q, timeout %s", got, opts.CredentialProviderBinDir, opts.CredentialProviderTimeout)
	}
	ecr := opts.CredentialProviders[0]
	if ecr.DefaultCacheDuration.Duration != 12*time.Hour || ecr.Args[0] != "get-credentials" || ecr.Env[0].Value != "node" || ecr.MatchImages[1] != "registry.example.com:5000/team" {
		t.Errorf("ecr provider %+v", ecr)
	}

	writable := filepath.Join(t.TempDir(), "providers.yaml")
	if err := os.WriteFile(writable, []byte(goodProviders), 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(writable, 0o666); err != nil {
		t.Fatal(err)
	}
	openDir := t.TempDir()
	if err := os.Chmod(openDir, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--image-credential-provider-config", dir}, "--image-credential-provider-config needs an --image-credential-provider-bin-dir"},
		{[]string{"--image-credential-provider-bin-dir", bin}, "--image-credential-provider-bin-dir needs an --image-credential-provider-config"},
		{[]string{"--image-credential-provider-timeout", "0s"}, "--image-credential-provider-timeout must be positive"},
		{[]string{"--image-credential-provider-config", "/nonexistent", "--image-credential-provider-bin-dir", bin}, "--image-credential-provider-config: stat /nonexistent: no such file or directory"},
		{[]string{"--image-credential-provider-config", t.TempDir(), "--image-credential-provider-bin-dir", bin}, "holds no .json, .yaml or .yml file"},
		{[]string{"--image-credential-provider-config", writable, "--image-credential-provider-bin-dir", bin}, "--image-credential-provider-config: " + writable + ": writable by group or others"},
		{[]string{"--image-credential-provider-config", openDir, "--image-credential-provider-bin-dir", bin}, "--image-credential-provider-config: " + openDir + ": writable by group or others"},
		{[]string{"--image-credential-provider-config", "/dev/zero", "--image-credential-provider-bin-dir", bin}, "--image-credential-provider-config: /dev/zero: not a regular file"},
	} {
		if _, _, err := Parse(tt.args, io.Discard); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: err = %v, want %q", tt.args, err, tt.want)
		}
	}

	cfg := writeConfig(t, "apiVersion: berth.io/v1alpha1\nkind: BerthConfiguration\nimageCredentialProviderConfig: /nonexistent\nimageCredentialProviderBinDir: "+bin+"\nimageCredentialProviderTimeout: 30s\n")
	if _, _, err := Parse([]string{"--config", cfg}, io.Discard); err == nil || !strings.Contains(err.Error(), cfg+":3: imageCredentialProviderConfig: stat /nonexistent") {
		t.Errorf("config file: err = %v", err)
	}
}
