package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubeletconfigv1 "k8s.io/kubelet/config/v1"

	"github.com/berth-agent/berth/internal/images"
	"github.com/berth-agent/berth/internal/statefile"
)

// The kubelet's image credential provider plugins: --image-credential-
// provider-config names a CredentialProviderConfig file (or a directory
// of them: *.json, *.yaml and *.yml in name order, merged, as the kubelet
// reads one) and --image-credential-provider-bin-dir the directory of
// the plugins' executables. The files are read as berth's own config is:
// every problem at once, as FILE:LINE: field: message, each provider
// checked as the kubelet checks it, and its executable found as
// images.ResolvePlugin finds it at every run. Unlike the kubelet, berth
// reads only a regular file (never a FIFO or a device, nor through a
// final symbolic link), owned by root and writable by no one else.
const (
	// credentialProviderConfigKind is the files' kind.
	credentialProviderConfigKind = "CredentialProviderConfig"
	// maxCredentialProviderConfig bounds one file: a few providers take
	// a few hundred bytes.
	maxCredentialProviderConfig = 1 << 20
)

// credentialProviderConfigVersions are the apiVersions of the file the
// kubelet reads; the providers' fields berth uses are the same in each.
var credentialProviderConfigVersions = []string{"kubelet.config.k8s.io/v1", "kubelet.config.k8s.io/v1beta1", "kubelet.config.k8s.io/v1alpha1"}

// credentialProviders reads --image-credential-provider-config: the
// providers in order, or every problem. None without the flag.
func (s Settings) credentialProviders() ([]kubeletconfigv1.CredentialProvider, []error) {
	if s.ImageCredentialProviderConfig == "" {
		return nil, nil
	}
	files, err := credentialProviderFiles(s.ImageCredentialProviderConfig)
	if err != nil {
		return nil, []error{fmt.Errorf("--image-credential-provider-config: %w", err)}
	}
	var providers []kubeletconfigv1.CredentialProvider
	var errs []error
	seen := map[string]string{} // name -> where it was first given
	for _, path := range files {
		list, lines, fileErrs := decodeCredentialProviderFile(path)
		errs = append(errs, fileErrs...)
		for i, p := range list {
			where := fmt.Sprintf("%s:%d", path, lines[i])
			if first, dup := seen[p.Name]; dup && p.Name != "" {
				errs = append(errs, &FileError{Path: path, Line: lines[i], Field: fmt.Sprintf("providers[%d].name", i),
					Msg: fmt.Sprintf("%q is given twice (first at %s): names must be unique", p.Name, first)})
				continue
			}
			seen[p.Name] = where
			if s.ImageCredentialProviderBinDir != "" && images.CheckPluginName(p.Name) == nil {
				if _, err := images.ResolvePlugin(s.ImageCredentialProviderBinDir, p.Name); err != nil {
					errs = append(errs, &FileError{Path: path, Line: lines[i], Field: fmt.Sprintf("providers[%d].name", i),
						Msg: fmt.Sprintf("no plugin %s in --image-credential-provider-bin-dir: %v", p.Name, err)})
				}
			}
			providers = append(providers, p)
		}
	}
	if len(errs) == 0 && len(providers) == 0 {
		errs = append(errs, fmt.Errorf("--image-credential-provider-config %s: no providers: at least one is needed", s.ImageCredentialProviderConfig))
	}
	return providers, errs
}

// credentialProviderFiles is the file at path, or the *.json, *.yaml and
// *.yml files of the directory at path in name order.
func credentialProviderFiles(path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return []string{path}, nil
	}
	// Whoever may add a file to the directory adds a provider.
	if err := statefile.CheckOwnedDir(path); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".json" || ext == ".yaml" || ext == ".yml") {
			files = append(files, filepath.Join(path, e.Name()))
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("directory %s holds no .json, .yaml or .yml file", path)
	}
	return files, nil // ReadDir sorts by name
}

