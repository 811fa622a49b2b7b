// Package systemdbed boots a Debian bookworm machine with systemd as PID 1
// in a systemd-nspawn container, for tests of berth's systemd unit and
// Debian package under a real systemd: Type=notify, the watchdog,
// Restart=, the hardening directives, dpkg's maintainer scripts, boot
// ordering.
//
// The runtime is containerd installed inside the machine and run by its
// systemd as containerd.service, not the e2e test bed's containerd bound
// in from the host. That is the appliance berth's .deb is for, and only
// that way do the tests mean what they claim: After=/Wants=containerd.service
// orders two real units at boot; the tmpfs berth mounts for an emptyDir is
// checked to be visible to the runtime through the mount namespace the
// unit really gives berth (nspawn makes the container's mounts slaves of
// the host's, so a host containerd would never see it); hostPath and log
// paths are the machine's own paths, not ones that must exist identically
// on both sides.
//
// What it takes from the host: the rootfs cache (Rootfs), an overlay of
// it per bed (the cache stays clean), a directory bound in as
// /var/lib/containerd (an overlayfs snapshotter needs a real filesystem
// below it, and it keeps images and containers across a reboot of the
// machine), and the test images of e2e/testbed, imported once. The
// machine has a private network (its CNI bridge and iptables rules die
// with it), every capability (containerd needs CAP_NET_ADMIN and
// CAP_SYS_ADMIN), and no seccomp filter of nspawn's, so what berth's
// /proc/PID/status shows is what its own unit set.
//
// Close kills the machine (everything in its PID namespace, nested pods
// included, dies with its PID 1), unmounts the overlay and removes the
// bed's directory and the host cgroups runc created for its pods. A bed
// whose test binary died without Close is torn down by the next Start.
package systemdbed

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/e2e/testbed"
)

// Machine is the container's machine name, hence its hostname and berth's
// node name: pod "web" runs as "web-" + Machine.
const Machine = "berth-sdbed"

// bootTimeout bounds a boot, up to `systemctl is-system-running` answering.
const bootTimeout = 2 * time.Minute

// dirPrefix names every bed's directory in os.TempDir(), so the next Start
// finds the beds of dead test binaries.
const dirPrefix = "berth-sdbed-"

// Bed is a booted machine. Its exported fields never change; its methods
// are safe for concurrent use.
type Bed struct {
	Dir  string // the bed's private directory on the host
	Root string // the machine's root directory as the host sees it (the overlay)

	logf func(format string, args ...any)

	// mu guards the fields below: a reboot replaces them.
	mu     sync.Mutex
	nspawn *exec.Cmd
	exited chan struct{} // closed once nspawn is reaped
	pid1   int           // the machine's systemd, in the host's PID namespace
	conn   *grpc.ClientConn
	ids    map[string]bool // every sandbox and container ID seen, for cgroup cleanup
}

// Prerequisites reports why this machine cannot run a bed, or nil.
func Prerequisites() error {
	if os.Geteuid() != 0 {
		return errors.New("the systemd test bed boots a container: it needs root")
	}
	for _, bin := range []string{"systemd-nspawn", "nsenter", "debootstrap", "/usr/bin/busybox"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s not found (run `make testbed`): %w", bin, err)
		}
	}
	return nil
}

// Start builds or takes the cached rootfs, boots a machine on an overlay
// of it, waits until systemd reports it running and imports the test
// images into its containerd. On error nothing is left behind.
func Start(logf func(format string, args ...any)) (*Bed, error) {
	if err := Prerequisites(); err != nil {
		return nil, err
	}
	reapOrphans(logf)
	rootfs, err := Rootfs(testbed.CacheDir(), logf)
	if err != nil {
		return nil, err
	}
	archive, err := testbed.ImageArchive()
	if err != nil {
		return nil, fmt.Errorf("build test images: %w", err)
	}
	dir, err := newOwnedDir()
	if err != nil {
		return nil, err
	}
	b := &Bed{Dir: dir, Root: filepath.Join(dir, "root"), logf: logf, ids: map[string]bool{}}
	if err := b.setUp(rootfs, archive); err != nil {
		if cerr := b.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("clean up: %w", cerr))
		}
		return nil, err
	}
	return b, nil
}

