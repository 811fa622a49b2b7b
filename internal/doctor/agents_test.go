package doctor

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// fakeProc is a /proc tree in a temp dir: one directory per PID with its
// cmdline and a cwd link.
type fakeProc struct {
	t    *testing.T
	root string
}

func newFakeProc(t *testing.T) *fakeProc {
	return &fakeProc{t: t, root: t.TempDir()}
}

// add makes process pid with argv, running in cwd.
func (p *fakeProc) add(pid int, cwd string, argv ...string) {
	p.t.Helper()
	dir := filepath.Join(p.root, strconv.Itoa(pid))
	writeFile(p.t, filepath.Join(dir, "cmdline"), strings.Join(argv, "\x00")+"\x00", 0o444)
	if err := os.Symlink(cwd, filepath.Join(dir, "cwd")); err != nil {
		p.t.Fatal(err)
	}
}

// TestFindAgents: which kubelets and berths a manifest directory is
// shared with, from their flags, config files and defaults, with relative
// paths and symbolic links resolved.
func TestFindAgents(t *testing.T) {
	type agent struct {
		pid  int
		from string // substring of From
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, p *fakeProc, dir, etc string) string // returns the manifest dir asked about
		want  []agent
	}{
		{"kubelet flag", func(t *testing.T, p *fakeProc, dir, etc string) string {
			p.add(100, "/", "/usr/bin/kubelet", "--v=2", "--pod-manifest-path="+dir)
			return dir
		}, []agent{{100, "--pod-manifest-path"}}},
		{"kubelet flag as the next argument", func(t *testing.T, p *fakeProc, dir, etc string) string {
			p.add(100, "/", "kubelet", "--pod-manifest-path", dir)
			return dir
		}, []agent{{100, "--pod-manifest-path"}}},
		{"kubelet config file", func(t *testing.T, p *fakeProc, dir, etc string) string {
			writeFile(t, filepath.Join(etc, "kubelet.yaml"), "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\nstaticPodPath: "+dir+"\n", 0o644)
			p.add(100, "/", "/usr/bin/kubelet", "--config="+filepath.Join(etc, "kubelet.yaml"))
			return dir
		}, []agent{{100, "staticPodPath in " + "ETC/kubelet.yaml"}}},
		{"kubelet config relative to the kubelet's cwd, staticPodPath to the file", func(t *testing.T, p *fakeProc, dir, etc string) string {
			writeFile(t, filepath.Join(etc, "kubelet.yaml"), "staticPodPath: manifests\n", 0o644)
			p.add(100, filepath.Dir(etc), "/usr/bin/kubelet", "--config", filepath.Base(etc)+"/kubelet.yaml")
			return filepath.Join(etc, "manifests")
		}, []agent{{100, "staticPodPath in ETC/kubelet.yaml"}}},
		{"kubelet drop-in overrides its config", func(t *testing.T, p *fakeProc, dir, etc string) string {
			writeFile(t, filepath.Join(etc, "kubelet.yaml"), "staticPodPath: /elsewhere\n", 0o644)
			writeFile(t, filepath.Join(etc, "kubelet.conf.d", "10-static.conf"), "staticPodPath: "+dir+"\n", 0o644)
			p.add(100, "/", "/usr/bin/kubelet", "--config", filepath.Join(etc, "kubelet.yaml"), "--config-dir", filepath.Join(etc, "kubelet.conf.d"))
			return dir
		}, []agent{{100, "10-static.conf"}}},
		{"kubelet flag wins over its config", func(t *testing.T, p *fakeProc, dir, etc string) string {
			writeFile(t, filepath.Join(etc, "kubelet.yaml"), "staticPodPath: "+dir+"\n", 0o644)
			p.add(100, "/", "/usr/bin/kubelet", "--config", filepath.Join(etc, "kubelet.yaml"), "--pod-manifest-path=/elsewhere")
			return dir
		}, nil},
		{"kubelet elsewhere", func(t *testing.T, p *fakeProc, dir, etc string) string {
			p.add(100, "/", "/usr/bin/kubelet", "--pod-manifest-path=/etc/kubernetes/other")
			return dir
		}, nil},
		{"kubelet without static pods", func(t *testing.T, p *fakeProc, dir, etc string) string {
			p.add(100, "/", "/usr/bin/kubelet", "--v=2")
			return dir
		}, nil},
		{"hyperkube kubelet", func(t *testing.T, p *fakeProc, dir, etc string) string {
			p.add(100, "/", "/hyperkube", "kubelet", "--pod-manifest-path="+dir)
			return dir
		}, []agent{{100, "--pod-manifest-path"}}},
		{"kubelet through a symlinked directory", func(t *testing.T, p *fakeProc, dir, etc string) string {
			link := filepath.Join(etc, "link")
			if err := os.Symlink(dir, link); err != nil {
				t.Fatal(err)
			}
			p.add(100, "/", "/usr/bin/kubelet", "--pod-manifest-path="+link+"/")
			return dir
		}, []agent{{100, "--pod-manifest-path"}}},
		{"another berth, single-dash flag", func(t *testing.T, p *fakeProc, dir, etc string) string {
			p.add(200, "/", "/usr/bin/berth", "run", "-pod-manifest-path", dir)
			return dir
		}, []agent{{200, "--pod-manifest-path"}}},
		{"another berth, relative flag", func(t *testing.T, p *fakeProc, dir, etc string) string {
			p.add(200, filepath.Dir(dir), "berth", "run", "--pod-manifest-path=./"+filepath.Base(dir))
			return dir
		}, []agent{{200, "--pod-manifest-path"}}},
		{"another berth, config file", func(t *testing.T, p *fakeProc, dir, etc string) string {
			writeFile(t, filepath.Join(etc, "berth.yaml"), "staticPodPath: "+dir+"\nmaxPods: 10\n", 0o644)
			p.add(200, "/", "/usr/bin/berth", "run", "--config", filepath.Join(etc, "berth.yaml"))
			return dir
		}, []agent{{200, "staticPodPath in ETC/berth.yaml"}}},
		{"another berth, kubelet config named by its config", func(t *testing.T, p *fakeProc, dir, etc string) string {
			writeFile(t, filepath.Join(etc, "kubelet.yaml"), "staticPodPath: "+dir+"\n", 0o644)
			writeFile(t, filepath.Join(etc, "berth.yaml"), "kubeletConfig: "+filepath.Join(etc, "kubelet.yaml")+"\n", 0o644)
			p.add(200, "/", "/usr/bin/berth", "run", "--config", filepath.Join(etc, "berth.yaml"))
			return dir
		}, []agent{{200, "staticPodPath in ETC/kubelet.yaml"}}},
		{"another berth on the default", func(t *testing.T, p *fakeProc, dir, etc string) string {
			p.add(200, "/", "/usr/bin/berth", "run", "--listen=")
			return berthDefaultManifestPath
		}, []agent{{200, "the default --pod-manifest-path"}}},
		{"another berth with the file source off", func(t *testing.T, p *fakeProc, dir, etc string) string {
			p.add(200, "/", "/usr/bin/berth", "run", "--pod-manifest-path=", "--manifest-url=http://x")
			return berthDefaultManifestPath
		}, nil},
		{"ourselves", func(t *testing.T, p *fakeProc, dir, etc string) string {
			p.add(300, "/", "/usr/bin/berth", "run", "--pod-manifest-path="+dir)
			return dir
		}, nil},
		{"berth's other commands and other programs", func(t *testing.T, p *fakeProc, dir, etc string) string {
			p.add(200, "/", "/usr/bin/berth", "doctor", "--pod-manifest-path="+dir)
			p.add(201, "/", "/usr/bin/vim", dir+"/web.yaml")
			p.add(202, "/", "kubelet-wrapper", "--pod-manifest-path="+dir)
			writeFile(t, filepath.Join(p.root, "203", "cmdline"), "", 0o444) // a kernel thread
			writeFile(t, filepath.Join(p.root, "self", "cmdline"), "kubelet\x00--pod-manifest-path="+dir, 0o444)
			return dir
		}, nil},
		{"unreadable config", func(t *testing.T, p *fakeProc, dir, etc string) string {
			p.add(100, "/", "/usr/bin/kubelet", "--config", filepath.Join(etc, "missing.yaml"))
			return dir
		}, []agent{{100, "kubelet config ETC/missing.yaml: open"}}},
		{"a FIFO as config is refused, not waited on", func(t *testing.T, p *fakeProc, dir, etc string) string {
			if err := syscall.Mkfifo(filepath.Join(etc, "fifo.yaml"), 0o644); err != nil {
				t.Fatal(err)
			}
			p.add(100, "/", "/usr/bin/kubelet", "--config", filepath.Join(etc, "fifo.yaml"))
			return dir
		}, []agent{{100, "is not a regular file"}}},
		{"two agents, in PID order", func(t *testing.T, p *fakeProc, dir, etc string) string {
			p.add(200, "/", "/usr/bin/berth", "run", "--pod-manifest-path="+dir)
			p.add(100, "/", "/usr/bin/kubelet", "--pod-manifest-path="+dir)
			return dir
		}, []agent{{100, "--pod-manifest-path"}, {200, "--pod-manifest-path"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newFakeProc(t)
			base := t.TempDir()
			dir, etc := filepath.Join(base, "manifests"), filepath.Join(base, "etc")
			for _, d := range []string{dir, etc} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			asked := tt.setup(t, p, dir, etc)
			got, err := findAgents(p.root, asked, 300)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %+v, want %d agents", got, len(tt.want))
			}
			for i, w := range tt.want {
				from := strings.ReplaceAll(w.from, "ETC", etc)
				if got[i].PID != w.pid || !strings.Contains(got[i].From, from) {
					t.Errorf("agent %d: %+v, want PID %d from %q", i, got[i], w.pid, from)
				}
			}
		})
	}
}

