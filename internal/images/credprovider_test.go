package images

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeri "k8s.io/cri-api/pkg/apis/testing"
	kubeletconfigv1 "k8s.io/kubelet/config/v1"
	clocktesting "k8s.io/utils/clock/testing"
)

// provider is a provider config for tests: name, its matchImages, a
// default cache duration of a minute.
func provider(name string, match ...string) kubeletconfigv1.CredentialProvider {
	return kubeletconfigv1.CredentialProvider{
		Name: name, MatchImages: match, APIVersion: ProviderAPIVersionV1,
		DefaultCacheDuration: &metav1.Duration{Duration: time.Minute},
	}
}

// response is a v1 CredentialProviderResponse; auth is "pattern":{...}
// JSON members, duration "" for none.
func response(keyType, duration, auth string) string {
	d := ""
	if duration != "" {
		d = fmt.Sprintf(`,"cacheDuration":%q`, duration)
	}
	return fmt.Sprintf(`{"apiVersion":%q,"kind":"CredentialProviderResponse","cacheKeyType":%q%s,"auth":{%s}}`, ProviderAPIVersionV1, keyType, d, auth)
}

// fakePlugins answers each run with the response of the plugin (by the
// executable's base name) and counts the runs by plugin and image.
type fakePlugins struct {
	mu        sync.Mutex
	responses map[string]string // by plugin
	failures  map[string]error  // by plugin
	runs      map[string]int    // "plugin image"
}

func (f *fakePlugins) run(_ context.Context, path string, _, _ []string, stdin []byte) ([]byte, []byte, error) {
	name := filepath.Base(path)
	f.mu.Lock()
	defer f.mu.Unlock()
	image := strings.Split(strings.Split(string(stdin), `"image":"`)[1], `"`)[0]
	if f.runs == nil {
		f.runs = map[string]int{}
	}
	f.runs[name+" "+image]++
	if err := f.failures[name]; err != nil {
		return nil, []byte("plugin said why"), err
	}
	return []byte(f.responses[name]), nil, nil
}

func (f *fakePlugins) count(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.runs[key]
}

