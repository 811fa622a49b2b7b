// Package testbed runs a private, real containerd for end-to-end tests: its
// own root, state dir, socket, CNI network (bridge and /24 of its own),
// offline busybox and pause images built in code, and optionally a local
// registry serving busybox over plain HTTP. Many beds may run at once on
// one machine, beside the machine's own containerd.
//
// Everything a bed creates lives below Bed.Dir, except what containerd 1.6
// puts in fixed places (network namespaces in /var/run/netns, shim sockets
// in /run/containerd/s), the bridge and portmap's iptables rules; Close
// removes all of it, even after a failed test or a stopped containerd. A
// bed whose test binary died without Close (a -timeout) is torn down by
// the next Start on the machine.
//
// Use it from TestMain (Start, then Close) or from one test (StartT):
//
//	b := testbed.StartT(t, testbed.Options{})
//	// run berth with --container-runtime-endpoint b.Endpoint, or talk CRI:
//	resp, err := b.Runtime().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
//
// The containerd version is a parameter (Options.Containerd, else
// $BERTH_CONTAINERD): Debian's 1.6 by default, or 1.7 / 2.x built from
// their Go modules into the cache directory on first use and run with
// their own shim and a config in their own format (config.go).
//
// It needs root and the packages `make testbed` installs. Known quirk of
// containerd 1.6: a host-network sandbox must not set a hostname (runc
// refuses it without a private UTS namespace), as the kubelet does not.
package testbed

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// cniBinDir is where Debian's containernetworking-plugins installs them.
const cniBinDir = "/usr/lib/cni"

// backoffConfig makes the CRI connection redial within half a second
// once containerd is back.
var backoffConfig = backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, MaxDelay: 500 * time.Millisecond}

// readyTimeout bounds how long containerd may take to answer after start.
const readyTimeout = 60 * time.Second

// Options selects the optional parts of a bed.
type Options struct {
	// Registry starts a local docker-registry with the busybox image pushed
	// (default false: it costs time).
	Registry bool
	// RegistryAuth, with Registry, makes the registry require these
	// credentials (docker-registry's htpasswd authentication).
	RegistryAuth *RegistryAuth
	// Dir, when set, is the bed's root instead of a fresh temp dir. It is
	// created if missing and must not hold another bed. `testbed up` uses it.
	Dir string
	// Containerd is the containerd version to run: "1.6" (Debian's
	// package), "1.7", "2.1", "2.3", "2.4" or an exact 1.7.x/2.x.y
	// release, built from its Go module on first use and cached. Empty means $BERTH_CONTAINERD,
	// else "1.6".
	Containerd string
}

// Bed is a running private containerd and what belongs to it. Its exported
// fields are set by Start and never change; its methods are safe for
// concurrent use.
type Bed struct {
	Dir                  string // private root of everything below (a fresh temp dir)
	Endpoint             string // "unix://" + Socket, for --container-runtime-endpoint
	Socket               string // containerd's CRI/gRPC socket path
	BusyboxImage         string // "docker.io/library/busybox:1.36", imported
	PauseImage           string // "registry.k8s.io/pause:3.9", imported, the CRI sandbox_image
	Registry             string // "127.0.0.1:PORT" when Options.Registry, else ""
	RegistryBusyboxImage string // Registry + "/library/busybox:1.36", only in the registry, NOT imported
	Bridge               string // the CNI bridge name
	Subnet               string // the pod subnet, e.g. "10.231.17.0/24"
	// ContainerdVersion is what the runtime reports as its version through
	// CRI, e.g. "1.6.20~ds1" (Debian's) or "v2.1.9".
	ContainerdVersion string

	version     runtimeVersion
	network     network
	snapshotter string
	owner       *owner           // set for a temporary bed: see reapOrphans
	conn        *grpc.ClientConn // redials by itself across containerd restarts

	// mu guards the fields below and serializes starting, stopping and
	// closing.
	mu         sync.Mutex
	containerd *process
	registry   *process
	// registryAuth is Options.RegistryAuth; set before the registry
	// starts and never changed.
	registryAuth *RegistryAuth
	closed       bool
}