// TestFindAgentsNoProc: a proc root that cannot be listed is an error.
func TestFindAgentsNoProc(t *testing.T) {
	if _, err := FindOtherAgents(filepath.Join(t.TempDir(), "none"), "/etc/kubernetes/manifests"); err == nil {
		t.Error("no error for a missing proc root")
	}
}

// TestCheckOtherAgents: a shared directory fails naming the PID and the
// fix; an agent that cannot be read is a WARN.
func TestCheckOtherAgents(t *testing.T) {
	tests := []struct {
		name   string
		argv   []string
		dir    string
		want   Status
		wantIn []string
		fixIn  string
		// serving is the PID of the berth serving the socket.
		serving int
	}{
		{"kubelet", []string{"/usr/bin/kubelet", "--pod-manifest-path=/srv/m"}, "/srv/m", Fail,
			[]string{"kubelet (PID 4242) runs the static pods of /srv/m (--pod-manifest-path)", "fight over their containers"}, "systemctl disable --now kubelet", 0},
		{"berth", []string{"/usr/bin/berth", "run", "--pod-manifest-path=/srv/m"}, "/srv/m", Fail,
			[]string{"berth (PID 4242)"}, "stop the other berth", 0},
		{"unreadable", []string{"/usr/bin/kubelet", "--config=/nonexistent/kubelet.yaml"}, "/srv/m", Warn,
			[]string{"could not tell which directory", "kubelet (PID 4242): kubelet config /nonexistent/kubelet.yaml"}, "make sure none of them uses /srv/m", 0},
		{"elsewhere", []string{"/usr/bin/kubelet", "--pod-manifest-path=/srv/other"}, "/srv/m", OK,
			[]string{"no kubelet or other berth runs static pods from /srv/m"}, "", 0},
		{"file source off", []string{"/usr/bin/kubelet", "--pod-manifest-path=/srv/m"}, "", OK, []string{"no --pod-manifest-path"}, "", 0},
		{"berth serving the socket", []string{"/usr/bin/berth", "run", "--pod-manifest-path=/srv/m"}, "/srv/m", OK,
			[]string{"berth (PID 4242), the one serving the socket, runs the static pods of /srv/m; no kubelet or other berth does"}, "", 4242},
		{"kubelet with the PID of the socket's berth", []string{"/usr/bin/kubelet", "--pod-manifest-path=/srv/m"}, "/srv/m", Fail,
			[]string{"kubelet (PID 4242)"}, "systemctl disable --now kubelet", 4242},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newFakeProc(t)
			p.add(4242, "/", tt.argv...)
			r := checkOtherAgents(p.root, tt.dir, tt.serving)
			checkResult(t, r, tt.want, tt.wantIn...)
			if !strings.Contains(r.Fix, tt.fixIn) {
				t.Errorf("fix %q lacks %q", r.Fix, tt.fixIn)
			}
		})
	}
}

