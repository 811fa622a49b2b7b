package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/singleflight"
	kubeletconfigv1 "k8s.io/kubelet/config/v1"
	credentialproviderv1 "k8s.io/kubelet/pkg/apis/credentialprovider/v1"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/pullauth"
)

// The kubelet's image credential provider plugins: executables named in a
// CredentialProviderConfig, run with a CredentialProviderRequest (the
// image's repository) on stdin, answering a CredentialProviderResponse
// (credentials by registry pattern, and how long to keep them) on stdout.
// berth runs them as the kubelet does, for the images their matchImages
// match, and adds the bounds the kubelet lacks or leaves loose:
//
//   - a run is killed, with every process it started, after
//     Options.CredentialProviderTimeout (the kubelet: a minute, its only
//     bound);
//   - stdout is read up to maxProviderResponse and stderr up to
//     maxProviderStderr (the kubelet reads both whole);
//   - the executable is found by its plain name in the bin directory only,
//     at every run: a symbolic link may point elsewhere in the directory
//     but not out of it, and the file and the directory must be owned by
//     root (or berth's user) and writable by it alone, since whoever
//     may write them chooses what berth runs as root (the kubelet joins
//     the directory and the name, and runs whatever that resolves to);
//   - the cache holds at most maxProviderCacheEntries entries a plugin
//     (the kubelet's grows with the images pulled);
//   - concurrent lookups of one repository share one run, as the kubelet's
//     do.
//
// A plugin's answer is a secret: errors say what is wrong with it, never
// what it holds, and nothing of it is logged.
const (
	// DefaultCredentialProviderTimeout bounds a plugin's run when
	// Options.CredentialProviderTimeout is 0: the kubelet's fixed bound.
	DefaultCredentialProviderTimeout = time.Minute
	// maxProviderResponse bounds a plugin's stdout: a response is a few
	// hundred bytes; a megabyte is far beyond any real one.
	maxProviderResponse = 1 << 20
	// maxProviderStderr is how much of a failed plugin's stderr its error
	// quotes (the end of it, where the reason usually is).
	maxProviderStderr = 512
	// maxProviderCacheEntries bounds each plugin's cache: past it, the
	// entry closest to expiry goes first.
	maxProviderCacheEntries = 256
	// providerKillGrace is how long a plugin's output may stay open after
	// it exited or was killed: then the pipes are closed.
	providerKillGrace = time.Second
)

// globalCacheKey is the cache key of a response with cacheKeyType Global:
// no repository or registry can be spelt with angle brackets.
const globalCacheKey = "<global>"

// runFunc runs a plugin's executable at path with args and env, stdin as
// its standard input, until it exits or ctx ends; it returns its stdout
// (at most maxProviderResponse bytes, else an error) and the end of its
// stderr. Tests replace it.
type runFunc func(ctx context.Context, path string, args, env []string, stdin []byte) (stdout, stderr []byte, err error)

// credentialProviders are the plugins of one Puller, in the config file's
// order. Each plugin owns its cache.
type credentialProviders struct {
	plugins []*credentialPlugin
	log     *slog.Logger
}

// credentialPlugin is one configured plugin and its cache.
type credentialPlugin struct {
	cfg     kubeletconfigv1.CredentialProvider
	binDir  string
	timeout time.Duration
	run     runFunc
	clock   clock.PassiveClock
	// group coalesces the runs for one repository.
	group singleflight.Group

	// mu guards cache, which the plugin owns.
	mu    sync.Mutex
	cache map[string]providerCacheEntry
}

// providerCacheEntry is a response kept until expires.
type providerCacheEntry struct {
	creds   pullauth.Config
	expires time.Time
}

// newCredentialProviders builds the plugins of opts; nil without any.
func newCredentialProviders(opts Options) *credentialProviders {
	if len(opts.CredentialProviders) == 0 {
		return nil
	}
	timeout := opts.CredentialProviderTimeout
	if timeout <= 0 {
		timeout = DefaultCredentialProviderTimeout
	}
	run := opts.runPlugin
	if run == nil {
		run = runPlugin
	}
	var clk clock.PassiveClock = clock.RealClock{}
	if opts.Clock != nil {
		clk = opts.Clock
	}
	c := &credentialProviders{log: opts.Logger}
	for _, cfg := range opts.CredentialProviders {
		c.plugins = append(c.plugins, &credentialPlugin{
			cfg: cfg, binDir: opts.CredentialProviderBinDir, timeout: timeout, run: run, clock: clk,
			cache: map[string]providerCacheEntry{},
		})
	}
	return c
}

// providerProblem is what went wrong with a plugin for one lookup.
type providerProblem struct {
	plugin string
	err    error
}

func (p providerProblem) Error() string {
	return fmt.Sprintf("credential provider %s: %v", p.plugin, p.err)
}

