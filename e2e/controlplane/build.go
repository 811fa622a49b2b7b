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
	stagingVersion    = "v0.37.2"
	EtcdVersion       = "v3.7.3"
)

// buildEnv is the environment of the builds: outside berth's module and
// workspace, with the go command's defaults otherwise, so the packages a
// developer's go build cache holds are reused.
func buildEnv() []string {
	return append(os.Environ(), "GOFLAGS=-buildvcs=false -mod=mod", "GOWORK=off", "GO111MODULE=on")
}

// apiServerBinary returns kube-apiserver of KubernetesVersion, built once
// into the test beds' cache. k8s.io/kubernetes cannot be built as a
// dependency as it stands: its go.mod replaces every k8s.io staging module
// with a directory of its own repository. The build is a scratch module
// requiring it, with a replace line pinning each of those staging modules
// to its published release (stagingVersion), as the kubernetes repository
// publishes them.
func apiServerBinary() (string, error) {
	dir := filepath.Join(testbed.CacheDir(), "kube-apiserver-"+KubernetesVersion)
	err := testbed.BuildLocked(dir, []string{"kube-apiserver"}, func(out string) error {
		src, err := testbed.DownloadModule("k8s.io/kubernetes", KubernetesVersion)
		if err != nil {
			return err
		}
		gomod, err := os.ReadFile(filepath.Join(src, "go.mod"))
		if err != nil {
			return fmt.Errorf("read the kubernetes go.mod: %w", err)
		}
		staging := stagingModules(gomod)
		if len(staging) == 0 {
			return fmt.Errorf("the kubernetes go.mod of %s replaces no staging module", KubernetesVersion)
		}
		var b strings.Builder
		fmt.Fprintf(&b, "module berth.test/k8sbuild\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n", KubernetesVersion)
		for _, m := range staging {
			fmt.Fprintf(&b, "\t%s => %s %s\n", m, m, stagingVersion)
		}
		b.WriteString(")\n")
		return buildFromScratchModule(out, "k8s-build", b.String(), "k8s.io/kubernetes/cmd/kube-apiserver", "kube-apiserver")
	})
	return filepath.Join(dir, "kube-apiserver"), err
}

// etcdBinary returns etcd of EtcdVersion, built once into the cache from
// the main package at the root of go.etcd.io/etcd/server/v3.
func etcdBinary() (string, error) {
	dir := filepath.Join(testbed.CacheDir(), "etcd-"+EtcdVersion)
	err := testbed.BuildLocked(dir, []string{"etcd"}, func(out string) error {
		gomod := fmt.Sprintf("module berth.test/etcdbuild\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n", EtcdVersion)
		return buildFromScratchModule(out, "etcd-build", gomod, "go.etcd.io/etcd/server/v3", "etcd")
	})
	return filepath.Join(dir, "etcd"), err
}

// buildFromScratchModule builds pkg into out/binary from a scratch module
// (name under the cache) with gomod, its requirements resolved by `go mod
// tidy` over a tools file importing pkg.
func buildFromScratchModule(out, name, gomod, pkg, binary string) error {
	mod := filepath.Join(testbed.CacheDir(), name)
	if err := os.MkdirAll(mod, 0o755); err != nil {
		return err
	}
	tools := fmt.Sprintf("//go:build tools\n\npackage tools\n\nimport _ %q\n", pkg)
	if err := os.WriteFile(filepath.Join(mod, "go.mod"), []byte(gomod), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(mod, "tools.go"), []byte(tools), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"mod", "tidy"},
		{"build", "-ldflags", "-s -w", "-o", filepath.Join(out, binary), pkg},
	} {
		cmd := exec.Command("go", args...)
		cmd.Dir = mod
		cmd.Env = buildEnv()
		if b, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("build %s: go %s: %w\n%s", binary, strings.Join(args, " "), err, b)
		}
	}
	return nil
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