// setUp mounts the overlay, configures the machine
// and boots it.
func (b *Bed) setUp(rootfs, archive string) error {
	for _, d := range []string{"upper", "work", "root", "containerd"} {
		if err := os.Mkdir(filepath.Join(b.Dir, d), 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	opts := fmt.Sprintf("lowerdir=%s,upperdir=%s,workdir=%s", rootfs, filepath.Join(b.Dir, "upper"), filepath.Join(b.Dir, "work"))
	if err := unix.Mount("overlay", b.Root, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount overlay of the rootfs: %w", err)
	}
	for path, content := range machineFiles {
		if err := b.WriteFile(path, content, 0o644); err != nil {
			return err
		}
	}
	wants := filepath.Join(b.Root, "etc/systemd/system/containerd.service.wants")
	if err := os.MkdirAll(wants, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", wants, err)
	}
	if err := os.Symlink("/etc/systemd/system/systemdbed-cgroups.service", filepath.Join(wants, "systemdbed-cgroups.service")); err != nil {
		return fmt.Errorf("enable systemdbed-cgroups.service: %w", err)
	}
	data, err := os.ReadFile(archive)
	if err != nil {
		return fmt.Errorf("read test images: %w", err)
	}
	if err := b.WriteFile("/root/images.tar", data, 0o644); err != nil {
		return err
	}
	if err := b.boot(); err != nil {
		return err
	}
	if out, err := b.Exec("ctr", "-n", "k8s.io", "images", "import", "/root/images.tar"); err != nil {
		return fmt.Errorf("import test images: %w\n%s", err, out)
	}
	return nil
}

// machineFiles configure the machine's containerd and CNI before its
// first boot.
var machineFiles = map[string][]byte{
	// The node name berth derives pod names from (debootstrap copied the
	// host's).
	"/etc/hostname": []byte(Machine + "\n"),
	// restrict_oom_score_adj: these hosts lack CAP_SYS_RESOURCE (see
	// e2e/testbed); the sandbox image is the test bed's offline pause.
	"/etc/containerd/config.toml": []byte(`version = 2
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "` + testbed.PauseRef + `"
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
`),
	"/etc/cni/net.d/10-systemdbed.conflist": []byte(`{"cniVersion": "0.4.0", "name": "systemdbed", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.88.0.0/16"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}]}
`),
	// nspawn mounts the cgroup v1 controllers read-only on a host with
	// legacy or hybrid cgroups, where runc must create a cgroup per
	// container; a real machine has them writable. Part of the bed, not of
	// what is tested.
	"/etc/systemd/system/systemdbed-cgroups.service": []byte(`[Unit]
Description=make the cgroup v1 controllers writable (systemd test bed)
DefaultDependencies=no
Before=containerd.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/bin/sh -c 'for d in /sys/fs/cgroup/*/; do mount -o remount,rw,bind "$d" || true; done'
`),
}

// WriteFile writes a file of the machine (path is absolute inside it),
// creating its parent directories, atomically (a temporary dotfile renamed
// into place, so an inotify watcher such as berth's never reads half of
// it).
func (b *Bed) WriteFile(path string, data []byte, mode os.FileMode) error {
	host := filepath.Join(b.Root, path)
	if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
		return fmt.Errorf("create parent of %s: %w", path, err)
	}
	tmp := filepath.Join(filepath.Dir(host), ".systemdbed-"+filepath.Base(host))
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return fmt.Errorf("chmod %s: %w", path, err)
	}
	if err := os.Rename(tmp, host); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// boot starts systemd-nspawn on b.Root and waits until the machine's
// systemd says the system is running.
func (b *Bed) boot() error {
	log, err := os.OpenFile(filepath.Join(b.Dir, "nspawn.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open nspawn log: %w", err)
	}
	defer log.Close()
	cmd := exec.Command("systemd-nspawn", "--directory="+b.Root, "--boot", "--register=no", "--keep-unit",
		"--machine="+Machine, "--private-network", "--capability=all", "--console=pipe",
		"--bind="+filepath.Join(b.Dir, "containerd")+":/var/lib/containerd")
	cmd.Env = append(os.Environ(), "SYSTEMD_SECCOMP=0")
	cmd.Stdout, cmd.Stderr = log, log
	// A session of its own: a Ctrl-C of the test does not reach it, Close
	// or the next Start's reaping does.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start systemd-nspawn: %w", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // its output is in nspawn.log; reaping is the point
		close(exited)
	}()
	b.mu.Lock()
	b.nspawn, b.exited = cmd, exited
	b.mu.Unlock()

	deadline := time.Now().Add(bootTimeout)
	pid1 := 0
	for pid1 == 0 {
		select {
		case <-exited:
			return fmt.Errorf("systemd-nspawn exited while booting:\n%s", b.nspawnLog())
		default:
		}
		if time.Now().After(deadline) {
			return errors.New("the machine's systemd did not appear")
		}
		pid1 = childNamed(cmd.Process.Pid, "systemd")
		time.Sleep(20 * time.Millisecond)
	}
	conn, err := grpc.NewClient("unix:///proc/"+strconv.Itoa(pid1)+"/root/run/containerd/containerd.sock",
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("dial the machine's containerd: %w", err)
	}
	b.mu.Lock()
	b.pid1, b.conn = pid1, conn
	b.mu.Unlock()
	if err := b.saveState(); err != nil {
		return err
	}

	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	// Until systemd has set up /run/systemd/system and its bus, systemctl
	// answers "offline" or cannot even ask, without waiting.
	var out string
	for {
		out, err = b.ExecContext(ctx, "systemctl", "is-system-running", "--wait")
		if !(strings.Contains(out, "Failed to connect to bus") || strings.HasPrefix(out, "offline")) || ctx.Err() != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if state := strings.TrimSpace(out); state != "running" {
		failed, _ := b.Exec("systemctl", "--failed", "--no-pager")
		return fmt.Errorf("the machine did not boot: is-system-running %q (%v)\n%s", state, err, failed)
	}
	return nil
}

// nspawnLog is the end of systemd-nspawn's output.
func (b *Bed) nspawnLog() string {
	data, _ := os.ReadFile(filepath.Join(b.Dir, "nspawn.log"))
	return tail(string(data), 30)
}

// PID1 is the machine's systemd, as the host sees it.
func (b *Bed) PID1() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.pid1
}

