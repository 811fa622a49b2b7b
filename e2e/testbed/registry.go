package testbed

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// RegistryAuth turns on basic authentication on the bed's registry: pulls
// need these credentials.
type RegistryAuth struct {
	User, Password string
}

// registryConfigTemplate is docker-registry's config: storage inside the
// bed, loopback only, quiet logs.
const registryConfigTemplate = `version: 0.1
log:
  level: warn
  accesslog:
    disabled: true
storage:
  filesystem:
    rootdirectory: %q
  delete:
    enabled: true
http:
  addr: %q
`

// registryAuthTemplate turns on docker-registry's basic authentication
// against an htpasswd file (bcrypt only, as docker-registry reads it).
const registryAuthTemplate = `auth:
  htpasswd:
    realm: berth-testbed
    path: %q
`

// registryConfigPath is docker-registry's config file; it also identifies
// the bed's registry process by its command line.
func (b *Bed) registryConfigPath() string { return b.path("registry.yml") }

// startRegistry runs docker-registry on loopback port (free a moment ago),
// tells containerd to reach it over plain HTTP (CRI-O's config already
// says so), and pushes the busybox image from the archive with skopeo. It
// records the registry in b.
func (b *Bed) startRegistry(archive string, port int) error {
	host := "127.0.0.1:" + strconv.Itoa(port)
	config := fmt.Appendf(nil, registryConfigTemplate, b.path("registry"), host)
	if auth := b.registryAuth; auth != nil {
		hash, err := bcrypt.GenerateFromPassword([]byte(auth.Password), bcrypt.MinCost)
		if err != nil {
			return fmt.Errorf("hash the registry password: %w", err)
		}
		if err := os.WriteFile(b.path("registry.htpasswd"), fmt.Appendf(nil, "%s:%s\n", auth.User, hash), 0o600); err != nil {
			return fmt.Errorf("write registry htpasswd: %w", err)
		}
		config = fmt.Appendf(config, registryAuthTemplate, b.path("registry.htpasswd"))
	}
	if err := os.WriteFile(b.registryConfigPath(), config, 0o644); err != nil {
		return fmt.Errorf("write registry config: %w", err)
	}
	hostsDir := b.path("certs.d", host)
	if err := os.MkdirAll(hostsDir, 0o755); err != nil {
		return fmt.Errorf("create registry hosts dir: %w", err)
	}
	if err := os.WriteFile(b.path("certs.d", host, "hosts.toml"), registryHostsTOML(host), 0o644); err != nil {
		return fmt.Errorf("write registry hosts.toml: %w", err)
	}
	p, err := startProcess(b.path("registry.log"), nil, "docker-registry", "serve", b.registryConfigPath())
	if err != nil {
		return fmt.Errorf("start registry: %w", err)
	}
	b.mu.Lock()
	b.registry = p
	b.Registry = host
	b.RegistryBusyboxImage = host + "/library/busybox:1.36"
	b.mu.Unlock()
	if err := waitRegistry(p, host, b.registryAuth, 30*time.Second); err != nil {
		return fmt.Errorf("registry on %s: %w\nregistry.log:\n%s", host, err, tail(b.path("registry.log"), 20))
	}
	args := []string{"--insecure-policy", "copy", "--quiet", "--dest-tls-verify=false"}
	if auth := b.registryAuth; auth != nil {
		args = append(args, "--dest-creds", auth.User+":"+auth.Password)
	}
	cmd := exec.Command("skopeo", append(args, "oci-archive:"+archive+":1.36", "docker://"+b.RegistryBusyboxImage)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+b.path("tmp"))
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("push busybox to the registry: %w: %s", err, out)
	}
	return nil
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitRegistry polls the registry's /v2/ until it answers, with the
// credentials when it has authentication on.
func waitRegistry(p *process, host string, auth *RegistryAuth, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		if !p.alive() {
			return fmt.Errorf("docker-registry exited")
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+"/v2/", nil)
		if err != nil {
			return fmt.Errorf("registry request: %w", err)
		}
		if auth != nil {
			req.SetBasicAuth(auth.User, auth.Password)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not answering: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}