// lookup returns the credentials the plugins whose matchImages match repo
// give for it, as the kubelet combines them: all their answers in one
// keyring, the most specific pattern first and, for the same pattern, the
// earlier plugin's first. matched says whether any plugin was asked;
// problems are the plugins that failed or gave nothing for repo.
func (c *credentialProviders) lookup(ctx context.Context, repo string) (entries []pullauth.Entry, matched bool, problems []error) {
	if c == nil {
		return nil, false, nil
	}
	var ring pullauth.Keyring
	for _, p := range c.plugins {
		if !p.matches(repo) {
			continue
		}
		matched = true
		cfg, err := p.provide(ctx, repo)
		if err != nil {
			if ctx.Err() != nil {
				return nil, matched, append(problems, ctx.Err())
			}
			problems = append(problems, providerProblem{p.cfg.Name, err})
			c.log.Warn("image credential provider failed", "provider", p.cfg.Name, "image", repo, "err", err)
			continue
		}
		var one pullauth.Keyring
		one.Add(cfg)
		if len(one.Lookup(repo)) == 0 {
			problems = append(problems, providerProblem{p.cfg.Name, fmt.Errorf("gave no credentials for %s", repo)})
		}
		ring.Add(cfg)
	}
	return ring.Lookup(repo), matched, problems
}

// matches is the kubelet's isImageAllowed: one of matchImages matches.
func (p *credentialPlugin) matches(repo string) bool {
	for _, m := range p.cfg.MatchImages {
		if pullauth.MatchImage(m, repo) {
			return true
		}
	}
	return false
}

// provide returns the plugin's credentials for repo: from the cache
// (by repository, then registry, then the global key, as the kubelet
// looks), else from a run shared with concurrent lookups of repo. A caller
// whose ctx ends stops waiting; the run goes on for the others, within
// its timeout.
func (p *credentialPlugin) provide(ctx context.Context, repo string) (pullauth.Config, error) {
	if cfg, ok := p.cached(repo); ok {
		return cfg, nil
	}
	ch := p.group.DoChan(repo, func() (any, error) {
		if cfg, ok := p.cached(repo); ok {
			return cfg, nil
		}
		return p.fetch(repo)
	})
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(pullauth.Config), nil
	}
}

// cached is the unexpired entry for repo, its registry or the global key.
func (p *credentialPlugin) cached(repo string) (pullauth.Config, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	for _, key := range []string{repo, registryOf(repo), globalCacheKey} {
		e, ok := p.cache[key]
		if !ok {
			continue
		}
		if !now.Before(e.expires) {
			delete(p.cache, key)
			continue
		}
		return e.creds, true
	}
	return nil, false
}

// store keeps creds under key until expires, dropping expired entries and,
// at the bound, the entry closest to expiry.
func (p *credentialPlugin) store(key string, creds pullauth.Config, expires time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	for k, e := range p.cache {
		if !now.Before(e.expires) {
			delete(p.cache, k)
		}
	}
	if _, replacing := p.cache[key]; !replacing && len(p.cache) >= maxProviderCacheEntries {
		first := ""
		for k, e := range p.cache {
			if first == "" || e.expires.Before(p.cache[first].expires) {
				first = k
			}
		}
		delete(p.cache, first)
	}
	p.cache[key] = providerCacheEntry{creds: creds, expires: expires}
}

// registryOf is the registry of a repository: its host and port.
func registryOf(repo string) string {
	host, _, _ := strings.Cut(repo, "/")
	return host
}

