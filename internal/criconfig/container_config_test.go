package criconfig

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeri "k8s.io/cri-api/pkg/apis/testing"

	"github.com/berth-agent/berth/internal/podresources"
)

func ccPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "prod", UID: "uid-5", Labels: map[string]string{"app": "web"}},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{
				Name:                     "app",
				Image:                    "busybox:1.36",
				Command:                  []string{"sh", "-c"},
				Args:                     []string{"echo $(GREETING) $$(HOME) $(NOPE)"},
				WorkingDir:               "/work",
				Env:                      []v1.EnvVar{{Name: "GREETING", Value: "hello"}, {Name: "POD", ValueFrom: field("metadata.name")}},
				TerminationMessagePath:   "/dev/termination-log",
				TerminationMessagePolicy: v1.TerminationMessageReadFile,
				TTY:                      true,
				Stdin:                    true,
				Ports:                    []v1.ContainerPort{{Name: "http", ContainerPort: 80, Protocol: v1.ProtocolTCP}},
			}},
		},
	}
}

// mountAt returns the mount at a container path, or nil.
func mountAt(cfg *runtimeapi.ContainerConfig, path string) *runtimeapi.Mount {
	for _, m := range cfg.Mounts {
		if m.ContainerPath == path {
			return m
		}
	}
	return nil
}

func TestContainerConfigBasics(t *testing.T) {
	m, _ := newCfgBuilder(t, Options{})
	pod := ccPod()
	c := &pod.Spec.Containers[0]
	cfg, err := m.ContainerConfig(context.Background(), pod, c, 3, []string{"10.88.0.9"}, "sha256:abc")
	if err != nil {
		t.Fatal(err)
	}
	if want := (&runtimeapi.ContainerMetadata{Name: "app", Attempt: 3}); !reflect.DeepEqual(cfg.Metadata, want) {
		t.Errorf("metadata = %v", cfg.Metadata)
	}
	if cfg.Image.Image != "sha256:abc" || cfg.Image.UserSpecifiedImage != "busybox:1.36" {
		t.Errorf("image = %v", cfg.Image)
	}
	if want := []string{"echo hello $(HOME) $(NOPE)"}; !reflect.DeepEqual(cfg.Args, want) {
		t.Errorf("args = %q, want %q", cfg.Args, want)
	}
	if !reflect.DeepEqual(cfg.Command, []string{"sh", "-c"}) || cfg.WorkingDir != "/work" {
		t.Errorf("command = %q, workingDir = %q", cfg.Command, cfg.WorkingDir)
	}
	var env []string
	for _, kv := range cfg.Envs {
		env = append(env, kv.Key+"="+string(kv.Value))
	}
	if want := []string{"GREETING=hello", "POD=web-node1"}; !reflect.DeepEqual(env, want) {
		t.Errorf("env = %q, want %q", env, want)
	}
	wantLabels := map[string]string{LabelPodName: "web-node1", LabelPodNamespace: "prod", LabelPodUID: "uid-5", LabelContainerName: "app", LabelManaged: "true"}
	if !reflect.DeepEqual(cfg.Labels, wantLabels) {
		t.Errorf("labels = %v, want %v", cfg.Labels, wantLabels)
	}
	wantAnn := map[string]string{
		AnnotationContainerHash:            strconv.FormatUint(HashContainer(c), 16),
		AnnotationContainerImage:           "busybox:1.36",
		AnnotationContainerRestartCount:    "3",
		AnnotationTerminationMessagePath:   "/dev/termination-log",
		AnnotationTerminationMessagePolicy: "File",
		AnnotationPodGracePeriod:           "30",
		AnnotationContainerGracePeriod:     "30",
		AnnotationContainerPorts:           `[{"name":"http","containerPort":80,"protocol":"TCP"}]`,
	}
	if !reflect.DeepEqual(cfg.Annotations, wantAnn) {
		t.Errorf("annotations = %v\nwant %v", cfg.Annotations, wantAnn)
	}
	if cfg.LogPath != "app/3.log" {
		t.Errorf("log path = %q, want app/3.log", cfg.LogPath)
	}
	// The runtime may not create the log file's directory (CRI-O does not).
	logDir, err := m.podLogDir(pod)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(filepath.Join(logDir, "app")); err != nil || !fi.IsDir() {
		t.Errorf("container log directory not created: %v", err)
	}
	if !cfg.Tty || !cfg.Stdin || cfg.StdinOnce {
		t.Errorf("tty/stdin/stdinOnce = %v/%v/%v", cfg.Tty, cfg.Stdin, cfg.StdinOnce)
	}

	hosts := mountAt(cfg, "/etc/hosts")
	if hosts == nil {
		t.Fatal("no /etc/hosts mount for a pod-network pod with an IP")
	}
	b, err := os.ReadFile(hosts.HostPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "127.0.0.1\tlocalhost\n") || !strings.Contains(string(b), "10.88.0.9\tweb-node1\n") {
		t.Errorf("hosts file:\n%s", b)
	}
	term := mountAt(cfg, "/dev/termination-log")
	if term == nil {
		t.Fatal("no termination-message mount")
	}
	if dir := filepath.Join(m.opts.RootDir, "pods", "uid-5", "containers", "app"); filepath.Dir(term.HostPath) != dir {
		t.Errorf("termination-message file %s is not in %s", term.HostPath, dir)
	}
	fi, err := os.Stat(term.HostPath)
	if err != nil || fi.Mode().Perm() != 0o666 || fi.Size() != 0 {
		t.Errorf("termination-message file: %v, %v", fi, err)
	}

	sc := cfg.Linux.SecurityContext
	if !reflect.DeepEqual(sc.MaskedPaths, defaultMaskedPaths) || !reflect.DeepEqual(sc.ReadonlyPaths, defaultReadonlyPaths) {
		t.Errorf("masked %v, readonly %v: want the defaults", sc.MaskedPaths, sc.ReadonlyPaths)
	}
	if sc.Privileged || sc.NoNewPrivs || sc.ReadonlyRootfs || sc.RunAsUser != nil {
		t.Errorf("unexpected security settings: %v", sc)
	}
	if r := cfg.Linux.Resources; r.CpuShares != 2 || r.OomScoreAdj != 1000 || r.MemoryLimitInBytes != 0 {
		t.Errorf("best-effort resources = %v", r)
	}

	// The next start gets a new termination-message file.
	cfg2, err := m.ContainerConfig(context.Background(), pod, c, 4, []string{"10.88.0.9"}, "sha256:abc")
	if err != nil {
		t.Fatal(err)
	}
	if mountAt(cfg2, "/dev/termination-log").HostPath == term.HostPath {
		t.Errorf("restart reuses the termination-message file")
	}
}

