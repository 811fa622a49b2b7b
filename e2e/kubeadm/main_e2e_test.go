//go:build e2e

// Package kubeadm runs kubeadm's flows on berth, end to end: `kubeadm
// init` with berth as the node agent (its control-plane static pods run by
// berth on a real containerd test bed, their mirror pods in the API
// server), static pod edits and removals, an API server stopped and
// started again, berth killed, a second node joining with `kubeadm join`
// through TLS bootstrap, and a control plane of the release before
// upgraded with `kubeadm upgrade apply`. kubeadm, kubectl and the
// control-plane programs are built from their Go modules
// (e2e/controlplane), the control-plane images from those binaries,
// imported into the bed.
//
// kubeadm writes fixed paths (/etc/kubernetes, /var/lib/kubelet) and the
// pods mount them from the host: the test binary runs itself again in a
// private mount namespace (inNamespaceEnv) with the run's own directories
// bound over those two, and starts the bed's containerd from there, so
// kubeadm, berth and runc (which resolves hostPath volumes in containerd's
// namespace) all see the private ones: whatever the machine holds there
// (a kubelet's, a developer's cluster) is neither read nor changed. Only
// an empty mountpoint is created when one is missing, and removed after.
// The control plane's host ports (6443, 2379-2381, 10257, 10259, 10248)
// cannot be made private without a network namespace of the bed's own, so
// the package runs once per `make e2e-all` (E2E_KUBEADM), not once per
// containerd version, holds an exclusive lock (lockFile) for the whole run
// so that runs on one machine wait for each other, and fails, naming the
// port, when one is taken by anyone else. Its tests run one after the
// other, each on a cluster of its own (initCluster: its own bed, its own
// directories bound over the private ones), which it resets with `kubeadm
// reset` and takes down when it ends, so that the next starts clean.
//
// Run: go test -race -count=1 -tags e2e -timeout 60m ./e2e/kubeadm/
package kubeadm

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-agent/berth/e2e/controlplane"
	"github.com/berth-agent/berth/e2e/testbed"
)

// lockFile serializes the runs of this package on the machine.
const lockFile = "/run/berth-e2e-kubeadm.lock"

// privateDirs are the host paths kubeadm writes; the run binds
// directories of its own over them.
var privateDirs = []string{"/etc/kubernetes", "/var/lib/kubelet"}

const kubernetesDir = "/etc/kubernetes"

// inNamespaceEnv is set in the environment of the test binary run again
// in its private mount namespace.
const inNamespaceEnv = "BERTH_E2E_KUBEADM_IN_NAMESPACE"

// hostPorts are the ports kubeadm's control plane and the kubelet check
// listen on, on the host network.
var hostPorts = []int{6443, 2379, 2380, 2381, 10257, 10259, 10248}

var (
	berthBin string
	// etcdBin is etcd for the control-plane image, of every release.
	etcdBin string
	// work is the run's private directory; each test's cluster has its own
	// directory in it (cluster.dir).
	work string
	// utilsDir holds the machine's programs kubeadm runs from its PATH
	// (pathUtils), and no other (see toolEnv).
	utilsDir string
)

// pathUtils are the programs kubeadm runs from its PATH: cp backs up
// etcd's data in `kubeadm upgrade apply`.
var pathUtils = []string{"cp"}

// Image references in kubeadm's naming: ClusterConfiguration's
// imageRepository, then the component and its tag.
const imageRepository = "registry.berth.test"

func TestMain(m *testing.M) {
	if os.Getenv(inNamespaceEnv) == "" {
		os.Exit(inNamespace())
	}
	os.Exit(run(m))
}

// inNamespace takes lockFile, then runs the test binary again, with its
// arguments, in a new mount namespace (Go makes its mounts private:
// nothing propagates to the host), after creating the missing mountpoints
// of privateDirs, which it removes once the run has ended.
func inNamespace() int {
	// The lock first: a run that ends removes the mountpoints it created,
	// which a run waiting for it must not have found there.
	unlock, err := lockMachine()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e/kubeadm:", err)
		return 1
	}
	defer unlock()
	var created []string
	for _, d := range privateDirs {
		if _, err := os.Stat(d); errors.Is(err, fs.ErrNotExist) {
			if err := os.MkdirAll(d, 0o755); err != nil {
				fmt.Fprintln(os.Stderr, "e2e/kubeadm: create the mountpoint", d+":", err)
				return 1
			}
			created = append(created, d)
		}
	}
	defer func() {
		for _, d := range created {
			if err := os.Remove(d); err != nil {
				fmt.Fprintln(os.Stderr, "e2e/kubeadm: remove the mountpoint", d+":", err)
			}
		}
	}()
	cmd := exec.Command("/proc/self/exe", os.Args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), inNamespaceEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() > 0 {
			return exit.ExitCode()
		}
		fmt.Fprintln(os.Stderr, "e2e/kubeadm: run in a private mount namespace:", err)
		return 1
	}
	return 0
}