// Exec runs a command in the machine (all of its namespaces, as root) and
// returns its combined output.
func (b *Bed) Exec(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	return b.ExecContext(ctx, args...)
}

// ExecContext is Exec bounded by ctx.
func (b *Bed) ExecContext(ctx context.Context, args ...string) (string, error) {
	pid := b.PID1()
	if pid == 0 {
		return "", errors.New("the machine is not running")
	}
	cmd := exec.CommandContext(ctx, "nsenter", append([]string{"-t", strconv.Itoa(pid), "-a", "--", "env", "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C.UTF-8"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}

// Runtime returns a CRI client of the machine's containerd (through the
// socket in /proc/PID1/root), valid until the next Reboot.
func (b *Bed) Runtime() runtimeapi.RuntimeServiceClient {
	b.mu.Lock()
	defer b.mu.Unlock()
	return &recordingRuntime{RuntimeServiceClient: runtimeapi.NewRuntimeServiceClient(b.conn), b: b}
}

// recordingRuntime notes every sandbox and container ID it lists, so
// Close can remove the host cgroups runc made for them.
type recordingRuntime struct {
	runtimeapi.RuntimeServiceClient
	b *Bed
}

func (r *recordingRuntime) ListContainers(ctx context.Context, in *runtimeapi.ListContainersRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	resp, err := r.RuntimeServiceClient.ListContainers(ctx, in, opts...)
	for _, c := range resp.GetContainers() {
		r.b.noteID(c.Id)
	}
	return resp, err
}

func (r *recordingRuntime) ListPodSandbox(ctx context.Context, in *runtimeapi.ListPodSandboxRequest, opts ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error) {
	resp, err := r.RuntimeServiceClient.ListPodSandbox(ctx, in, opts...)
	for _, s := range resp.GetItems() {
		r.b.noteID(s.Id)
	}
	return resp, err
}

func (b *Bed) noteID(id string) {
	b.mu.Lock()
	b.ids[id] = true
	b.mu.Unlock()
}

// noteAllIDs lists every sandbox and container of the machine's runtime.
func (b *Bed) noteAllIDs() {
	if b.PID1() == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rt := b.Runtime()
	_, _ = rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	_, _ = rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
}

// Reboot shuts the machine down (`systemctl poweroff`, cut after grace as
// a power cut would) and boots the same root again: what the machine
// wrote, /var/lib/containerd included, persists; every process, pods
// included, dies, as on a real reboot. It reports whether the shutdown
// was clean.
func (b *Bed) Reboot(grace time.Duration) (bool, error) {
	b.noteAllIDs()
	_, _ = b.Exec("systemctl", "poweroff", "--no-block")
	clean := b.waitExited(grace)
	if !clean {
		b.kill()
	}
	return clean, b.boot()
}

// waitExited waits up to timeout for systemd-nspawn to exit.
func (b *Bed) waitExited(timeout time.Duration) bool {
	b.mu.Lock()
	exited := b.exited
	b.mu.Unlock()
	if exited == nil {
		return true
	}
	select {
	case <-exited:
		return true
	case <-time.After(timeout):
		return false
	}
}

// kill SIGKILLs the machine's PID 1, which takes every process of its PID
// namespace and the ones nested in it (the pods) along, then nspawn if it
// is still there, and waits for nspawn to exit.
func (b *Bed) kill() {
	b.mu.Lock()
	pid1, cmd := b.pid1, b.nspawn
	b.mu.Unlock()
	if pid1 != 0 {
		_ = syscall.Kill(pid1, syscall.SIGKILL)
	}
	if !b.waitExited(20*time.Second) && cmd != nil {
		_ = cmd.Process.Kill()
		b.waitExited(10 * time.Second)
	}
	b.mu.Lock()
	b.pid1 = 0
	if b.conn != nil {
		b.conn.Close()
		b.conn = nil
	}
	b.mu.Unlock()
}

// Close kills the machine and removes everything the bed made.
func (b *Bed) Close() error {
	b.noteAllIDs()
	b.kill()
	var errs []error
	if err := unmountBelow(b.Dir); err != nil {
		errs = append(errs, err)
	}
	b.mu.Lock()
	ids := b.ids
	b.mu.Unlock()
	removeCgroups(ids)
	if len(errs) == 0 {
		if err := os.RemoveAll(b.Dir); err != nil {
			errs = append(errs, fmt.Errorf("remove bed dir: %w", err))
		}
	}
	return errors.Join(errs...)
}

// unmountBelow detaches every mount at or below dir, deepest first.
func unmountBelow(dir string) error {
	err := testbed.UnmountBelow(dir)
	if uerr := unix.Unmount(dir, unix.MNT_DETACH); uerr != nil && !errors.Is(uerr, unix.EINVAL) && !errors.Is(uerr, unix.ENOENT) {
		err = errors.Join(err, fmt.Errorf("unmount %s: %w", dir, uerr))
	}
	return err
}

// removeCgroups removes the (empty, once the machine is dead) cgroup
// directories runc made on the host for the given sandbox and container
// IDs, in every hierarchy: nspawn's cgroup namespace puts them below the
// test's own cgroup, which is not the machine's to clean up otherwise.
func removeCgroups(ids map[string]bool) {
	if len(ids) == 0 {
		return
	}
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, root := range roots {
		var found []string
		_ = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil || !d.IsDir() {
				return nil
			}
			if strings.Count(strings.TrimPrefix(path, root), "/") > 5 {
				return fs.SkipDir
			}
			if ids[d.Name()] {
				found = append(found, path)
				return fs.SkipDir
			}
			return nil
		})
		for _, p := range found {
			_ = os.Remove(p)
		}
	}
}

// childNamed returns the PID of a child of parent whose command is name,
// or 0.
func childNamed(parent int, name string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open {
			continue
		}
		fields := strings.Fields(s[closing+1:])
		if len(fields) > 1 && fields[1] == strconv.Itoa(parent) && s[open+1:closing] == name {
			return pid
		}
	}
	return 0
}