// cfgCase builds one container config and checks it or its error.
type cfgCase struct {
	name    string
	opts    Options
	mutate  func(t *testing.T, p *v1.Pod, root string)
	podIPs  []string
	images  func(img *fakeri.FakeImageService)
	check   func(t *testing.T, cfg *runtimeapi.ContainerConfig, root string)
	wantErr string
	// binds: the case bind-mounts a subPath, which needs root.
	binds bool
}

func runCfgCases(t *testing.T, tests []cfgCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.binds && os.Geteuid() != 0 {
				t.Skip("bind-mounting a subPath needs root")
			}
			m, img := newCfgBuilder(t, tt.opts)
			if tt.images != nil {
				tt.images(img)
			}
			pod := ccPod()
			pod.Spec.Containers[0].TerminationMessagePath = ""
			scratch := t.TempDir()
			// Before the temporary directories go: the subPath binds.
			t.Cleanup(func() {
				if err := m.CleanupPodDir(pod.UID); err != nil {
					t.Error(err)
				}
			})
			if tt.mutate != nil {
				tt.mutate(t, pod, scratch)
			}
			ips := tt.podIPs
			if ips == nil {
				ips = []string{"10.88.0.9"}
			}
			cfg, err := m.ContainerConfig(context.Background(), pod, &pod.Spec.Containers[0], 0, ips, "busybox:1.36")
			if tt.wantErr != "" {
				if err == nil {
					t.Fatalf("err = nil, want one containing %q", tt.wantErr)
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %q, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, cfg, scratch)
		})
	}
}

// expectBind checks that the mount's host path ends in suffix and is a
// bind mount of want.
func expectBind(t *testing.T, hostPath, suffix, want string) {
	t.Helper()
	if !strings.HasSuffix(hostPath, suffix) {
		t.Errorf("host path = %q, want it to end in %s", hostPath, suffix)
	}
	got, err := os.Stat(hostPath)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(want)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(got, fi) {
		t.Errorf("%s is not a bind mount of %s", hostPath, want)
	}
}

func hostPathVol(name, path string, typ v1.HostPathType) v1.Volume {
	return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path, Type: &typ}}}
}

func withMount(p *v1.Pod, vol v1.Volume, vm v1.VolumeMount) {
	p.Spec.Volumes = append(p.Spec.Volumes, vol)
	vm.Name = vol.Name
	p.Spec.Containers[0].VolumeMounts = append(p.Spec.Containers[0].VolumeMounts, vm)
}

