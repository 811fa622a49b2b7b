package pullauth

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"sort"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// Config is registry credentials by registry pattern, as a
// .dockerconfigjson's "auths", a .dockercfg or a config.json holds them:
// "registry.example.com", "registry.example.com:5000/team",
// "https://index.docker.io/v1/", "*.example.com".
type Config map[string]Entry

// Entry is one registry's credentials.
type Entry struct {
	Username string
	Password string
	// Source names who gave them, for messages ("credential provider
	// ecr"); "" for a Secret's or a file's. It is never secret.
	Source string
}

// rawDockerConfigEntry is an entry as the files write it: "auth" is
// base64("username:password") and wins over the separate fields, as in the
// kubelet. Other fields (email, identitytoken, ...) are not used.
type rawDockerConfigEntry struct {
	Username string `json:"username"`
	Password string `json:"password"`
	Auth     string `json:"auth"`
}

// ParseDockerConfigJSON parses a .dockerconfigjson or a config.json: the
// credentials are under "auths"; everything else of a docker client's file
// (credsStore, credHelpers, ...) is ignored. Errors never quote the input,
// which holds passwords.
func ParseDockerConfigJSON(data []byte) (Config, error) {
	var file struct {
		Auths map[string]json.RawMessage `json:"auths"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		return nil, fmt.Errorf("not a docker config JSON object: %s", JSONErrorKind(err))
	}
	return parseAuths(file.Auths)
}

// ParseDockercfg parses the legacy .dockercfg: the entries themselves.
func ParseDockercfg(data []byte) (Config, error) {
	var auths map[string]json.RawMessage
	if err := json.Unmarshal(data, &auths); err != nil {
		return nil, fmt.Errorf("not a dockercfg JSON object: %s", JSONErrorKind(err))
	}
	return parseAuths(auths)
}

func parseAuths(auths map[string]json.RawMessage) (Config, error) {
	cfg := make(Config, len(auths))
	for registry, raw := range auths {
		var e rawDockerConfigEntry
		if err := json.Unmarshal(raw, &e); err != nil {
			return nil, fmt.Errorf("entry %q: %s", registry, JSONErrorKind(err))
		}
		entry := Entry{Username: e.Username, Password: e.Password}
		if e.Auth != "" {
			decoded, err := base64.StdEncoding.DecodeString(e.Auth)
			if err != nil {
				return nil, fmt.Errorf("entry %q: auth is not base64", registry)
			}
			user, pass, ok := strings.Cut(string(decoded), ":")
			if !ok {
				return nil, fmt.Errorf("entry %q: auth must be base64(username:password)", registry)
			}
			entry = Entry{Username: user, Password: pass}
		}
		cfg[registry] = entry
	}
	return cfg, nil
}

// JSONErrorKind says what is wrong with JSON that holds credentials
// without the bytes a *json.UnmarshalTypeError or a syntax error would
// quote.
func JSONErrorKind(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("syntax error at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("wrong type at %q: want %s", te.Field, te.Type)
	}
	return "invalid JSON"
}

// Keyring matches images to credentials as the kubelet's BasicDockerKeyring
// does: a pattern's scheme is dropped and a /v1/ or /v2/ path means the
// host; a pattern matches an image whose host has as many dot-separated
// parts, each matching by shell glob ("*.example.com"), the same port, and
// a path starting with the pattern's. More specific patterns come first;
// an image of Docker Hub also matches credentials for index.docker.io.
type Keyring struct {
	index []string           // patterns, reverse-sorted
	creds map[string][]Entry // by pattern
}

// defaultRegistryHost is the key Docker Hub's credentials are stored under.
const defaultRegistryHost = "index.docker.io"

// Add puts cfg's credentials into the Keyring; a pattern that does not
// parse is skipped, as in the kubelet.
func (k *Keyring) Add(cfg Config) {
	if k.creds == nil {
		k.creds = map[string][]Entry{}
	}
	patterns := make([]string, 0, len(cfg))
	for p := range cfg {
		patterns = append(patterns, p)
	}
	sort.Strings(patterns) // entries of one pattern in a stable order
	for _, loc := range patterns {
		value := loc
		if !strings.HasPrefix(value, "https://") && !strings.HasPrefix(value, "http://") {
			value = "https://" + value
		}
		parsed, err := url.Parse(value)
		if err != nil {
			continue
		}
		path := parsed.Path
		if strings.HasPrefix(path, "/v2/") || strings.HasPrefix(path, "/v1/") {
			path = path[3:]
		}
		key := parsed.Host
		if path != "" && path != "/" {
			key += path
		}
		if _, seen := k.creds[key]; !seen {
			k.index = append(k.index, key)
		}
		k.creds[key] = append(k.creds[key], cfg[loc])
	}
	sort.Sort(sort.Reverse(sort.StringSlice(k.index)))
}

// Lookup returns the credentials for repo (a normalized repository,
// "docker.io/library/busybox"), most specific pattern first.
func (k *Keyring) Lookup(repo string) []Entry {
	var out []Entry
	for _, pattern := range k.index {
		if MatchImage(pattern, repo) {
			out = append(out, k.creds[pattern]...)
		}
	}
	if len(out) == 0 && isDefaultRegistry(repo) {
		out = append(out, k.creds[defaultRegistryHost]...)
	}
	return out
}

// isDefaultRegistry reports whether repo is on Docker Hub. Unlike the
// kubelet's, it does not take "localhost/app" for Docker Hub: Docker Hub's
// credentials must never go to a registry on this machine.
func isDefaultRegistry(repo string) bool {
	host, _, found := strings.Cut(repo, "/")
	switch {
	case host == "" || host == "localhost":
		return false
	case !found:
		return true
	case host == "docker.io" || host == defaultRegistryHost:
		return true
	}
	return !strings.ContainsAny(host, ".:")
}

// MatchImage is the kubelet's URLsMatchStr on two schemeless URLs: a
// pattern ("*.azurecr.io", "registry.io:8080/team") matches a repository
// with as many dot-separated host parts, each matching by shell glob,
// the same port, and a path the pattern's path is a prefix of.
func MatchImage(glob, target string) bool {
	g, err := url.Parse("https://" + glob)
	if err != nil {
		return false
	}
	t, err := url.Parse("https://" + target)
	if err != nil {
		return false
	}
	gParts, gPort := splitHost(g.Host)
	tParts, tPort := splitHost(t.Host)
	if gPort != tPort || len(gParts) != len(tParts) || !strings.HasPrefix(t.Path, g.Path) {
		return false
	}
	for i, part := range gParts {
		if ok, err := filepath.Match(part, tParts[i]); err != nil || !ok {
			return false
		}
	}
	return true
}

func splitHost(hostport string) ([]string, string) {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		host, port = hostport, ""
	}
	return strings.Split(host, "."), port
}

// SecretConfig parses the registry credentials of an image pull Secret.
func SecretConfig(s *v1.Secret) (Config, error) {
	switch s.Type {
	case v1.SecretTypeDockerConfigJson:
		return ParseDockerConfigJSON(s.Data[v1.DockerConfigJsonKey])
	case v1.SecretTypeDockercfg:
		return ParseDockercfg(s.Data[v1.DockerConfigKey])
	}
	return nil, fmt.Errorf("type %q holds no registry credentials", s.Type)
}