// binDir is a bin directory holding an executable for each name, for
// resolvePlugin; the fake runs them.
func binDir(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// users is the users of entries, joined.
func usersOf(creds []*runtimeapi.AuthConfig) string {
	var out []string
	for _, c := range creds {
		out = append(out, c.Username)
	}
	return strings.Join(out, " ")
}

// TestCredentialProviderLookup: a plugin runs only for images its
// matchImages match; its answer's patterns are matched to the image as
// the kubelet's keyring matches them, the most specific first and, for
// one pattern, the earlier plugin first; a plugin that fails or gives
// nothing for the image is a problem naming it.
func TestCredentialProviderLookup(t *testing.T) {
	fake := &fakePlugins{
		responses: map[string]string{
			"ecr":   response("Registry", "", `"*.dkr.ecr.us-east-1.amazonaws.com":{"username":"AWS","password":"pw-ecr"}`),
			"acr":   response("Registry", "", `"*.azurecr.io":{"username":"acr-wide","password":"pw-1"},"team.azurecr.io/app":{"username":"acr-app","password":"pw-2"}`),
			"acr2":  response("Registry", "", `"*.azurecr.io":{"username":"acr2-wide","password":"pw-3"}`),
			"other": response("Registry", "", `"elsewhere.io":{"username":"x","password":"pw-4"}`),
		},
		failures: map[string]error{"broken": errors.New("exited: exit status 2")},
	}
	providers := []kubeletconfigv1.CredentialProvider{
		provider("ecr", "*.dkr.ecr.*.amazonaws.com"),
		provider("acr", "*.azurecr.io"),
		provider("acr2", "*.azurecr.io"),
		provider("broken", "broken.example.com:5000/team"),
		provider("other", "other.example.com"),
	}
	p := New(nil, Options{CredentialProviders: providers, CredentialProviderBinDir: binDir(t, "ecr", "acr", "acr2", "broken", "other"), runPlugin: fake.run, Logger: quiet})
	tests := []struct {
		repo, wantUsers string
		wantMatched     bool
		wantProblem     string
		wantRuns        []string
	}{
		{"123.dkr.ecr.us-east-1.amazonaws.com/app", "AWS", true, "", []string{"ecr 123.dkr.ecr.us-east-1.amazonaws.com/app"}},
		{"team.azurecr.io/app/web", "acr-app acr-wide acr2-wide", true, "", []string{"acr team.azurecr.io/app/web", "acr2 team.azurecr.io/app/web"}},
		{"azurecr.io/app", "", false, "", nil}, // *.azurecr.io needs one more host part
		{"docker.io/library/busybox", "", false, "", nil},
		{"broken.example.com:5000/team/app", "", true, "credential provider broken: exited: exit status 2: stderr: plugin said why", []string{"broken broken.example.com:5000/team/app"}},
		{"broken.example.com:5000/other", "", false, "", nil},
		{"broken.example.com/team/app", "", false, "", nil}, // no port
		{"other.example.com/app", "", true, "credential provider other: gave no credentials for other.example.com/app", nil},
	}
	for _, tt := range tests {
		t.Run(tt.repo, func(t *testing.T) {
			entries, matched, problems := p.providers.lookup(context.Background(), tt.repo)
			var creds []*runtimeapi.AuthConfig
			for _, e := range entries {
				creds = append(creds, &runtimeapi.AuthConfig{Username: e.Username})
			}
			if got := usersOf(creds); got != tt.wantUsers || matched != tt.wantMatched {
				t.Errorf("users %q matched %v, want %q %v", got, matched, tt.wantUsers, tt.wantMatched)
			}
			if got := fmt.Sprint(errors.Join(problems...)); (tt.wantProblem == "" && len(problems) > 0) || (tt.wantProblem != "" && got != tt.wantProblem) {
				t.Errorf("problems %q, want %q", got, tt.wantProblem)
			}
			for _, r := range tt.wantRuns {
				if fake.count(r) != 1 {
					t.Errorf("runs of %q: %d, want 1", r, fake.count(r))
				}
			}
		})
	}
	if fake.count("other other.example.com/app") != 1 || len(fake.runs) != 5 {
		t.Errorf("runs %v: a plugin ran for an image it does not match", fake.runs)
	}
}

// TestCredentialProviderCache: a response is kept for its cacheDuration
// (else the config's default; 0 keeps nothing) under the key its
// cacheKeyType says: the repository, its registry, or every image the
// plugin matches. A fake clock moves time.
func TestCredentialProviderCache(t *testing.T) {
	tests := []struct {
		name     string
		resp     string
		defDur   time.Duration
		second   string // repository looked up after the first
		after    time.Duration
		wantRuns int // runs of the plugin for both lookups
	}{
		{"Image, same image", response("Image", "5m", `"reg.example.com":{"username":"u","password":"p"}`), time.Minute, "reg.example.com/a", 4 * time.Minute, 1},
		{"Image, another image", response("Image", "5m", `"reg.example.com":{"username":"u","password":"p"}`), time.Minute, "reg.example.com/b", 0, 2},
		{"Image, expired", response("Image", "5m", `"reg.example.com":{"username":"u","password":"p"}`), time.Minute, "reg.example.com/a", 5 * time.Minute, 2},
		{"Registry, another image", response("Registry", "5m", `"reg.example.com":{"username":"u","password":"p"}`), time.Minute, "reg.example.com/b", time.Minute, 1},
		{"Registry, another registry", response("Registry", "5m", `"*.example.com":{"username":"u","password":"p"}`), time.Minute, "other.example.com/a", 0, 2},
		{"Global, another registry", response("Global", "5m", `"*.example.com":{"username":"u","password":"p"}`), time.Minute, "other.example.com/a", time.Minute, 1},
		{"no duration: the default", response("Image", "", `"reg.example.com":{"username":"u","password":"p"}`), 2 * time.Minute, "reg.example.com/a", time.Minute, 1},
		{"no duration: the default, expired", response("Image", "", `"reg.example.com":{"username":"u","password":"p"}`), 2 * time.Minute, "reg.example.com/a", 2 * time.Minute, 2},
		{"no duration, default 0: not kept", response("Image", "", `"reg.example.com":{"username":"u","password":"p"}`), 0, "reg.example.com/a", 0, 2},
		{"duration 0: not kept", response("Global", "0s", `"reg.example.com":{"username":"u","password":"p"}`), time.Hour, "reg.example.com/a", 0, 2},
		{"negative duration: not kept", response("Global", "-1m", `"reg.example.com":{"username":"u","password":"p"}`), time.Hour, "reg.example.com/a", 0, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
			fake := &fakePlugins{responses: map[string]string{"p": tt.resp}}
			cfg := provider("p", "*.example.com")
			cfg.DefaultCacheDuration = &metav1.Duration{Duration: tt.defDur}
			p := New(nil, Options{CredentialProviders: []kubeletconfigv1.CredentialProvider{cfg}, CredentialProviderBinDir: binDir(t, "p"), runPlugin: fake.run, Clock: clk, Logger: quiet})
			for i, repo := range []string{"reg.example.com/a", tt.second} {
				if i == 1 {
					clk.Step(tt.after)
				}
				entries, _, problems := p.providers.lookup(context.Background(), repo)
				if len(problems) > 0 || len(entries) != 1 || entries[0].Password != "p" {
					t.Fatalf("lookup %d of %s: %v %v", i, repo, entries, problems)
				}
			}
			runs := 0
			for _, n := range fake.runs {
				runs += n
			}
			if runs != tt.wantRuns {
				t.Errorf("plugin ran %d times, want %d", runs, tt.wantRuns)
			}
		})
	}
}