// decodeCredentialProviderFile reads one CredentialProviderConfig: its
// providers, the line of each, and every problem.
func decodeCredentialProviderFile(path string) ([]kubeletconfigv1.CredentialProvider, []int, []error) {
	// Whoever writes the file chooses the arguments and environment of
	// programs berth runs as root: it must be berth's alone, as the
	// node's credentials file must.
	data, err := statefile.ReadOwned(path, maxCredentialProviderConfig)
	if err != nil {
		return nil, nil, []error{fmt.Errorf("--image-credential-provider-config: %s: %w", path, err)}
	}
	doc, err := parseDocument(path, data)
	if err != nil {
		return nil, nil, []error{err}
	}
	if doc == nil {
		return nil, nil, []error{&FileError{Path: path, Msg: "empty: want a " + credentialProviderConfigKind}}
	}
	var errs []error
	var providersNode *yamlv3.Node
	var providersLine int
	fields := map[string]*yamlv3.Node{}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		key, value := resolveAlias(doc.Content[i]), doc.Content[i+1]
		if _, dup := fields[key.Value]; dup {
			errs = append(errs, &FileError{Path: path, Line: key.Line, Field: key.Value, Msg: "given twice"})
			continue
		}
		fields[key.Value] = key
		switch key.Value {
		case "apiVersion":
			if v := scalarOf(value); !slices.Contains(credentialProviderConfigVersions, v) {
				errs = append(errs, &FileError{Path: path, Line: key.Line, Field: "apiVersion",
					Msg: fmt.Sprintf("want %s, got %q", credentialProviderConfigVersions[0], v)})
			}
		case "kind":
			if v := scalarOf(value); v != credentialProviderConfigKind {
				errs = append(errs, &FileError{Path: path, Line: key.Line, Field: "kind", Msg: fmt.Sprintf("want %s, got %q", credentialProviderConfigKind, v)})
			}
		case "providers":
			providersNode, providersLine = resolveAlias(value), key.Line
		default:
			errs = append(errs, &FileError{Path: path, Line: key.Line, Field: key.Value, Msg: "unknown field: a CredentialProviderConfig has apiVersion, kind and providers"})
		}
	}
	for _, k := range []string{"apiVersion", "kind", "providers"} {
		if fields[k] == nil {
			errs = append(errs, &FileError{Path: path, Line: doc.Line, Field: k, Msg: "missing"})
		}
	}
	if providersNode == nil || providersNode.Tag == "!!null" {
		return nil, nil, errs
	}
	if providersNode.Kind != yamlv3.SequenceNode {
		return nil, nil, append(errs, &FileError{Path: path, Line: providersLine, Field: "providers", Msg: "must be a list, got " + describeNode(providersNode)})
	}
	var providers []kubeletconfigv1.CredentialProvider
	var lines []int
	for i, item := range providersNode.Content {
		p, perrs := decodeCredentialProvider(path, fmt.Sprintf("providers[%d]", i), resolveAlias(item))
		errs = append(errs, perrs...)
		providers, lines = append(providers, p), append(lines, item.Line)
	}
	return providers, lines, errs
}