func TestContainerConfigHostPath(t *testing.T) {
	mustWrite := func(t *testing.T, path string) {
		t.Helper()
		if err := os.WriteFile(path, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	expectMount := func(hostPath func(root string) string) func(t *testing.T, cfg *runtimeapi.ContainerConfig, root string) {
		return func(t *testing.T, cfg *runtimeapi.ContainerConfig, root string) {
			mnt := mountAt(cfg, "/data")
			if mnt == nil || mnt.HostPath != hostPath(root) {
				t.Fatalf("mount = %v, want host path %s", mnt, hostPath(root))
			}
		}
	}
	tests := []cfgCase{
		{
			name: "Directory that exists",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				withMount(p, hostPathVol("data", root, v1.HostPathDirectory), v1.VolumeMount{MountPath: "/data", ReadOnly: true})
			},
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig, root string) {
				mnt := mountAt(cfg, "/data")
				if mnt.HostPath != root || !mnt.Readonly || mnt.SelinuxRelabel || mnt.Propagation != runtimeapi.MountPropagation_PROPAGATION_PRIVATE {
					t.Errorf("mount = %v", mnt)
				}
			},
		},
		{
			name: "Directory missing",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				withMount(p, hostPathVol("data", "/nonexistent/berth-test", v1.HostPathDirectory), v1.VolumeMount{MountPath: "/data"})
			},
			wantErr: `hostPath "/nonexistent/berth-test" for volume "data": does not exist (type Directory needs an existing directory; DirectoryOrCreate creates it)`,
		},
		{
			name: "Directory that is a file",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				mustWrite(t, filepath.Join(root, "f"))
				withMount(p, hostPathVol("data", filepath.Join(root, "f"), v1.HostPathDirectory), v1.VolumeMount{MountPath: "/data"})
			},
			wantErr: `for volume "data": not a directory`,
		},
		{
			name: "DirectoryOrCreate creates it",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				withMount(p, hostPathVol("data", filepath.Join(root, "a/b"), v1.HostPathDirectoryOrCreate), v1.VolumeMount{MountPath: "/data"})
			},
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig, root string) {
				if fi, err := os.Stat(filepath.Join(root, "a/b")); err != nil || !fi.IsDir() {
					t.Errorf("directory not created: %v", err)
				}
			},
		},
		{
			name: "DirectoryOrCreate on a file",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				mustWrite(t, filepath.Join(root, "f"))
				withMount(p, hostPathVol("data", filepath.Join(root, "f"), v1.HostPathDirectoryOrCreate), v1.VolumeMount{MountPath: "/data"})
			},
			wantErr: "not a directory",
		},
		{
			name: "File that exists",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				mustWrite(t, filepath.Join(root, "f"))
				withMount(p, hostPathVol("data", filepath.Join(root, "f"), v1.HostPathFile), v1.VolumeMount{MountPath: "/data"})
			},
			check: expectMount(func(root string) string { return filepath.Join(root, "f") }),
		},
		{
			name: "File that is a directory",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				withMount(p, hostPathVol("data", root, v1.HostPathFile), v1.VolumeMount{MountPath: "/data"})
			},
			wantErr: "not a file",
		},
		{
			name: "File missing",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				withMount(p, hostPathVol("data", filepath.Join(root, "nope"), v1.HostPathFile), v1.VolumeMount{MountPath: "/data"})
			},
			wantErr: "does not exist (type File needs an existing file; FileOrCreate creates it)",
		},
		{
			name: "FileOrCreate creates it",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				withMount(p, hostPathVol("data", filepath.Join(root, "new"), v1.HostPathFileOrCreate), v1.VolumeMount{MountPath: "/data"})
			},
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig, root string) {
				if fi, err := os.Stat(filepath.Join(root, "new")); err != nil || !fi.Mode().IsRegular() {
					t.Errorf("file not created: %v", err)
				}
			},
		},
		{
			name: "FileOrCreate without its parent",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				withMount(p, hostPathVol("data", filepath.Join(root, "no/such/file"), v1.HostPathFileOrCreate), v1.VolumeMount{MountPath: "/data"})
			},
			wantErr: "create file (its parent directory must exist)",
		},
		{
			name: "Socket",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				l, err := net.Listen("unix", filepath.Join(root, "s.sock"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { l.Close() })
				withMount(p, hostPathVol("data", filepath.Join(root, "s.sock"), v1.HostPathSocket), v1.VolumeMount{MountPath: "/data"})
			},
			check: expectMount(func(root string) string { return filepath.Join(root, "s.sock") }),
		},
		{
			name: "Socket that is a file",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				mustWrite(t, filepath.Join(root, "f"))
				withMount(p, hostPathVol("data", filepath.Join(root, "f"), v1.HostPathSocket), v1.VolumeMount{MountPath: "/data"})
			},
			wantErr: "not a socket",
		},
		{
			name: "CharDevice",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				withMount(p, hostPathVol("data", "/dev/null", v1.HostPathCharDev), v1.VolumeMount{MountPath: "/data"})
			},
			check: expectMount(func(string) string { return "/dev/null" }),
		},
		{
			name: "BlockDevice that is a character device",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				withMount(p, hostPathVol("data", "/dev/null", v1.HostPathBlockDev), v1.VolumeMount{MountPath: "/data"})
			},
			wantErr: `hostPath "/dev/null" for volume "data": not a block device`,
		},
		{
			name: "CharDevice that is a directory",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				withMount(p, hostPathVol("data", root, v1.HostPathCharDev), v1.VolumeMount{MountPath: "/data"})
			},
			wantErr: "not a character device",
		},
		{
			name: "unset type is not checked (the runtime creates a directory)",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				withMount(p, v1.Volume{Name: "data", VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: filepath.Join(root, "later")}}}, v1.VolumeMount{MountPath: "/data"})
			},
			check: expectMount(func(root string) string { return filepath.Join(root, "later") }),
		},
		{
			name: "subPath inside a hostPath is created",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				withMount(p, hostPathVol("data", root, v1.HostPathDirectory), v1.VolumeMount{MountPath: "/data", SubPath: "x/y"})
			},
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig, root string) {
				expectBind(t, mountAt(cfg, "/data").HostPath, "/pods/uid-5/volume-subpaths/data/app/0", filepath.Join(root, "x/y"))
			},
			binds: true,
		},
		{
			name: "subPath escaping with ..",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				withMount(p, hostPathVol("data", root, v1.HostPathDirectory), v1.VolumeMount{MountPath: "/data", SubPath: "../etc"})
			},
			wantErr: `container "app" volumeMount "data" at /data subPath "../etc": must not contain ".."`,
		},
		{
			name: "absolute subPath",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				withMount(p, hostPathVol("data", root, v1.HostPathDirectory), v1.VolumeMount{MountPath: "/data", SubPath: "/etc"})
			},
			wantErr: "must be a relative path",
		},
		{
			name: "subPath escaping through a symlink",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				if err := os.Symlink("/etc", filepath.Join(root, "link")); err != nil {
					t.Fatal(err)
				}
				withMount(p, hostPathVol("data", root, v1.HostPathDirectory), v1.VolumeMount{MountPath: "/data", SubPath: "link"})
			},
			wantErr: `container "app" volumeMount "data" at /data subPath "link": "link" is a symbolic link that leads out of the volume`,
		},
		{
			name: "subPathExpr expands the container's env",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				withMount(p, hostPathVol("data", root, v1.HostPathDirectory), v1.VolumeMount{MountPath: "/data", SubPathExpr: "$(POD)"})
			},
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig, root string) {
				expectBind(t, mountAt(cfg, "/data").HostPath, "/pods/uid-5/volume-subpaths/data/app/0", filepath.Join(root, "web-node1"))
			},
			binds: true,
		},
		{
			name: "HostToContainer propagation",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				mode := v1.MountPropagationHostToContainer
				withMount(p, hostPathVol("data", root, v1.HostPathDirectory), v1.VolumeMount{MountPath: "/data", MountPropagation: &mode})
			},
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig, root string) {
				if got := mountAt(cfg, "/data").Propagation; got != runtimeapi.MountPropagation_PROPAGATION_HOST_TO_CONTAINER {
					t.Errorf("propagation = %v", got)
				}
			},
		},
		{
			name: "Bidirectional propagation needs privileged",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				mode := v1.MountPropagationBidirectional
				withMount(p, hostPathVol("data", root, v1.HostPathDirectory), v1.VolumeMount{MountPath: "/data", MountPropagation: &mode})
			},
			wantErr: `volumeMount "data": mountPropagation Bidirectional is only allowed in privileged containers`,
		},
		{
			name: "Bidirectional propagation in a privileged container",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				mode := v1.MountPropagationBidirectional
				withMount(p, hostPathVol("data", root, v1.HostPathDirectory), v1.VolumeMount{MountPath: "/data", MountPropagation: &mode})
				p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: new(true)}
			},
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig, root string) {
				if got := mountAt(cfg, "/data").Propagation; got != runtimeapi.MountPropagation_PROPAGATION_BIDIRECTIONAL {
					t.Errorf("propagation = %v", got)
				}
			},
		},
		{
			name: "volumeMount of a volume the pod lacks",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				p.Spec.Containers[0].VolumeMounts = []v1.VolumeMount{{Name: "ghost", MountPath: "/g"}}
			},
			wantErr: `volumeMount "ghost": no volume of that name in the pod`,
		},
		{
			name: "unsupported volume type",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				withMount(p, v1.Volume{Name: "cfg", VolumeSource: v1.VolumeSource{Projected: &v1.ProjectedVolumeSource{}}}, v1.VolumeMount{MountPath: "/cfg"})
			},
			wantErr: `volume "cfg": only hostPath, emptyDir, configMap, secret and image volumes are supported`,
		},
	}
	runCfgCases(t, tests)
}

