//go:build e2e

// Package e2e runs the real berth binary against a real, private containerd
// (e2e/testbed): manifests are dropped into real directories, pods are
// checked through CRI and through berth's local API.
//
// Run: go test -race -count=1 -tags e2e -timeout 20m ./e2e/
//
// Environment:
//
//	BERTH_E2E_BINARY     use this berth binary instead of building one
//	BERTH_E2E_OLD_BINARY the berth before the UID key, for the upgrade test
//	                     (default: built from the repository's history)
//	BERTH_E2E_RACE=1     build berth with -race (slower, catches races in berth)
//	BERTH_E2E_LOG_LEVEL  berth's --log-level (default debug)
//	BERTH_CRASH_CYCLES   cycles of TestCrashCycles (default 12)
//	BERTH_CRASH_SEED     replay TestCrashCycles' sequence of changes
package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/berth-agent/berth/e2e/testbed"
)

var (
	// berthBin is the berth binary under test, built by TestMain.
	berthBin string
	// bed is the containerd shared by every test of the package; tests run
	// one after the other and each leaves it without berth-owned pods.
	bed *testbed.Bed
)

func TestMain(m *testing.M) {
	if target := os.Getenv(attackerEnv); target != "" {
		addr, sockets, _ := strings.Cut(target, " ")
		socket, podsAPISocket, _ := strings.Cut(sockets, " ")
		os.Exit(attack(addr, socket, podsAPISocket))
	}
	if target := os.Getenv(spooferEnv); target != "" {
		addr, dest, _ := strings.Cut(target, " ")
		os.Exit(spoof(addr, dest))
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	tmp, err := os.MkdirTemp("", "berth-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(tmp)

	if berthBin = os.Getenv("BERTH_E2E_BINARY"); berthBin == "" {
		berthBin = filepath.Join(tmp, "berth")
		started := time.Now()
		if err := buildBerth(berthBin); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: build berth:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "e2e: built %s in %s\n", berthBin, time.Since(started).Round(time.Millisecond))
	}

	started := time.Now()
	// The registry requires a password: TestImagePullSecrets pulls from
	// it with credentials, and without.
	bed, err = testbed.Start(testbed.Options{Registry: true, RegistryAuth: &testbed.RegistryAuth{User: registryUser, Password: registryPassword}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: start test bed:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "e2e: test bed up in %s: endpoint %s, subnet %s\n", time.Since(started).Round(time.Millisecond), bed.Endpoint, bed.Subnet)
	defer func() {
		if err := bed.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: close test bed:", err)
		}
	}()
	defer closeControlPlane()
	return m.Run()
}

// buildBerth builds ./cmd/berth of this module into out.
func buildBerth(out string) error {
	args := []string{"build", "-tags", "grpcnotrace", "-o", out}
	if os.Getenv("BERTH_E2E_RACE") == "1" {
		args = append(args, "-race")
	}
	args = append(args, "./cmd/berth")
	cmd := exec.Command("go", args...)
	cmd.Dir = ".." // the module root: this package is e2e/
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %v: %w\n%s", args, err, b)
	}
	return nil
}
