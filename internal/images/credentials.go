package images

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/podenv"
	"github.com/berth-agent/berth/internal/pullauth"
	"github.com/berth-agent/berth/internal/statefile"
)

// maxDockerConfigBytes bounds a node-wide credentials file, as the API
// server bounds a Secret.
const maxDockerConfigBytes = 1 << 20

// Credentials are the credentials to try for the pod's image, in the
// kubelet's order: those of the pod's imagePullSecrets (in order), then
// those of the node-wide credentials file. None means an anonymous pull.
// The error names what could not be read, never a credential.
func (p *Puller) Credentials(pod *v1.Pod, image string) ([]*runtimeapi.AuthConfig, error) {
	repo := criconfig.Repository(image)
	var podRing pullauth.Keyring
	var objs podenv.PodObjects
	if p.opts.Objects != nil {
		objs = p.opts.Objects(pod.UID)
	}
	for _, ref := range pod.Spec.ImagePullSecrets {
		s := objs.Secrets[ref.Name]
		if s == nil {
			return nil, fmt.Errorf("image pull Secret %q not found", ref.Name)
		}
		cfg, err := pullauth.SecretConfig(s)
		if err != nil {
			return nil, fmt.Errorf("image pull Secret %q: %w", ref.Name, err)
		}
		podRing.Add(cfg)
	}
	entries := podRing.Lookup(repo)
	if node := p.nodeKeyring(); node != nil {
		entries = append(entries, node.Lookup(repo)...)
	}
	out := make([]*runtimeapi.AuthConfig, 0, len(entries))
	for _, e := range entries {
		out = append(out, &runtimeapi.AuthConfig{Username: e.Username, Password: e.Password})
	}
	return out, nil
}

// nodeKeyring reads the node-wide credentials file the kubelet would: the
// first valid config.json, then .dockercfg, in Options.CredentialDirs. It
// is read at every pull, so an edit needs no restart; pulls are rare. A
// file that others than root may write is skipped with a warning: whoever
// writes it chooses the account berth pulls with.
func (p *Puller) nodeKeyring() *pullauth.Keyring {
	for _, f := range []struct {
		name  string
		parse func([]byte) (pullauth.Config, error)
		home  string
	}{{"config.json", pullauth.ParseDockerConfigJSON, ".docker"}, {".dockercfg", pullauth.ParseDockercfg, ""}} {
		for _, dir := range p.credentialDirs(f.home) {
			path := filepath.Join(dir, f.name)
			data, err := readCredentialFile(path)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err == nil {
				var cfg pullauth.Config
				if cfg, err = f.parse(data); err == nil {
					var k pullauth.Keyring
					k.Add(cfg)
					return &k
				}
			}
			p.log.Warn("ignoring a registry credentials file", "path", path, "err", err)
		}
	}
	return nil
}

// credentialDirs are the directories searched for a credentials file, the
// kubelet's order with berth's root dir first: --root-dir, the kubelet's
// root dir, the working directory, the home directory (its .docker for
// config.json), and "/". Options.CredentialDirs replaces them.
func (p *Puller) credentialDirs(homeSub string) []string {
	if p.opts.CredentialDirs != nil {
		return p.opts.CredentialDirs
	}
	dirs := []string{p.opts.RootDir, "/var/lib/kubelet"}
	if wd, err := os.Getwd(); err == nil {
		dirs = append(dirs, wd)
	}
	if home, err := os.UserHomeDir(); err == nil {
		dirs = append(dirs, filepath.Join(home, homeSub))
	}
	return append(dirs, "/")
}

// readCredentialFile reads a credentials file: a regular file (opened
// without following a final link or blocking), owned by berth's user and
// writable by it alone, within the size limit.
func readCredentialFile(p string) ([]byte, error) {
	return statefile.ReadOwned(p, maxDockerConfigBytes)
}