// decodeCredentialProvider decodes and checks one provider as the kubelet
// does: a name that is a plain file name, matchImages that parse, a
// defaultCacheDuration not negative, an exec protocol version berth
// speaks; tokenAttributes is refused.
func decodeCredentialProvider(path, field string, node *yamlv3.Node) (kubeletconfigv1.CredentialProvider, []error) {
	var p kubeletconfigv1.CredentialProvider
	if node.Kind != yamlv3.MappingNode {
		return p, []error{&FileError{Path: path, Line: node.Line, Field: field, Msg: "must be a mapping, got " + describeNode(node)}}
	}
	var errs []error
	fail := func(line int, name, msg string) {
		errs = append(errs, &FileError{Path: path, Line: line, Field: field + "." + name, Msg: msg})
	}
	lines := map[string]int{}
	for i := 0; i+1 < len(node.Content); i += 2 {
		key, value := resolveAlias(node.Content[i]), node.Content[i+1]
		name := key.Value
		if first, dup := lines[name]; dup {
			fail(key.Line, name, fmt.Sprintf("given twice (first on line %d)", first))
			continue
		}
		lines[name] = key.Line
		var target any
		want := ""
		switch name {
		case "name":
			target, want = &p.Name, "a string"
		case "apiVersion":
			target, want = &p.APIVersion, "a string"
		case "matchImages":
			target, want = &p.MatchImages, "a list of strings"
		case "args":
			target, want = &p.Args, "a list of strings"
		case "defaultCacheDuration":
			target, want = &p.DefaultCacheDuration, "a duration such as 12h or 5m"
		case "env":
			target, want = &p.Env, "a list of name and value mappings"
		case "tokenAttributes":
			fail(key.Line, name, "service account token mode needs tokens from an API server for each pod's service account, which berth, a standalone agent, does not request: remove tokenAttributes and have the plugin use the node's own credentials")
			continue
		default:
			fail(key.Line, name, "unknown field: a provider has name, matchImages, defaultCacheDuration, apiVersion, args, env and tokenAttributes")
			continue
		}
		if err := decodeStrictJSON(value, target); err != nil {
			sep := ": "
			if strings.HasPrefix(err.Error(), "got ") {
				sep = ", "
			}
			fail(key.Line, name, "must be "+want+sep+err.Error())
		}
	}
	line := func(k string) int {
		if l, ok := lines[k]; ok {
			return l
		}
		return node.Line
	}
	if lines["name"] == 0 {
		fail(node.Line, "name", "missing: the name of the plugin's executable in --image-credential-provider-bin-dir")
	} else if err := images.CheckPluginName(p.Name); err != nil {
		fail(line("name"), "name", err.Error())
	}
	switch {
	case lines["apiVersion"] == 0:
		fail(node.Line, "apiVersion", "missing: want "+images.ProviderAPIVersionV1)
	case !slices.Contains(images.ProviderAPIVersions(), p.APIVersion):
		fail(line("apiVersion"), "apiVersion", fmt.Sprintf("want one of %s, got %q", strings.Join(images.ProviderAPIVersions(), ", "), p.APIVersion))
	}
	if len(p.MatchImages) == 0 {
		fail(line("matchImages"), "matchImages", "at least one image pattern is needed (e.g. *.dkr.ecr.*.amazonaws.com)")
	}
	for i, m := range p.MatchImages {
		if _, err := url.Parse("https://" + m); err != nil || m == "" {
			fail(line("matchImages"), fmt.Sprintf("matchImages[%d]", i), fmt.Sprintf("%q is not an image pattern (host with * wildcards, optional :port and /path)", m))
		}
	}
	switch {
	case p.DefaultCacheDuration == nil && lines["defaultCacheDuration"] == 0:
		fail(node.Line, "defaultCacheDuration", "missing: how long to keep credentials a response gives no cacheDuration for (0 keeps none)")
	case p.DefaultCacheDuration == nil:
		fail(line("defaultCacheDuration"), "defaultCacheDuration", "must be a duration such as 12h or 5m, got null")
	case p.DefaultCacheDuration.Duration < 0:
		fail(line("defaultCacheDuration"), "defaultCacheDuration", fmt.Sprintf("must not be negative, got %s", p.DefaultCacheDuration.Duration))
	}
	for i, e := range p.Env {
		if e.Name == "" || strings.ContainsAny(e.Name, "=\x00") {
			fail(line("env"), fmt.Sprintf("env[%d].name", i), fmt.Sprintf("%q is not an environment variable name", e.Name))
		}
	}
	return p, errs
}

// decodeStrictJSON decodes a YAML value into target through its JSON form,
// rejecting unknown fields, so the kubelet types' JSON decoding applies
// (metav1.Duration's included). The error says what is wrong, not where:
// the caller has the line.
func decodeStrictJSON(node *yamlv3.Node, target any) error {
	var v any
	if err := node.Decode(&v); err != nil {
		return err
	}
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(target); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return fmt.Errorf("got %s", describeNode(node))
		}
		if _, isDuration := target.(**metav1.Duration); isDuration {
			return fmt.Errorf("got %s", describeNode(node))
		}
		return errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	return nil
}

// validateCredentialProviders checks the plugins' settings: the config
// and the bin dir go together, a positive timeout, and the providers'
// files.
func (s Settings) validateCredentialProviders() []error {
	var errs []error
	switch {
	case s.ImageCredentialProviderConfig != "" && s.ImageCredentialProviderBinDir == "":
		errs = append(errs, errors.New("--image-credential-provider-config needs an --image-credential-provider-bin-dir: the directory of the plugins' executables"))
	case s.ImageCredentialProviderConfig == "" && s.ImageCredentialProviderBinDir != "":
		errs = append(errs, errors.New("--image-credential-provider-bin-dir needs an --image-credential-provider-config naming the plugins to run"))
	}
	if d := s.ImageCredentialProviderTimeout.Duration; d <= 0 {
		errs = append(errs, fmt.Errorf("--image-credential-provider-timeout must be positive, got %s", d))
	}
	// The providers' problems stay together in file and line order:
	// validate sorts the settings' problems as text, which would put
	// line 10 before line 8.
	if _, fileErrs := s.credentialProviders(); len(fileErrs) > 0 {
		slices.SortStableFunc(fileErrs, func(a, b error) int {
			fa, oka := a.(*FileError)
			fb, okb := b.(*FileError)
			if !oka || !okb {
				return 0
			}
			if c := strings.Compare(fa.Path, fb.Path); c != 0 {
				return c
			}
			return fa.Line - fb.Line
		})
		errs = append(errs, errors.Join(fileErrs...))
	}
	return errs
}