// TestFlagValue: every form Go's flag and pflag take; the last one wins;
// nothing after "--".
func TestFlagValue(t *testing.T) {
	tests := []struct {
		args  []string
		value string
		found bool
	}{
		{[]string{"--config=/a"}, "/a", true},
		{[]string{"-config=/a"}, "/a", true},
		{[]string{"--config", "/a"}, "/a", true},
		{[]string{"-config", "/a"}, "/a", true},
		{[]string{"--config=/a", "--config", "/b"}, "/b", true},
		{[]string{"--config"}, "", false},
		{[]string{"--config-dir=/d"}, "", false},
		{[]string{"config=/a", "/a"}, "", false},
		{[]string{"--", "--config=/a"}, "", false},
		{[]string{"--config="}, "", true},
	}
	for _, tt := range tests {
		v, ok := flagValue(tt.args, "config")
		if v != tt.value || ok != tt.found {
			t.Errorf("flagValue(%q) = %q, %v; want %q, %v", tt.args, v, ok, tt.value, tt.found)
		}
	}
}

// FuzzAgentCommand: any command line and config file bytes are read
// without a panic, and a flag's value is always one of the arguments'.
func FuzzAgentCommand(f *testing.F) {
	f.Add([]byte("/usr/bin/kubelet\x00--config\x00/var/lib/kubelet/config.yaml\x00"), []byte("staticPodPath: /etc/kubernetes/manifests\n"))
	f.Add([]byte("berth\x00run\x00-pod-manifest-path=x\x00"), []byte(`{"staticPodPath": "x", "kubeletConfig": "k"}`))
	f.Add([]byte("hyperkube\x00kubelet\x00"), []byte("- a list\n"))
	f.Fuzz(func(t *testing.T, cmdline, config []byte) {
		kind, args := agentCommand(cmdline)
		if kind == "" && args != nil {
			t.Fatalf("arguments %q of no agent", args)
		}
		for _, name := range []string{"pod-manifest-path", "config", "config-dir", "kubelet-config"} {
			v, ok := flagValue(args, name)
			if ok && !slices.ContainsFunc(args, func(a string) bool { return a == v || strings.HasSuffix(a, "="+v) }) {
				t.Fatalf("flag %s = %q is in none of %q", name, v, args)
			}
		}
		_, _ = parseAgentConfig(config)
	})
}