// fetch runs the plugin for repo and caches its answer as it asks: by
// repository, registry or globally, for its cacheDuration, else the
// config's defaultCacheDuration; 0 keeps nothing.
func (p *credentialPlugin) fetch(repo string) (pullauth.Config, error) {
	path, err := ResolvePlugin(p.binDir, p.cfg.Name)
	if err != nil {
		return nil, err
	}
	req, err := encodeProviderRequest(p.cfg.APIVersion, repo)
	if err != nil {
		return nil, err
	}
	env := os.Environ()
	for _, e := range p.cfg.Env {
		env = append(env, e.Name+"="+e.Value) // the later value of a name wins
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	stdout, stderr, err := p.run(ctx, path, p.cfg.Args, env, req)
	if err != nil {
		if errors.Is(err, errPluginTimeout) {
			return nil, fmt.Errorf("killed after %s without answering%s", p.timeout, stderrExcerpt(stderr))
		}
		return nil, fmt.Errorf("%w%s", err, stderrExcerpt(stderr))
	}
	resp, err := parseProviderResponse(stdout, p.cfg.APIVersion)
	if err != nil {
		return nil, err
	}
	creds := make(pullauth.Config, len(resp.Auth))
	for pattern, a := range resp.Auth {
		creds[pattern] = pullauth.Entry{Username: a.Username, Password: a.Password, Source: "credential provider " + p.cfg.Name}
	}
	ttl := p.cfg.DefaultCacheDuration.Duration
	if resp.CacheDuration != nil {
		ttl = resp.CacheDuration.Duration
	}
	if ttl > 0 {
		key := map[credentialproviderv1.PluginCacheKeyType]string{
			credentialproviderv1.ImagePluginCacheKeyType:    repo,
			credentialproviderv1.RegistryPluginCacheKeyType: registryOf(repo),
			credentialproviderv1.GlobalPluginCacheKeyType:   globalCacheKey,
		}[resp.CacheKeyType]
		p.store(key, creds, p.clock.Now().Add(ttl))
	}
	return creds, nil
}

// stderrExcerpt is the end of a failed plugin's stderr for its error, on
// one line, or "".
func stderrExcerpt(stderr []byte) string {
	s := strings.Join(strings.Fields(strings.ToValidUTF8(string(stderr), "?")), " ")
	if s == "" {
		return ""
	}
	return ": stderr: " + s
}

// ResolvePlugin finds the plugin's executable: name, a plain file name,
// in binDir, its links resolved within binDir; a regular executable file,
// and it and binDir owned by root or berth's user and writable by no
// one else.
func ResolvePlugin(binDir, name string) (string, error) {
	if err := CheckPluginName(name); err != nil {
		return "", err
	}
	dir, err := filepath.EvalSymlinks(binDir)
	if err != nil {
		return "", fmt.Errorf("bin dir: %w", err)
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return "", fmt.Errorf("bin dir: %w", err)
	}
	if err := checkOwner(dir); err != nil {
		return "", fmt.Errorf("bin dir %s: %w", dir, err)
	}
	path, err := filepath.EvalSymlinks(filepath.Join(dir, name))
	if err != nil {
		return "", fmt.Errorf("executable: %w", err)
	}
	if rel, err := filepath.Rel(dir, path); err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("executable %s is a link out of the bin dir %s (to %s)", name, dir, path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("executable: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s is not an executable file", path)
	}
	if err := checkOwner(path); err != nil {
		return "", fmt.Errorf("executable %s: %w", path, err)
	}
	return path, nil
}

// checkOwner refuses a file or directory not owned by root or berth's
// user, or writable by group or others.
func checkOwner(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return errors.New("no owner to check")
	}
	if uid := int(st.Uid); uid != 0 && uid != os.Geteuid() {
		return fmt.Errorf("owned by uid %d, not root", uid)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("writable by group or others (mode %04o)", fi.Mode().Perm())
	}
	return nil
}

// CheckPluginName refuses what the kubelet refuses in a provider's name
// (a slash, a space, "." and "..") and anything else that is not a plain
// file name.
func CheckPluginName(name string) error {
	switch {
	case name == "":
		return errors.New("empty name")
	case name == "." || name == "..":
		return fmt.Errorf("name %q is not a file name", name)
	case strings.ContainsAny(name, "/ \x00"):
		return fmt.Errorf("name %q must be a plain file name: no slash, no space", name)
	}
	return nil
}

// runPlugin runs the executable in its own process group: at the timeout
// the whole group is killed, and once the plugin has exited whatever it
// left running in its group is killed too, so a plugin never outlives
// its run. Its stdout and stderr are bounded; a process it started that
// holds them open after it exited is given providerKillGrace.
func runPlugin(ctx context.Context, path string, args, env []string, stdin []byte) ([]byte, []byte, error) {
	var stdout limitedBuffer
	stdout.limit = maxProviderResponse
	stderr := tailBuffer{limit: maxProviderStderr}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = env
	cmd.Dir = "/"
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = providerKillGrace
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start: %w", err)
	}
	err := cmd.Wait()
	// The group outlives its leader while a member lives, so its ID is
	// not reused before this kill.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	switch {
	case stdout.over:
		return nil, stderr.bytes(), fmt.Errorf("response larger than %d bytes", maxProviderResponse)
	case ctx.Err() != nil && (cmd.ProcessState == nil || !cmd.ProcessState.Exited()):
		return nil, stderr.bytes(), errPluginTimeout
	case cmd.ProcessState != nil && !cmd.ProcessState.Success():
		return nil, stderr.bytes(), fmt.Errorf("exited: %s", cmd.ProcessState)
	case errors.Is(err, exec.ErrWaitDelay):
		return nil, stderr.bytes(), errors.New("exited, but a process it started kept its output open")
	case err != nil:
		return nil, stderr.bytes(), fmt.Errorf("run: %w", err)
	}
	return stdout.buf.Bytes(), stderr.bytes(), nil
}

// errPluginTimeout is a run killed at its timeout.
var errPluginTimeout = errors.New("killed at the timeout")

// limitedBuffer keeps up to limit bytes and fails the write past them,
// which closes the pipe: the plugin then dies of SIGPIPE or is killed at
// the timeout.
type limitedBuffer struct {
	buf   bytes.Buffer
	limit int
	over  bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.buf.Len()+len(p) > b.limit {
		b.over = true
		return 0, io.ErrShortWrite
	}
	return b.buf.Write(p)
}

// tailBuffer keeps the last limit bytes written.
type tailBuffer struct {
	buf   []byte
	limit int
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.buf = append(b.buf, p...)
	if len(b.buf) > b.limit {
		b.buf = append(b.buf[:0], b.buf[len(b.buf)-b.limit:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) bytes() []byte { return b.buf }
