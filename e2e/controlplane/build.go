package controlplane

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/berth-agent/berth/e2e/testbed"
)

// The versions of the control plane the tests run, built from their Go
// modules: Kubernetes' release matches the k8s.io/api berth is built
// against, etcd is the one that release is tested with.
const (
	KubernetesVersion = "v1.37.2"
	EtcdVersion       = "v3.7.3"
)

// buildEnv is the environment of the builds: outside berth's module and
// workspace, with the go command's defaults otherwise, so the packages a
// developer's go build cache holds are reused.
func buildEnv() []string {
	return append(os.Environ(), "GOFLAGS=-buildvcs=false -mod=mod", "GOWORK=off", "GO111MODULE=on")
}

// apiServerBinary returns kube-apiserver of KubernetesVersion, built once
// into the test beds' cache (see kubernetesGoMod).
func apiServerBinary() (string, error) {
	dir := filepath.Join(testbed.CacheDir(), "kube-apiserver-"+KubernetesVersion)
	err := testbed.BuildLocked(dir, []string{"kube-apiserver"}, func(out string) error {
		gomod, err := kubernetesGoMod(KubernetesVersion)
		if err != nil {
			return err
		}
		return buildFromScratchModule(out, "k8s-build", gomod, nil, "", "kube-apiserver", "k8s.io/kubernetes/cmd/kube-apiserver")
	})
	return filepath.Join(dir, "kube-apiserver"), err
}

// kubernetesGoMod is the go.mod of a scratch module that builds
// k8s.io/kubernetes at version. k8s.io/kubernetes cannot be built as a
// dependency as it stands: its go.mod replaces every k8s.io staging module
// with a directory of its own repository. The scratch module requires it,
// with a replace line pinning each of those staging modules to its
// published release (v0.MINOR.PATCH of v1.MINOR.PATCH), as the kubernetes
// repository publishes them.
func kubernetesGoMod(version string) (string, error) {
	src, err := testbed.DownloadModule("k8s.io/kubernetes", version)
	if err != nil {
		return "", err
	}
	gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
	if err != nil {
		return "", fmt.Errorf("read the kubernetes go.mod: %w", err)
	}
	staging := stagingModules(gomod)
	if len(staging) == 0 {
		return "", fmt.Errorf("the kubernetes go.mod of %s replaces no staging module", version)
	}
	stagingVersion := "v0" + strings.TrimPrefix(version, "v1")
	var b strings.Builder
	fmt.Fprintf(&b, "module berth.test/k8sbuild\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n", version)
	for _, m := range staging {
		fmt.Fprintf(&b, "\t%s => %s %s\n", m, m, stagingVersion)
	}
	b.WriteString(")\n")
	return b.String(), nil
}