func run(m *testing.M) int {
	var err error
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "e2e/kubeadm:", err)
		return 1
	}

	if work, err = os.MkdirTemp("", "berth-e2e-kubeadm-"); err != nil {
		return fail(err)
	}
	defer os.RemoveAll(work)

	started := time.Now()
	berthBin = filepath.Join(work, "berth")
	cmd := exec.Command("go", "build", "-tags", "grpcnotrace", "-o", berthBin, "./cmd/berth")
	cmd.Dir = "../.." // the module root: this package is e2e/kubeadm
	if out, err := cmd.CombinedOutput(); err != nil {
		return fail(fmt.Errorf("build berth: %w\n%s", err, out))
	}
	fmt.Fprintf(os.Stderr, "e2e/kubeadm: built berth in %s\n", time.Since(started).Round(time.Millisecond))

	utilsDir = filepath.Join(work, "utils")
	if err := os.Mkdir(utilsDir, 0o755); err != nil {
		return fail(err)
	}
	for _, u := range pathUtils {
		path, err := exec.LookPath(u)
		if err != nil {
			return fail(err)
		}
		if err := os.Symlink(path, filepath.Join(utilsDir, u)); err != nil {
			return fail(err)
		}
	}

	started = time.Now()
	if etcdBin, err = controlplane.StaticEtcd(); err != nil {
		return fail(err)
	}
	fmt.Fprintf(os.Stderr, "e2e/kubeadm: etcd %s ready in %s\n", controlplane.EtcdVersion, time.Since(started).Round(time.Millisecond))
	return m.Run()
}

// lockMachine takes lockFile, waiting for another run to finish.
func lockMachine() (func(), error) {
	f, err := os.OpenFile(lockFile, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", lockFile, err)
	}
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		fmt.Fprintf(os.Stderr, "e2e/kubeadm: another run holds %s: waiting for it\n", lockFile)
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", lockFile, err)
	}
	return func() { f.Close() }, nil
}

// claimHost binds directories of the test's own (under dir) over
// privateDirs, in the private mount namespace, until t ends, and checks
// that the host ports are free: each test's cluster starts from empty
// ones.
func claimHost(t *testing.T, dir string) {
	t.Helper()
	for _, d := range privateDirs {
		src := filepath.Join(dir, "host", d)
		if err := os.MkdirAll(src, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount(src, d, "", unix.MS_BIND, ""); err != nil {
			t.Fatalf("bind %s over %s: %v", src, d, err)
		}
		t.Cleanup(func() {
			if err := unix.Unmount(d, 0); err != nil {
				t.Errorf("unmount %s: %v", d, err)
			}
		})
	}
	for _, port := range hostPorts {
		l, err := net.Listen("tcp", fmt.Sprintf(":%d", port))
		if err != nil {
			t.Fatalf("port %d, which kubeadm's control plane needs on the host network, is taken: %v", port, err)
		}
		l.Close()
	}
}

// reset runs `kubeadm reset -f` against the cluster's bed, as an operator
// ends a kubeadm node: it removes the control plane's containers and the
// files kubeadm wrote (in the test's private directories), so that the
// ports are free for the next test.
func (c *cluster) reset(t *testing.T) {
	cmd := exec.Command(filepath.Join(c.bin, "kubeadm"), "reset", "-f", "--cri-socket", c.bed.Endpoint)
	cmd.Env = toolEnv(c.bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("kubeadm reset: %v\n%s", err, out)
	}
}

// imageArchives builds (once, cached) the OCI archives of the
// control-plane images kubeadm's manifests name for version, each holding
// its binary, and returns them by reference.
func imageArchives(version, k8sBin, etcdBin string) (map[string]string, error) {
	bins := map[string]string{
		"kube-apiserver":          filepath.Join(k8sBin, "kube-apiserver"),
		"kube-controller-manager": filepath.Join(k8sBin, "kube-controller-manager"),
		"kube-scheduler":          filepath.Join(k8sBin, "kube-scheduler"),
		"etcd":                    etcdBin,
	}
	// Named after the binaries' directory: images of other builds of
	// version are not theirs.
	dir := filepath.Join(testbed.CacheDir(), "kubeadm-images-"+filepath.Base(k8sBin)+"-etcd-"+controlplane.EtcdVersion)
	var names []string
	for name := range bins {
		names = append(names, name+".tar")
	}
	err := testbed.BuildLocked(dir, names, func(out string) error {
		for name, bin := range bins {
			if err := testbed.BinaryImageArchive(filepath.Join(out, name+".tar"), imageRef(name, version), []string{bin}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	refs := map[string]string{}
	for name := range bins {
		refs[imageRef(name, version)] = filepath.Join(dir, name+".tar")
	}
	return refs, nil
}

// imageRef is the image kubeadm's manifest names for a component: etcd's
// tag is the etcd version (ClusterConfiguration etcd.local.imageTag), the
// others' the Kubernetes version.
func imageRef(name, version string) string {
	if name == "etcd" {
		return imageRepository + "/etcd:" + controlplane.EtcdVersion
	}
	return imageRepository + "/" + name + ":" + version
}
