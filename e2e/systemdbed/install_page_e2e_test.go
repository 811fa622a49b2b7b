//go:build e2e

package systemdbed

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/berth-agent/berth/internal/docscheck"
)

// bedConflist is the CNI configuration the bed gives the machine for the
// other tests; TestInstallPage sets it aside, so that the page's own
// configuration is the only one the runtime sees.
const bedConflist = "/etc/cni/net.d/10-systemdbed.conflist"

// TestInstallPage follows docs/install.md on the freshly booted Debian: it
// runs the commands the page marks with <!-- test: install -->, read from
// the page, as root in /root, where the release's files are (what the
// page downloads). They verify the release's signature and checksums,
// install the runtime and its CNI plugins, write the CNI
// configuration, install berth and drop the example pod that uses the pod
// network and a host port; the pod must run on the page's network. The
// machine is offline, so apt-get finds the runtime's packages already
// installed (debootstrap put them there); the bed's containerd settings
// that only this machine needs (the offline pause image, no
// CAP_SYS_RESOURCE) stay. Afterwards the pod is removed, berth purged and
// the bed's CNI configuration put back, for the tests that follow.
func TestInstallPage(t *testing.T) {
	needBed(t)
	blocks, err := docscheck.PageBlocks("../../docs/install.md", "install")
	if err != nil {
		t.Fatal(err)
	}
	conflist, err := os.ReadFile(filepath.Join(bed.Root, bedConflist))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(bed.Root, bedConflist)); err != nil {
		t.Fatal(err)
	}
	// What the page downloads: the release's SHA256SUMS, its signature and
	// this architecture's .deb, and the allowed signers file (here of the
	// throwaway key that signed this release).
	files, err := filepath.Glob(filepath.Join(releaseDir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range append(files, releaseSigners) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := bed.WriteFile("/root/"+filepath.Base(f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		sh(t, "rm -f "+manifestDir+"/web-hostport.yaml")
		waitFor(t, "the page's pod to be gone", 90*time.Second, func() (bool, string) {
			m := running(t)
			return len(m) == 0, describe(m)
		})
		sh(t, "apt-get purge -y -q berth && rm -rf /root/berth_* /root/SHA256SUMS* /root/berth-release-signers /etc/cni/net.d/10-berth.conflist")
		if err := bed.WriteFile(bedConflist, conflist, 0o644); err != nil {
			t.Fatal(err)
		}
		sh(t, "systemctl restart containerd")
	})
	for _, b := range blocks {
		out := sh(t, "set -e\ncd /root\n"+b.Text)
		t.Logf("docs/install.md:%d:\n%s", b.Line, tail(out, 6))
	}
	pod := "web-pod-" + Machine
	var ip string
	waitFor(t, pod+" Running on the page's pod network", 120*time.Second, func() (bool, string) {
		out := sh(t, "berth pods -o wide")
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			// NAME READY STATUS RESTARTS AGE SOURCE IP NODE MANIFEST
			if len(f) > 6 && f[0] == pod && f[2] == "Running" {
				ip = f[6]
				return strings.HasPrefix(ip, "10.88."), out
			}
		}
		return false, out
	})
	if out := sh(t, "cat /etc/cni/net.d/*.conflist"); !strings.Contains(out, `"name": "berth"`) {
		t.Errorf("the pod ran without the page's CNI configuration:\n%s", out)
	}
	t.Logf("%s runs at %s", pod, ip)
	// The host port reaches it through the page's portmap plugin.
	out, err := getInMachine(bed.PID1(), "127.0.0.1:18081")
	if err != nil || !strings.Contains(out, "hello from pod") {
		t.Errorf("the pod's host port 18081 answered %q (%v)", out, err)
	}
}

// getInMachine sends GET / to addr from inside the machine's network
// namespace and returns the answer: the socket is made on a thread moved
// into that namespace, which ends with the goroutine (it is never
// unlocked), so no other goroutine runs there.
func getInMachine(pid int, addr string) (string, error) {
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		ns, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/net")
		if err != nil {
			done <- result{err: err}
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("enter the machine's network: %w", err)}
			return
		}
		conn, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			done <- result{err: err}
			return
		}
		defer conn.Close()
		if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
			done <- result{err: err}
			return
		}
		if _, err := io.WriteString(conn, "GET / HTTP/1.0\r\nHost: "+addr+"\r\n\r\n"); err != nil {
			done <- result{err: err}
			return
		}
		out, err := io.ReadAll(conn)
		done <- result{string(out), err}
	}()
	r := <-done
	return r.out, r.err
}