func TestContainerConfigEmptyDirAndFiles(t *testing.T) {
	tests := []cfgCase{
		{
			name: "emptyDir under the pod directory, world-writable, relabelled",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				withMount(p, v1.Volume{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}, v1.VolumeMount{MountPath: "/cache"})
			},
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig, _ string) {
				mnt := mountAt(cfg, "/cache")
				if !strings.HasSuffix(mnt.HostPath, "/pods/uid-5/volumes/kubernetes.io~empty-dir/cache") || !mnt.SelinuxRelabel {
					t.Errorf("mount = %v", mnt)
				}
				if fi, err := os.Stat(mnt.HostPath); err != nil || fi.Mode().Perm() != 0o777 {
					t.Errorf("emptyDir: %v, %v", fi, err)
				}
			},
		},
		{
			name: "emptyDir with fsGroup gets the group and setgid",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{FSGroup: new(int64(os.Getgid()))}
				withMount(p, v1.Volume{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}, v1.VolumeMount{MountPath: "/cache"})
			},
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig, _ string) {
				fi, err := os.Stat(mountAt(cfg, "/cache").HostPath)
				if err != nil || fi.Mode()&os.ModeSetgid == 0 {
					t.Errorf("emptyDir with fsGroup: %v, %v", fi, err)
				}
			},
		},
		{
			name: "emptyDir subPath is created with the volume's mode",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				withMount(p, v1.Volume{Name: "cache", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{}}}, v1.VolumeMount{MountPath: "/cache", SubPath: "app"})
			},
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig, _ string) {
				mnt := mountAt(cfg, "/cache")
				dir := strings.Replace(mnt.HostPath, "volume-subpaths/cache/app/0", "volumes/kubernetes.io~empty-dir/cache/app", 1)
				expectBind(t, mnt.HostPath, "/pods/uid-5/volume-subpaths/cache/app/0", dir)
				if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o777 {
					t.Errorf("subPath %s: %v, %v", dir, fi, err)
				}
			},
			binds: true,
		},
		{
			name: "emptyDir on hugepages is refused",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				withMount(p, v1.Volume{Name: "hp", VolumeSource: v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: v1.StorageMediumHugePages}}}, v1.VolumeMount{MountPath: "/hp"})
			},
			wantErr: `emptyDir volume "hp": medium "HugePages" is not supported`,
		},
		{
			name: "the container's own /etc/hosts mount wins",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				withMount(p, hostPathVol("hosts", "/etc/hosts", v1.HostPathFile), v1.VolumeMount{MountPath: "/etc/hosts"})
			},
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig, _ string) {
				if n := len(cfg.Mounts); n != 1 || cfg.Mounts[0].HostPath != "/etc/hosts" {
					t.Errorf("mounts = %v, want only the container's", cfg.Mounts)
				}
			},
		},
		{
			name:   "no /etc/hosts before the pod has an IP",
			podIPs: []string{},
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig, _ string) {
				if mountAt(cfg, "/etc/hosts") != nil {
					t.Errorf("hosts mounted without a pod IP")
				}
			},
		},
		{
			name:   "host network without aliases keeps the host's /etc/hosts",
			mutate: func(t *testing.T, p *v1.Pod, root string) { p.Spec.HostNetwork = true },
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig, _ string) {
				if mountAt(cfg, "/etc/hosts") != nil {
					t.Errorf("hosts mounted for a host-network pod")
				}
			},
		},
		{
			name: "host network with aliases: the host's file plus aliases",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				p.Spec.HostNetwork = true
				p.Spec.HostAliases = []v1.HostAlias{{IP: "10.1.2.3", Hostnames: []string{"db", "db.local"}}}
			},
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig, _ string) {
				b, err := os.ReadFile(mountAt(cfg, "/etc/hosts").HostPath)
				if err != nil {
					t.Fatal(err)
				}
				host, _ := os.ReadFile("/etc/hosts")
				if !strings.HasPrefix(string(b), string(host)) || !strings.HasSuffix(string(b), "# Entries added by HostAliases.\n10.1.2.3\tdb\tdb.local\n") {
					t.Errorf("hosts file:\n%s", b)
				}
			},
		},
		{
			name: "pod network: managed hosts with FQDN and aliases",
			opts: Options{ClusterDomain: "cluster.local"},
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				p.Spec.Hostname, p.Spec.Subdomain = "web", "svc1"
				p.Spec.HostAliases = []v1.HostAlias{{IP: "10.1.2.3", Hostnames: []string{"db"}}}
			},
			podIPs: []string{"10.88.0.9", "fd00::9"},
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig, _ string) {
				b, err := os.ReadFile(mountAt(cfg, "/etc/hosts").HostPath)
				if err != nil {
					t.Fatal(err)
				}
				want := "# Kubernetes-managed hosts file.\n127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n" +
					"fe00::0\tip6-localnet\nfe00::0\tip6-mcastprefix\nfe00::1\tip6-allnodes\nfe00::2\tip6-allrouters\n" +
					"10.88.0.9\tweb.svc1.prod.svc.cluster.local\tweb\nfd00::9\tweb.svc1.prod.svc.cluster.local\tweb\n" +
					"\n# Entries added by HostAliases.\n10.1.2.3\tdb\n"
				if string(b) != want {
					t.Errorf("hosts file:\n%s\nwant:\n%s", b, want)
				}
			},
		},
		{
			name: "host network: status.podIP is the host IP",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				p.Spec.HostNetwork = true
				p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "IP", ValueFrom: field("status.podIP")}}
			},
			podIPs: []string{},
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig, _ string) {
				if got := string(cfg.Envs[0].Value); got != "192.168.1.10" {
					t.Errorf("status.podIP = %q, want the host IP", got)
				}
			},
		},
		{
			name: "env error is a config error",
			mutate: func(t *testing.T, p *v1.Pod, root string) {
				p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "X", ValueFrom: field("spec.nope")}}
			},
			wantErr: `env "X": fieldRef "spec.nope" is not supported`,
		},
	}
	runCfgCases(t, tests)
}