// Start brings a bed up: it builds (or takes from the cache) the images,
// claims a network, starts containerd (and the registry when asked),
// imports the images and returns once CRI reports the runtime and the
// network ready. Meant for TestMain; on error nothing is left behind.
func Start(opts Options) (*Bed, error) {
	started := time.Now()
	b, err := start(opts)
	if err != nil {
		return nil, err
	}
	slog.Debug("test bed up", "dir", b.Dir, "endpoint", b.Endpoint, "subnet", b.Subnet, "took", time.Since(started))
	return b, nil
}

// StartT is Start for a single test: the bed is closed when t ends, and a
// failure to start fails t. When t has failed, the end of containerd's log
// is logged first.
func StartT(t testing.TB, opts Options) *Bed {
	t.Helper()
	b, err := Start(opts)
	if err != nil {
		t.Fatalf("start test bed: %v", err)
	}
	b.CloseWith(t)
	return b
}

// CloseWith closes b when t ends, for a bed started with Start; when t
// has failed, the end of containerd's log is logged first.
func (b *Bed) CloseWith(t testing.TB) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("test bed %s: last lines of containerd.log:\n%s", b.Dir, tail(b.path("containerd.log"), 30))
		}
		if err := b.Close(); err != nil {
			t.Errorf("close test bed: %v", err)
		}
	})
}

// start does Start's work; on error it closes what it already set up.
func start(opts Options) (*Bed, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("the test bed runs containerd and CNI: it needs root")
	}
	name := opts.Containerd
	if name == "" {
		name = os.Getenv(EnvContainerd)
	}
	version, err := resolveContainerd(name, cacheDir())
	if err != nil {
		return nil, err
	}
	need := []string{version.bin("containerd"), version.bin("containerd-shim-runc-v2"), "runc", version.bin("ctr"), "ip", "/usr/bin/busybox", filepath.Join(cniBinDir, "bridge")}
	if version.CRIO {
		need = []string{version.bin("crio"), version.bin("pinns"), "/usr/bin/conmon", "/usr/sbin/runc", "skopeo", "ip", "/usr/bin/busybox", filepath.Join(cniBinDir, "bridge")}
	}
	for _, bin := range need {
		if _, err := exec.LookPath(bin); err != nil {
			return nil, fmt.Errorf("%s not found (run `make testbed`): %w", bin, err)
		}
	}
	if opts.Registry {
		for _, bin := range []string{"docker-registry", "skopeo"} {
			if _, err := exec.LookPath(bin); err != nil {
				return nil, fmt.Errorf("%s not found (run `make testbed`): %w", bin, err)
			}
		}
	}
	archive, err := imageArchive(cacheDir(), "/usr/bin/busybox")
	if err != nil {
		return nil, fmt.Errorf("build test images: %w", err)
	}

	reapOrphans(claimDir)

	var own *owner
	dir := opts.Dir
	if dir == "" {
		if own, err = selfOwner(); err != nil {
			return nil, err
		}
		// The name's length is fixed: checking the parent checks them all.
		if err := checkSocketRoom(filepath.Join(os.TempDir(), "berth-testbed-0123456789")); err != nil {
			return nil, err
		}
		if dir, err = os.MkdirTemp("", "berth-testbed-"); err != nil {
			return nil, fmt.Errorf("create bed dir: %w", err)
		}
	} else {
		if dir, err = filepath.Abs(dir); err != nil {
			return nil, fmt.Errorf("bed dir: %w", err)
		}
		if err := checkSocketRoom(dir); err != nil {
			return nil, err
		}
		if _, err := os.Stat(filepath.Join(dir, stateFile)); err == nil {
			return nil, fmt.Errorf("bed dir %s already holds a bed: take it down first", dir)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("create bed dir: %w", err)
		}
	}
	b := &Bed{
		Dir:          dir,
		Socket:       filepath.Join(dir, version.socketName()),
		BusyboxImage: BusyboxRef,
		PauseImage:   PauseRef,
		owner:        own,
		registryAuth: opts.RegistryAuth,
		version:      version,
	}
	b.Endpoint = "unix://" + b.Socket
	if err := b.setUp(opts, archive); err != nil {
		if cerr := b.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("clean up: %w", cerr))
		}
		return nil, err
	}
	return b, nil
}

