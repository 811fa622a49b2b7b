//go:build e2e

package doctor

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/e2e/testbed"
)

// TestE2EDoctor runs every check with the pod-network smoke sandbox
// against the real containerd of the test bed: the runtime line names
// its real name and version, the CNI configuration the runtime reports is
// found and loads, the pause image is there, the sandbox gets an address
// of the bed's subnet, and no sandbox of doctor's is left afterwards.
func TestE2EDoctor(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	results := Run(ctx, Options{
		RuntimeEndpoint: testBed.Endpoint,
		ManifestDir:     t.TempDir(),
		RootDir:         t.TempDir(),
		PodLogsDir:      t.TempDir(),
		PauseImage:      testBed.PauseImage, // containerd 2 does not report its own
		Run:             true,
	})
	byCheck := map[string]Result{}
	for _, r := range results {
		byCheck[r.Check] = r
		t.Logf("%-4s %-14s %s", r.Status, r.Check, r.Message)
	}
	v, err := testBed.Runtime().Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	checkResult(t, byCheck["runtime"], OK, v.GetRuntimeName()+" "+v.GetRuntimeVersion()+" (CRI v1) at "+testBed.Endpoint+" is ready")
	checkResult(t, byCheck["cni"], OK, `network "berth-testbed-`)
	checkResult(t, byCheck["pause-image"], OK, testBed.PauseImage+" is present")
	if testBed.ContainerdAtLeast(1, 7) {
		checkResult(t, byCheck["runtime-events"], OK, "streams container events")
	} else {
		checkResult(t, byCheck["runtime-events"], Warn, "streams no container events")
	}
	checkResult(t, byCheck["image-fs"], byCheck["image-fs"].Status, testBed.Dir)
	smoke := byCheck["pod-network"]
	checkResult(t, smoke, OK, "on the pod network", "and was removed")
	_, after, _ := strings.Cut(smoke.Message, "got IP ")
	ip, _, _ := strings.Cut(after, " ")
	if addr, err := netip.ParseAddr(ip); err != nil || !netip.MustParsePrefix(testBed.Subnet).Contains(addr) {
		t.Errorf("smoke sandbox address %q (%v) is not in the bed's subnet %s", ip, err, testBed.Subnet)
	}
	left, err := testBed.Runtime().ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range left.GetItems() {
		if _, ok := sb.GetLabels()[LabelDoctor]; ok {
			t.Errorf("doctor's sandbox %s (%s) is left on the runtime", sb.GetId(), sb.GetMetadata().GetName())
		}
	}
}

// TestE2ECgroupDriver: the runtime's own answer to CRI RuntimeConfig is
// the driver doctor reports where the runtime has the call (containerd
// 2.x, CRI-O), and containerd's configuration where it answers
// Unimplemented (1.6, 1.7). The bed runs the cgroupfs driver either way
// (runc options without SystemdCgroup; CRI-O's cgroup_manager), so both
// paths must come to "cgroupfs".
func TestE2ECgroupDriver(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	resp, err := testBed.Runtime().RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
	reports := testBed.ContainerdAtLeast(2, 0) || testBed.ContainerdName() == testbed.RuntimeCRIO
	switch {
	case reports && err != nil:
		t.Fatalf("%s: RuntimeConfig: %v, want the cgroup driver", testBed.ContainerdVersion, err)
	case reports && resp.GetLinux().GetCgroupDriver() != runtimeapi.CgroupDriver_CGROUPFS:
		t.Fatalf("%s: RuntimeConfig reports %v, want %v", testBed.ContainerdVersion, resp.GetLinux(), runtimeapi.CgroupDriver_CGROUPFS)
	case !reports && status.Code(err) != codes.Unimplemented:
		t.Fatalf("%s: RuntimeConfig: %v (%v), want Unimplemented", testBed.ContainerdVersion, resp, err)
	}
	results := Run(ctx, Options{
		RuntimeEndpoint: testBed.Endpoint,
		ManifestDir:     t.TempDir(),
		RootDir:         t.TempDir(),
		PodLogsDir:      t.TempDir(),
		PauseImage:      testBed.PauseImage,
	})
	for _, r := range results {
		if r.Check == "cgroups" {
			// The status depends on the machine's cgroup version and init.
			checkResult(t, r, r.Status, "cgroupfs")
			return
		}
	}
	t.Fatalf("no cgroups check in %+v", results)
}

// TestE2EFindOtherAgents finds a real process on the real /proc: one
// whose command line is a kubelet's with --pod-manifest-path set to the
// directory, given relative to its working directory through a symbolic
// link, is found by its PID; the same directory asked through another
// path is the same directory.
func TestE2EFindOtherAgents(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "manifests")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, filepath.Join(base, "link")); err != nil {
		t.Fatal(err)
	}
	// sh, named kubelet, waits on its stdin; the flag is its $0, which
	// only the command line shows.
	cmd := exec.Command("/bin/sh", "-c", "read _; exit 0", "--pod-manifest-path=link")
	cmd.Args[0] = "kubelet"
	cmd.Dir = base
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("the fake kubelet: %v", err)
		}
	})
	agents, err := FindOtherAgents("/proc", dir+"/")
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range agents {
		found = found || a.PID == cmd.Process.Pid && a.Kind == "kubelet" && a.ManifestPath == "link"
	}
	if !found {
		t.Errorf("PID %d not among %+v", cmd.Process.Pid, agents)
	}
	r := checkOtherAgents("/proc", dir, 0)
	checkResult(t, r, Fail, "kubelet (PID "+strconv.Itoa(cmd.Process.Pid)+") runs the static pods of link")
}