func TestContainerConfigSecurity(t *testing.T) {
	imageUser := func(uid *int64, name string) func(img *fakeri.FakeImageService) {
		return func(img *fakeri.FakeImageService) {
			img.SetFakeImages([]string{"busybox:1.36"})
			img.Images["busybox:1.36"].Username = name
			if uid != nil {
				img.Images["busybox:1.36"].Uid = &runtimeapi.Int64Value{Value: *uid}
			}
		}
	}
	sc := func(p *v1.Pod) *v1.SecurityContext {
		if p.Spec.Containers[0].SecurityContext == nil {
			p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{}
		}
		return p.Spec.Containers[0].SecurityContext
	}
	tests := []cfgCase{
		{
			name: "capabilities, read-only root, no privilege escalation",
			mutate: func(t *testing.T, p *v1.Pod, _ string) {
				s := sc(p)
				s.Capabilities = &v1.Capabilities{Add: []v1.Capability{"NET_ADMIN"}, Drop: []v1.Capability{"ALL"}}
				s.ReadOnlyRootFilesystem = new(true)
				s.AllowPrivilegeEscalation = new(false)
			},
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig, _ string) {
				s := cfg.Linux.SecurityContext
				if !reflect.DeepEqual(s.Capabilities.AddCapabilities, []string{"NET_ADMIN"}) || !reflect.DeepEqual(s.Capabilities.DropCapabilities, []string{"ALL"}) {
					t.Errorf("capabilities = %v", s.Capabilities)
				}
				if !s.ReadonlyRootfs || !s.NoNewPrivs {
					t.Errorf("readonly %v, no_new_privs %v", s.ReadonlyRootfs, s.NoNewPrivs)
				}
			},
		},
		{
			name: "allowPrivilegeEscalation true allows it",
			mutate: func(t *testing.T, p *v1.Pod, _ string) {
				sc(p).AllowPrivilegeEscalation = new(true)
			},
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig, _ string) {
				if cfg.Linux.SecurityContext.NoNewPrivs {
					t.Errorf("no_new_privs set")
				}
			},
		},
		{
			name: "allowPrivilegeEscalation false with privileged is refused",
			mutate: func(t *testing.T, p *v1.Pod, _ string) {
				s := sc(p)
				s.AllowPrivilegeEscalation, s.Privileged = new(false), new(true)
			},
			wantErr: "allowPrivilegeEscalation false cannot be combined with privileged or CAP_SYS_ADMIN",
		},
		{
			name:   "privileged: nothing masked",
			mutate: func(t *testing.T, p *v1.Pod, _ string) { sc(p).Privileged = new(true) },
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig, _ string) {
				s := cfg.Linux.SecurityContext
				if !s.Privileged || s.MaskedPaths == nil || len(s.MaskedPaths) != 0 || len(s.ReadonlyPaths) != 0 {
					t.Errorf("privileged = %v, masked = %#v, readonly = %#v", s.Privileged, s.MaskedPaths, s.ReadonlyPaths)
				}
			},
		},
		{
			name: "procMount Unmasked: nothing masked",
			mutate: func(t *testing.T, p *v1.Pod, _ string) {
				pm := v1.UnmaskedProcMount
				sc(p).ProcMount = &pm
			},
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig, _ string) {
				if s := cfg.Linux.SecurityContext; len(s.MaskedPaths) != 0 || len(s.ReadonlyPaths) != 0 {
					t.Errorf("masked = %v", s.MaskedPaths)
				}
			},
		},
		{
			name: "container settings override the pod's",
			mutate: func(t *testing.T, p *v1.Pod, _ string) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{
					RunAsUser: new(int64(1000)), RunAsGroup: new(int64(1000)), SupplementalGroups: []int64{5},
					SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeRuntimeDefault},
					SELinuxOptions: &v1.SELinuxOptions{Type: "pod_t"},
				}
				s := sc(p)
				s.RunAsUser = new(int64(2000))
				s.SELinuxOptions = &v1.SELinuxOptions{Type: "ctr_t"}
			},
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig, _ string) {
				s := cfg.Linux.SecurityContext
				if s.RunAsUser.GetValue() != 2000 || s.RunAsGroup.GetValue() != 1000 {
					t.Errorf("run as %v:%v, want 2000:1000", s.RunAsUser, s.RunAsGroup)
				}
				if s.SelinuxOptions.GetType() != "ctr_t" || s.Seccomp.GetProfileType() != runtimeapi.SecurityProfile_RuntimeDefault {
					t.Errorf("selinux %v, seccomp %v", s.SelinuxOptions, s.Seccomp)
				}
				if !reflect.DeepEqual(s.SupplementalGroups, []int64{5}) {
					t.Errorf("supplemental groups = %v", s.SupplementalGroups)
				}
			},
		},
		{
			name:    "runAsNonRoot with an image running as root",
			mutate:  func(t *testing.T, p *v1.Pod, _ string) { sc(p).RunAsNonRoot = new(true) },
			images:  imageUser(nil, ""),
			wantErr: `container "app" has runAsNonRoot and image "busybox:1.36" will run as root: set securityContext.runAsUser to a non-zero user`,
		},
		{
			name:    "runAsNonRoot with an image user uid 0",
			mutate:  func(t *testing.T, p *v1.Pod, _ string) { sc(p).RunAsNonRoot = new(true) },
			images:  imageUser(new(int64(0)), ""),
			wantErr: "will run as root",
		},
		{
			name: "runAsNonRoot from the pod with an image user uid 1000",
			mutate: func(t *testing.T, p *v1.Pod, _ string) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: new(true)}
			},
			images: imageUser(new(int64(1000)), ""),
			check:  func(t *testing.T, cfg *runtimeapi.ContainerConfig, _ string) {},
		},
		{
			name:    "runAsNonRoot with a non-numeric image user",
			mutate:  func(t *testing.T, p *v1.Pod, _ string) { sc(p).RunAsNonRoot = new(true) },
			images:  imageUser(nil, "nginx"),
			wantErr: `image "busybox:1.36" has the non-numeric user "nginx", which cannot be verified as non-root`,
		},
		{
			name: "runAsNonRoot with runAsUser 0",
			mutate: func(t *testing.T, p *v1.Pod, _ string) {
				s := sc(p)
				s.RunAsNonRoot, s.RunAsUser = new(true), new(int64(0))
			},
			wantErr: `container "app" has runAsNonRoot but runAsUser 0 (root)`,
		},
		{
			name:    "runAsNonRoot with the image absent",
			mutate:  func(t *testing.T, p *v1.Pod, _ string) { sc(p).RunAsNonRoot = new(true) },
			wantErr: `image "busybox:1.36" is not present to read its user from`,
		},
		{
			name: "container runAsNonRoot false overrides the pod's true",
			mutate: func(t *testing.T, p *v1.Pod, _ string) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{RunAsNonRoot: new(true)}
				sc(p).RunAsNonRoot = new(false)
			},
			check: func(t *testing.T, cfg *runtimeapi.ContainerConfig, _ string) {},
		},
	}
	runCfgCases(t, tests)
}