// socketName is containerd's socket in the bed's Dir; containerd adds
// ".ttrpc" for its second one.
const socketName = "containerd.sock"

// socketName is the runtime's socket in the bed's Dir.
func (v runtimeVersion) socketName() string {
	if v.CRIO {
		return "crio.sock"
	}
	return socketName
}

// checkSocketRoom fails when dir is too long a path for containerd's
// sockets in it (unix socket paths have 108 bytes, NUL included).
func checkSocketRoom(dir string) error {
	if len(filepath.Join(dir, socketName+".ttrpc")) >= 108 {
		return fmt.Errorf("bed dir %s is too long a path for containerd's unix sockets in it", dir)
	}
	return nil
}

// setUp creates the bed in b.Dir.
func (b *Bed) setUp(opts Options, archive string) error {
	for _, d := range []string{b.path("tmp"), b.path("cni", "net.d"), b.path("cni", "ipam"), b.path("certs.d")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("create %s: %w", d, err)
		}
	}
	b.snapshotter = "overlayfs"
	if b.version.CRIO {
		b.snapshotter = crioStorageDriver(b.path("tmp"))
	} else if !overlayUsable(b.path("tmp")) {
		b.snapshotter = "native"
	}
	n, err := pickNetwork(claimDir, b.Dir, networkInUse)
	if err != nil {
		return err
	}
	b.network, b.Bridge, b.Subnet = n, n.Bridge, n.Subnet
	if err := b.saveState(); err != nil {
		return err
	}
	conflist, err := cniConflist(n, b.path("cni", "ipam"))
	if err != nil {
		return err
	}
	if err := os.WriteFile(b.path("cni", "net.d", "10-berth-testbed.conflist"), conflist, 0o644); err != nil {
		return fmt.Errorf("write CNI config: %w", err)
	}
	// The registry's address goes into CRI-O's config, read at start.
	var registryPort int
	if opts.Registry {
		if registryPort, err = freePort(); err != nil {
			return err
		}
	}
	cfg, err := b.runtimeConfig(registryPort)
	if err != nil {
		return err
	}
	if err := os.WriteFile(b.configPath(), cfg, 0o644); err != nil {
		return fmt.Errorf("write runtime config: %w", err)
	}
	if b.conn, err = dial(b.Endpoint); err != nil {
		return err
	}

	// The registry is independent of the runtime: bring it up meanwhile.
	registryDone := make(chan error, 1)
	if opts.Registry {
		go func() { registryDone <- b.startRegistry(archive, registryPort) }()
	} else {
		registryDone <- nil
	}
	err = b.StartContainerd()
	if err == nil {
		err = b.importImages(archive)
	}
	if rerr := <-registryDone; rerr != nil {
		err = errors.Join(err, rerr)
	}
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	v, err := b.Runtime().Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		return fmt.Errorf("runtime version: %w", err)
	}
	b.ContainerdVersion = v.GetRuntimeVersion()
	return b.saveState()
}

// runtimeConfig renders the runtime's config file; a CRI-O bed also gets
// its signature policy written. registryPort is the local registry's, or 0.
func (b *Bed) runtimeConfig(registryPort int) ([]byte, error) {
	if b.version.CRIO {
		if err := os.WriteFile(b.path("policy.json"), []byte(crioPolicy), 0o644); err != nil {
			return nil, fmt.Errorf("write signature policy: %w", err)
		}
		// Not the machine's: short names ("busybox:1.36") resolve on
		// docker.io as containerd's do (CRI-O's packages ship the same
		// search list), no mirrors.
		if err := os.WriteFile(b.path("registries.conf"), []byte(crioRegistries), 0o644); err != nil {
			return nil, fmt.Errorf("write registries.conf: %w", err)
		}
		if err := os.MkdirAll(b.path("registries.conf.d"), 0o755); err != nil {
			return nil, fmt.Errorf("create registries.conf.d: %w", err)
		}
		c := b.crioConfig()
		if registryPort != 0 {
			c.Registry = "127.0.0.1:" + strconv.Itoa(registryPort)
		}
		return c.render()
	}
	return containerdConfig{
		Root:        b.path("root"),
		State:       b.path("state"),
		Socket:      b.Socket,
		RuncRoot:    b.path("runc"),
		OptDir:      b.path("opt"),
		CNIConfDir:  b.path("cni", "net.d"),
		CNIBinDir:   cniBinDir,
		RegistryDir: b.path("certs.d"),
		Snapshotter: b.snapshotter,
		SandboxImg:  PauseRef,
		Version:     b.version.configVersion(),
		DisableNRI:  b.version.hasNRI(),
	}.render()
}