// TestCredentialProviderCacheBound: the cache of a plugin holds at most
// maxProviderCacheEntries; past it the entry closest to expiry goes.
func TestCredentialProviderCacheBound(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	fake := &fakePlugins{responses: map[string]string{"p": response("Image", "1h", `"reg.example.com":{"username":"u","password":"p"}`)}}
	p := New(nil, Options{CredentialProviders: []kubeletconfigv1.CredentialProvider{provider("p", "reg.example.com")}, CredentialProviderBinDir: binDir(t, "p"), runPlugin: fake.run, Clock: clk, Logger: quiet})
	plugin := p.providers.plugins[0]
	for i := range maxProviderCacheEntries + 10 {
		if _, _, problems := p.providers.lookup(context.Background(), fmt.Sprintf("reg.example.com/app%d", i)); len(problems) > 0 {
			t.Fatal(problems)
		}
		clk.Step(time.Second)
	}
	if n := len(plugin.cache); n != maxProviderCacheEntries {
		t.Errorf("cache holds %d entries, want the bound %d", n, maxProviderCacheEntries)
	}
	if _, ok := plugin.cached("reg.example.com/app0"); ok {
		t.Errorf("the entry closest to expiry was kept")
	}
	if _, ok := plugin.cached(fmt.Sprintf("reg.example.com/app%d", maxProviderCacheEntries+9)); !ok {
		t.Errorf("the newest entry was dropped")
	}
}

// TestCredentialProviderCoalesces: concurrent lookups of one image share
// one run of the plugin; a caller that gives up does not stop it for the
// others.
func TestCredentialProviderCoalesces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var runs int
		var mu sync.Mutex
		run := func(context.Context, string, []string, []string, []byte) ([]byte, []byte, error) {
			mu.Lock()
			runs++
			mu.Unlock()
			<-release
			return []byte(response("Image", "0s", `"reg.example.com":{"username":"u","password":"p"}`)), nil, nil
		}
		p := New(nil, Options{CredentialProviders: []kubeletconfigv1.CredentialProvider{provider("p", "reg.example.com")}, CredentialProviderBinDir: binDir(t, "p"), runPlugin: run, Logger: quiet})
		results := make(chan int, 8)
		for range 8 {
			go func() {
				entries, _, _ := p.providers.lookup(context.Background(), "reg.example.com/app")
				results <- len(entries)
			}()
		}
		impatient, cancel := context.WithCancel(context.Background())
		gaveUp := make(chan []error, 1)
		go func() {
			_, _, problems := p.providers.lookup(impatient, "reg.example.com/app")
			gaveUp <- problems
		}()
		synctest.Wait() // every lookup waits on the one run
		cancel()
		if problems := <-gaveUp; len(problems) != 1 || !errors.Is(problems[0], context.Canceled) {
			t.Errorf("the impatient lookup: %v", problems)
		}
		close(release)
		for range 8 {
			if n := <-results; n != 1 {
				t.Errorf("a lookup got %d credentials, want 1", n)
			}
		}
		if runs != 1 {
			t.Errorf("the plugin ran %d times for concurrent lookups, want 1", runs)
		}
	})
}