// KubeadmBinaries are the programs of kubeadm's flows, in the directory
// StaticKubernetes returns.
var KubeadmBinaries = []string{"kubeadm", "kubectl", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// StaticKubernetes returns a directory of KubeadmBinaries of Kubernetes
// version, built once into the test beds' cache with cgo off: statically
// linked, they run in images that hold nothing else. They are stamped with
// version (versionLDFlags), as Kubernetes' release builds are: kubeadm
// upgrade reads the cluster's version from the API server's /version and
// compares it with its own.
func StaticKubernetes(version string) (string, error) {
	dir := filepath.Join(testbed.CacheDir(), "kubernetes-static-stamped-"+version)
	err := testbed.BuildLocked(dir, KubeadmBinaries, func(out string) error {
		gomod, err := kubernetesGoMod(version)
		if err != nil {
			return err
		}
		pkgs := make([]string, len(KubeadmBinaries))
		for i, b := range KubeadmBinaries {
			pkgs[i] = "k8s.io/kubernetes/cmd/" + b
		}
		return buildFromScratchModule(out, "k8s-static-build-"+version, gomod, []string{"CGO_ENABLED=0"}, versionLDFlags(version), "", pkgs...)
	})
	return dir, err
}

// StaticEtcd returns etcd of EtcdVersion built with cgo off, for an image
// (see StaticKubernetes).
func StaticEtcd() (string, error) {
	dir := filepath.Join(testbed.CacheDir(), "etcd-static-"+EtcdVersion)
	err := testbed.BuildLocked(dir, []string{"etcd"}, func(out string) error {
		return buildFromScratchModule(out, "etcd-static-build", etcdGoMod(), []string{"CGO_ENABLED=0"}, "", "etcd", "go.etcd.io/etcd/server/v3")
	})
	return filepath.Join(dir, "etcd"), err
}

// etcdBinary returns etcd of EtcdVersion, built once into the cache from
// the main package at the root of go.etcd.io/etcd/server/v3.
func etcdBinary() (string, error) {
	dir := filepath.Join(testbed.CacheDir(), "etcd-"+EtcdVersion)
	err := testbed.BuildLocked(dir, []string{"etcd"}, func(out string) error {
		return buildFromScratchModule(out, "etcd-build", etcdGoMod(), nil, "", "etcd", "go.etcd.io/etcd/server/v3")
	})
	return filepath.Join(dir, "etcd"), err
}

func etcdGoMod() string {
	return fmt.Sprintf("module berth.test/etcdbuild\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n", EtcdVersion)
}

// buildFromScratchModule builds the main packages pkgs into out, from a
// scratch module (name under the cache) with gomod, its requirements
// resolved by `go mod tidy` over a tools file importing pkgs; env is added
// to the build's, ldflags to its -ldflags. The binary is out/binary when
// binary is set (one package), else each is named after its package
// path's last element.
func buildFromScratchModule(out, name, gomod string, env []string, ldflags, binary string, pkgs ...string) error {
	mod := filepath.Join(testbed.CacheDir(), name)
	if err := os.MkdirAll(mod, 0o755); err != nil {
		return err
	}
	var tools strings.Builder
	tools.WriteString("//go:build tools\n\npackage tools\n\nimport (\n")
	for _, p := range pkgs {
		fmt.Fprintf(&tools, "\t_ %q\n", p)
	}
	tools.WriteString(")\n")
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte(gomod), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(mod, "tools.go"), []byte(tools.String()), 0o644); err != nil {
		return err
	}
	target := out + "/" // a directory: go build names each binary after its package
	if binary != "" {
		target = filepath.Join(out, binary)
	}
	for _, args := range [][]string{
		{"mod", "tidy"},
		append([]string{"build", "-ldflags", strings.TrimSpace("-s -w " + ldflags), "-o", target}, pkgs...),
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir = mod
		cmd.Env = append(buildEnv(), env...)
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: go %s: %w\n%s", strings.Join(pkgs, " "), strings.Join(args, " "), err, b)
		}
	}
	return nil
}

// versionLDFlags are the linker flags that stamp Kubernetes programs with
// version, as Kubernetes' hack/lib/version.sh does: without them they
// report v0.0.0-master, which kubeadm cannot compare.
func versionLDFlags(version string) string {
	major, minor, _ := strings.Cut(strings.TrimPrefix(version, "v"), ".")
	minor, _, _ = strings.Cut(minor, ".")
	var b strings.Builder
	for _, kv := range [][2]string{{"gitVersion", version}, {"gitMajor", major}, {"gitMinor", minor}, {"gitTreeState", "clean"}} {
		for _, pkg := range []string{"k8s.io/client-go/pkg/version", "k8s.io/component-base/version"} {
			fmt.Fprintf(&b, " -X %s.%s=%s", pkg, kv[0], kv[1])
		}
	}
	return strings.TrimSpace(b.String())
}

// stagingModules lists the modules a kubernetes go.mod replaces with its
// own staging directories.
func stagingModules(gomod []byte) []string {
	var mods []string
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) > 0 && f[0] == "replace" {
			f = f[1:]
		}
		if len(f) == 3 && f[1] == "=>" && strings.HasPrefix(f[2], "./staging/") {
			mods = append(mods, f[0])
		}
	}
	return mods
}