// crioConfig is a CRI-O bed's config: everything in the bed's Dir.
func (b *Bed) crioConfig() crioConfig {
	return crioConfig{
		Root:       b.path("storage", "root"),
		RunRoot:    b.path("storage", "run"),
		Driver:     b.snapshotter,
		Dir:        b.Dir,
		Socket:     b.Socket,
		BinDir:     b.version.BinDir,
		RuncRoot:   b.path("runc"),
		CNIConfDir: b.path("cni", "net.d"),
		CNIBinDir:  cniBinDir,
		PauseImage: PauseRef,
		Policy:     b.path("policy.json"),
	}
}

// path joins elem below the bed's Dir.
func (b *Bed) path(elem ...string) string {
	return filepath.Join(append([]string{b.Dir}, elem...)...)
}

// configPath is containerd's config.toml or CRI-O's crio.conf; it also
// identifies the bed's runtime process by its command line.
func (b *Bed) configPath() string {
	if b.version.CRIO {
		return b.path("crio.conf")
	}
	return b.path("containerd.toml")
}

// StartContainerd starts containerd on the bed's dirs and socket (again,
// after StopContainerd) and waits until CRI answers and reports the runtime
// and the network ready. Starting a running containerd is a no-op.
func (b *Bed) StartContainerd() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return errors.New("test bed is closed")
	}
	return b.startContainerdLocked()
}

// startContainerdLocked is StartContainerd with b.mu held.
func (b *Bed) startContainerdLocked() error {
	if b.containerd.alive() {
		return nil
	}
	name, args := b.version.bin("containerd"), []string{"--config", b.configPath()}
	if b.version.CRIO {
		// Flags for what crio.conf cannot say; --config stays last, the
		// process's marker.
		name, args = b.version.bin("crio"), []string{"--registries-conf", b.path("registries.conf"), "--registries-conf-dir", b.path("registries.conf.d"), "--config", b.configPath()}
	}
	p, err := startProcess(b.path("containerd.log"), b.version.env(), name, args...)
	if err != nil {
		return fmt.Errorf("start containerd: %w", err)
	}
	b.containerd = p
	if err := b.saveStateLocked(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := b.waitReady(ctx, p); err != nil {
		return fmt.Errorf("containerd did not become ready: %w\ncontainerd.log:\n%s", err, tail(b.path("containerd.log"), 40))
	}
	return nil
}

// waitReady polls CRI's Status until the runtime and the network are
// ready, failing early if containerd exits.
func (b *Bed) waitReady(ctx context.Context, p *process) error {
	rt := runtimeapi.NewRuntimeServiceClient(b.conn)
	var last error
	for {
		if !p.alive() {
			return errors.New("containerd exited")
		}
		callCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := rt.Status(callCtx, &runtimeapi.StatusRequest{})
		cancel()
		if err == nil {
			last = nil
			for _, c := range resp.GetStatus().GetConditions() {
				if !c.Status {
					last = fmt.Errorf("condition %s false: %s: %s", c.Type, c.Reason, c.Message)
				}
			}
			if last == nil {
				return nil
			}
		} else {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), last)
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// StopContainerd kills containerd alone (SIGTERM, SIGKILL after 10s), the
// way a runtime outage looks: running pods' shims and containers stay.
// Stopping a stopped containerd is a no-op.
func (b *Bed) StopContainerd() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.stopContainerdLocked()
}

// stopContainerdLocked is StopContainerd with b.mu held.
func (b *Bed) stopContainerdLocked() error {
	if err := b.containerd.stop(10 * time.Second); err != nil {
		return fmt.Errorf("stop containerd: %w", err)
	}
	return nil
}

// KillContainerd SIGKILLs containerd alone, as a crash or the OOM killer
// would: whatever it was doing is cut short, with no cleanup of its own.
// Running pods' shims and containers stay. StartContainerd brings it back;
// killing a stopped containerd is a no-op.
func (b *Bed) KillContainerd() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.containerd.kill(); err != nil {
		return fmt.Errorf("kill containerd: %w", err)
	}
	return nil
}