func TestRunAsNonRootAsksForTheImageUserOnlyWhenNeeded(t *testing.T) {
	m, img := newCfgBuilder(t, Options{})
	pod := ccPod()
	c := &pod.Spec.Containers[0]
	c.SecurityContext = &v1.SecurityContext{RunAsNonRoot: new(true), RunAsUser: new(int64(1000))}
	if _, err := m.ContainerConfig(context.Background(), pod, c, 0, nil, "busybox:1.36"); err != nil {
		t.Fatal(err)
	}
	c.SecurityContext = nil
	if _, err := m.ContainerConfig(context.Background(), pod, c, 0, nil, "busybox:1.36"); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(img.Called, "ImageStatus") {
		t.Errorf("image calls = %v, want none when runAsUser settles it", img.Called)
	}
}

func TestContainerConfigResources(t *testing.T) {
	q := resource.MustParse
	tests := []struct {
		name      string
		resources v1.ResourceRequirements
		minAdj    int64
		want      *runtimeapi.LinuxContainerResources
	}{
		{
			name:      "guaranteed",
			resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: q("500m"), v1.ResourceMemory: q("256Mi")}},
			minAdj:    -999,
			want:      &runtimeapi.LinuxContainerResources{CpuShares: 512, CpuPeriod: 100000, CpuQuota: 50000, MemoryLimitInBytes: 256 << 20, OomScoreAdj: -997},
		},
		{
			name:      "guaranteed, but not below berth's own oom_score_adj",
			resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: q("500m"), v1.ResourceMemory: q("256Mi")}},
			minAdj:    0,
			want:      &runtimeapi.LinuxContainerResources{CpuShares: 512, CpuPeriod: 100000, CpuQuota: 50000, MemoryLimitInBytes: 256 << 20, OomScoreAdj: 0},
		},
		{
			name: "burstable: shares from requests, adj from the memory request",
			resources: v1.ResourceRequirements{
				Requests: v1.ResourceList{v1.ResourceCPU: q("100m"), v1.ResourceMemory: q("4Gi")},
				Limits:   v1.ResourceList{v1.ResourceCPU: q("2")},
			},
			minAdj: -999,
			want:   &runtimeapi.LinuxContainerResources{CpuShares: 102, CpuPeriod: 100000, CpuQuota: 200000, OomScoreAdj: 500},
		},
		{
			name:      "tiny CPU limit: quota floor of 1ms",
			resources: v1.ResourceRequirements{Limits: v1.ResourceList{v1.ResourceCPU: q("1m")}},
			minAdj:    -999,
			want:      &runtimeapi.LinuxContainerResources{CpuShares: 2, CpuPeriod: 100000, CpuQuota: 1000, OomScoreAdj: 999},
		},
		{
			name:      "best effort",
			resources: v1.ResourceRequirements{},
			minAdj:    -999,
			want:      &runtimeapi.LinuxContainerResources{CpuShares: 2, OomScoreAdj: 1000},
		},
		{
			name: "hugepages",
			resources: v1.ResourceRequirements{Limits: v1.ResourceList{
				"hugepages-2Mi": q("64Mi"), "hugepages-1Gi": q("2Gi"), v1.ResourceMemory: q("128Mi"),
			}},
			minAdj: -999,
			want: &runtimeapi.LinuxContainerResources{
				CpuShares: 2, MemoryLimitInBytes: 128 << 20, OomScoreAdj: 999,
				HugepageLimits: []*runtimeapi.HugepageLimit{{PageSize: "1GB", Limit: 2 << 30}, {PageSize: "2MB", Limit: 64 << 20}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := newCfgBuilder(t, Options{ProbeNode: func() (podresources.NodeFacts, error) {
				f, err := testNodeFacts()
				f.MinOOMScoreAdj = tt.minAdj
				return f, err
			}})
			pod := ccPod()
			c := &pod.Spec.Containers[0]
			c.Resources = tt.resources
			cfg, err := m.ContainerConfig(context.Background(), pod, c, 0, nil, "busybox:1.36")
			if err != nil {
				t.Fatal(err)
			}
			if got := cfg.Linux.Resources; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("resources = %v\nwant %v", got, tt.want)
			}
		})
	}
}

func TestNextLogIndex(t *testing.T) {
	m, _ := newCfgBuilder(t, Options{})
	pod := ccPod()
	if got := m.NextLogIndex(pod, "app"); got != 0 {
		t.Errorf("first start: %d, want 0", got)
	}
	dir := filepath.Join(mustPath(t)(m.podLogDir(pod)), "app")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"0.log", "7.log", "2.log", "notes.txt", "9.log.gz"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := m.NextLogIndex(pod, "app"); got != 8 {
		t.Errorf("runtime state lost: %d, want 8 (after 7.log)", got)
	}
}

// field is an env var source reading a field of the pod.
func field(path string) *v1.EnvVarSource {
	return &v1.EnvVarSource{FieldRef: &v1.ObjectFieldSelector{FieldPath: path}}
}