// writePlugin writes an executable shell script into dir.
func writePlugin(t *testing.T, dir, name, script string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestCredentialProviderExec runs real plugins (shell scripts): the
// request on stdin, the config's args and env; and the bounds: a plugin
// that hangs (with a child holding its stdout) is killed at the timeout,
// one that floods stdout is cut at maxProviderResponse, one that crashes
// is reported with the end of its stderr, and garbage on stdout is
// reported without quoting it.
func TestCredentialProviderExec(t *testing.T) {
	dir := t.TempDir()
	okResponse := response("Image", "0s", `"reg.example.com":{"username":"$1-$PLUGIN_ENV","password":"s3cret-pw"}`)
	writePlugin(t, dir, "ok", "cat > \"$REQUEST_FILE\"\ncat <<EOF\n"+okResponse+"\nEOF\n")
	writePlugin(t, dir, "hang", "sleep 600 &\nsleep 600\n")
	writePlugin(t, dir, "leaves", "echo $$ > \"$PIDS_FILE\"\nsleep 600 &\necho $! >> \"$PIDS_FILE\"\necho 'failed to reach the metadata service' >&2\nexit 4\n")
	writePlugin(t, dir, "flood", "yes s3cret-pw\n")
	writePlugin(t, dir, "crash", "echo 'line one' >&2\necho 'cannot reach the metadata service' >&2\nexit 3\n")
	writePlugin(t, dir, "garbage", "echo 'password=s3cret-pw, not JSON'\n")
	writePlugin(t, dir, "empty", "exit 0\n")
	writePlugin(t, dir, "wrongversion", "echo '"+strings.ReplaceAll(response("Image", "", `"reg.example.com":{"username":"u","password":"s3cret-pw"}`), "/v1\"", "/v1beta1\"")+"'\n")
	request, pids := filepath.Join(t.TempDir(), "request"), filepath.Join(t.TempDir(), "pids")
	tests := []struct {
		plugin  string
		wantErr string // "" for success
	}{
		{"ok", ""},
		{"hang", "killed after 300ms without answering"},
		{"flood", fmt.Sprintf("response larger than %d bytes", maxProviderResponse)},
		{"crash", "exited: exit status 3: stderr: line one cannot reach the metadata service"},
		{"leaves", "exited: exit status 4: stderr: failed to reach the metadata service"},
		{"garbage", "response is not a CredentialProviderResponse: syntax error at byte 1"},
		{"empty", "response is empty: want a CredentialProviderResponse on stdout"},
		{"wrongversion", `response apiVersion is "credentialprovider.kubelet.k8s.io/v1beta1", want credentialprovider.kubelet.k8s.io/v1, the request's`},
	}
	for _, tt := range tests {
		t.Run(tt.plugin, func(t *testing.T) {
			cfg := provider(tt.plugin, "reg.example.com")
			cfg.Args = []string{"arg1"}
			cfg.Env = []kubeletconfigv1.ExecEnvVar{{Name: "PLUGIN_ENV", Value: "env1"}, {Name: "REQUEST_FILE", Value: request}, {Name: "PIDS_FILE", Value: pids}}
			var logs bytes.Buffer
			// Only the plugin that never answers meets the timeout: the
			// others have a minute, whatever the machine's load.
			timeout := time.Minute
			if tt.plugin == "hang" {
				timeout = 300 * time.Millisecond
			}
			p := New(nil, Options{CredentialProviders: []kubeletconfigv1.CredentialProvider{cfg}, CredentialProviderBinDir: dir, CredentialProviderTimeout: timeout,
				Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			entries, _, problems := p.providers.lookup(context.Background(), "reg.example.com/app")
			if strings.Contains(logs.String(), "s3cret") {
				t.Errorf("the log quotes the plugin's output: %s", logs.String())
			}
			if tt.wantErr != "" {
				want := "credential provider " + tt.plugin + ": " + tt.wantErr
				if len(problems) != 1 || problems[0].Error() != want {
					t.Errorf("problems %v, want %q", problems, want)
				}
				if strings.Contains(fmt.Sprint(problems), "s3cret") {
					t.Errorf("a problem quotes the plugin's output: %v", problems)
				}
				if tt.plugin == "leaves" {
					data, err := os.ReadFile(pids)
					if err != nil {
						t.Fatal(err)
					}
					for _, pid := range strings.Fields(string(data)) {
						waitProcessEnd(t, pid)
					}
				}
				return
			}
			if len(problems) > 0 || len(entries) != 1 || entries[0].Username != "arg1-env1" || entries[0].Password != "s3cret-pw" {
				t.Fatalf("entries %v, problems %v", entries, problems)
			}
			got, err := os.ReadFile(request)
			if want := `{"kind":"CredentialProviderRequest","apiVersion":"credentialprovider.kubelet.k8s.io/v1","image":"reg.example.com/app"}`; err != nil || string(got) != want {
				t.Errorf("request %q (%v), want %q", got, err, want)
			}
		})
	}
}

// TestResolvePlugin: the executable is the provider's plain name in the
// bin dir; a link within the dir is followed, one out of it is not; a
// file or dir others may write is refused.
func TestResolvePlugin(t *testing.T) {
	dir := t.TempDir()
	outside := t.TempDir()
	writePlugin(t, dir, "real", "exit 0\n")
	writePlugin(t, outside, "elsewhere", "exit 0\n")
	for link, target := range map[string]string{"inside": "real", "out": filepath.Join(outside, "elsewhere"), "up": "../" + filepath.Base(outside) + "/elsewhere"} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	writePlugin(t, dir, "writable", "exit 0\n")
	if err := os.Chmod(filepath.Join(dir, "writable"), 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "noexec"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	openDir := t.TempDir()
	writePlugin(t, openDir, "real", "exit 0\n")
	if err := os.Chmod(openDir, 0o777); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		dir, name, want string // want: the path, or the error's text
	}{
		{dir, "real", filepath.Join(dir, "real")},
		{dir, "inside", filepath.Join(dir, "real")},
		{dir, "out", "is a link out of the bin dir"},
		{dir, "up", "is a link out of the bin dir"},
		{dir, "../" + filepath.Base(outside) + "/elsewhere", "must be a plain file name"},
		{dir, "..", "is not a file name"},
		{dir, "with space", "must be a plain file name"},
		{dir, "missing", "no such file or directory"},
		{dir, "writable", "writable by group or others"},
		{dir, "noexec", "is not an executable file"},
		{openDir, "real", "bin dir " + openDir + ": writable by group or others"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ResolvePlugin(tt.dir, tt.name)
			if err != nil {
				got = err.Error()
			}
			if got != tt.want && (err == nil || !strings.Contains(got, tt.want)) {
				t.Errorf("ResolvePlugin(%s) = %q, want %q", tt.name, got, tt.want)
			}
		})
	}
}

// TestPullWithProviders: the pod's and node's credentials are tried
// first, and a working one runs no plugin; without any, the plugins'
// are tried; with none of those either, an anonymous pull, whose error
// names the plugin that failed; the hint about missing credentials only
// for images no plugin matches. No error holds a password.
func TestPullWithProviders(t *testing.T) {
	tests := []struct {
		name      string
		creds     []*runtimeapi.AuthConfig
		image     string
		responses map[string]string
		failures  map[string]error
		wantUsers string
		wantErr   string
		wantRuns  int
	}{
		{"a Secret works: no plugin run", []*runtimeapi.AuthConfig{{Username: "secret", Password: "right"}}, "reg.example.com/app:1",
			map[string]string{"p": response("Image", "", `"reg.example.com":{"username":"plugin","password":"right"}`)}, nil, "secret", "", 0},
		{"the Secret fails, the plugin's work", []*runtimeapi.AuthConfig{{Username: "secret", Password: "wrong"}}, "reg.example.com/app:1",
			map[string]string{"p": response("Image", "", `"reg.example.com":{"username":"plugin","password":"right"}`)}, nil, "secret plugin", "", 1},
		{"plugin only", nil, "reg.example.com/app:1",
			map[string]string{"p": response("Image", "", `"reg.example.com":{"username":"plugin","password":"right"}`)}, nil, "plugin", "", 1},
		{"the plugin's are wrong", nil, "reg.example.com/app:1",
			map[string]string{"p": response("Image", "", `"reg.example.com":{"username":"plugin","password":"wrong-pw"}`)}, nil, "plugin",
			"401 Unauthorized for plugin", 1},
		{"the plugin fails: anonymous", nil, "reg.example.com/app:1", nil, map[string]error{"p": errors.New("exited: exit status 1")}, "<anonymous>",
			"credential provider p: exited: exit status 1: stderr: plugin said why; 401 Unauthorized", 1},
		{"no plugin matches: the hint", nil, "other.example.org/app:1", nil, nil, "<anonymous>",
			"401 Unauthorized (berth had no credentials for other.example.org: name an image pull Secret in imagePullSecrets, put them in the node's config.json, or configure an image credential provider)", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &fakePlugins{responses: tt.responses, failures: tt.failures}
			is := &authImages{FakeImageService: fakeri.NewFakeImageService()}
			p := New(is, Options{CredentialProviders: []kubeletconfigv1.CredentialProvider{provider("p", "*.example.com")}, CredentialProviderBinDir: binDir(t, "p"), runPlugin: fake.run, Logger: quiet})
			_, err := p.Pull(context.Background(), &runtimeapi.ImageSpec{Image: tt.image}, tt.creds, nil)
			if got := strings.Join(is.users, " "); got != tt.wantUsers {
				t.Errorf("tried %q, want %q", got, tt.wantUsers)
			}
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.HasSuffix(err.Error(), tt.wantErr)) {
				t.Errorf("err = %v, want ...%q", err, tt.wantErr)
			}
			if err != nil && (strings.Contains(err.Error(), "wrong-pw") || strings.Contains(err.Error(), "right")) {
				t.Errorf("the error shows a password: %v", err)
			}
			if runs := fake.count("p " + strings.Split(tt.image, ":")[0]); runs != tt.wantRuns {
				t.Errorf("plugin ran %d times, want %d", runs, tt.wantRuns)
			}
		})
	}
}

// waitProcessEnd waits, on a pidfd, for the process pid (not a child of
// the test) to end: it was sent SIGKILL, so within seconds.
func waitProcessEnd(t *testing.T, pid string) {
	t.Helper()
	n, err := strconv.Atoi(pid)
	if err != nil {
		t.Fatal(err)
	}
	fd, err := unix.PidfdOpen(n, 0)
	if errors.Is(err, unix.ESRCH) {
		return // gone already
	}
	if err != nil {
		t.Fatalf("pidfd of %d: %v", n, err)
	}
	defer unix.Close(fd)
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		ready, err := unix.Poll(fds, 10_000)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil || ready == 0 {
			stat, _ := os.ReadFile("/proc/" + pid + "/stat")
			t.Errorf("process %d the plugin started still runs after its run ended (%v): %s", n, err, stat)
		}
		return
	}
}

// quiet is the logger of tests that do not read the log.
var quiet = slog.New(slog.DiscardHandler)