// importImages imports the busybox and pause images of archive into the
// runtime and waits until CRI sees both.
func (b *Bed) importImages(archive string) error {
	if err := b.importArchive(archive, BusyboxRef, PauseRef); err != nil {
		return fmt.Errorf("import test images: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, ref := range []string{BusyboxRef, PauseRef} {
		if err := b.waitImage(ctx, ref); err != nil {
			return err
		}
	}
	return nil
}

// importArchive imports the images refs of an OCI layout archive:
// containerd's with ctr into the k8s.io namespace, unpacked for the CRI
// snapshotter; CRI-O's with skopeo into its containers/storage (CRI-O has
// no import of its own), each selected by its tag.
func (b *Bed) importArchive(archive string, refs ...string) error {
	if !b.version.CRIO {
		if out, err := b.Ctr("images", "import", "--snapshotter", b.snapshotter, archive); err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}
	c := b.crioConfig()
	for _, ref := range refs {
		tag := ref[strings.LastIndex(ref, ":")+1:]
		cmd := exec.Command("skopeo", "--insecure-policy", "copy", "--quiet", "oci-archive:"+archive+":"+tag, c.storageRef(ref))
		cmd.Env = append(os.Environ(), "TMPDIR="+b.path("tmp"))
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("skopeo copy %s: %w: %s", ref, err, out)
		}
	}
	return nil
}

// Runtime returns a CRI runtime client on the bed's socket. It stays usable
// across StopContainerd/StartContainerd.
func (b *Bed) Runtime() runtimeapi.RuntimeServiceClient {
	return runtimeapi.NewRuntimeServiceClient(b.conn)
}

// Images returns a CRI image client on the bed's socket. It stays usable
// across StopContainerd/StartContainerd.
func (b *Bed) Images() runtimeapi.ImageServiceClient {
	return runtimeapi.NewImageServiceClient(b.conn)
}

// Ctr runs `ctr --address SOCKET -n k8s.io ARGS...` and returns its
// combined output.
func (b *Bed) Ctr(args ...string) ([]byte, error) {
	if b.version.CRIO {
		return nil, fmt.Errorf("ctr %v: the bed runs CRI-O, not containerd", args)
	}
	cmd := exec.Command(b.version.bin("ctr"), append([]string{"--address", b.Socket, "-n", "k8s.io"}, args...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+b.path("tmp"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("ctr %v: %w", args, err)
	}
	return out, nil
}

// ContainerdAtLeast reports whether the bed's containerd is release
// major.minor or newer, for tests asserting what differs between versions.
func (b *Bed) ContainerdAtLeast(major, minor int) bool {
	release := b.version.Release
	if release == "" {
		release = "1.6.0" // Debian's package
	}
	var maj, min int
	if _, err := fmt.Sscanf(release, "%d.%d", &maj, &min); err != nil {
		return false
	}
	return maj > major || maj == major && min >= minor
}

// ContainerdName is the containerd version the bed was asked to run:
// "1.6", "1.7", "2.1", "2.3", "2.4" or an exact release.
func (b *Bed) ContainerdName() string { return b.version.Name }

// cacheDir is where built image archives and containerd binaries are kept
// between runs:
// $BERTH_TESTBED_CACHE, else the user's cache dir.
func cacheDir() string {
	if d := os.Getenv("BERTH_TESTBED_CACHE"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "berth-testbed")
	}
	return filepath.Join(os.TempDir(), "berth-testbed-cache")
}

// Main runs a test package's tests against one bed started with opts,
// stored in *bed before the first test runs, and closes the bed after the
// last; it returns the exit code for os.Exit. A bed that fails to start or
// to close fails the run.
func Main(m *testing.M, opts Options, bed **Bed) int {
	b, err := Start(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "start test bed: %v\n", err)
		return 1
	}
	*bed = b
	code := m.Run()
	if err := b.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "close test bed: %v\n", err)
		code = 1
	}
	return code
}
