package testbed

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Where containerd 1.6 and libcni keep things outside the bed's Dir.
const (
	netnsDir       = "/run/netns"           // CRI's network namespaces (/var/run/netns)
	shimSocketDir  = "/run/containerd/s"    // shim sockets, named by a hash of address, namespace and id
	cniResultsDir  = "/var/lib/cni/results" // libcni's cache: <network>-<sandbox id>-<ifname>
	cniNetworksDir = "/var/lib/cni/networks"
)

// criNamespace is the containerd namespace CRI works in.
const criNamespace = "k8s.io"

// Close tears everything of the bed down, even after a failed test or
// with containerd stopped: it removes every sandbox through CRI (starting
// containerd again if needed, so CNI DEL runs and containerd cleans its own
// state), kills containerd, force-deletes leftover containers and kills
// leftover shims, unmounts what is mounted below Dir and the bed's network
// namespaces, deletes the bridge, the IPAM state and the registry, and
// removes Dir. It goes on past errors, reports them all, and is idempotent.
func (b *Bed) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil
	}
	b.closed = true
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}

	netns, err := b.removeSandboxesLocked()
	add(err)
	add(b.stopContainerdLocked())
	inodes, err := b.killShims()
	add(err)
	add(removeNetns(netns, inodes))
	add(UnmountBelow(b.Dir))
	add(b.deleteNetwork())
	add(b.deleteHostPorts())
	if err := b.registry.stop(10 * time.Second); err != nil {
		add(fmt.Errorf("stop registry: %w", err))
	}
	if b.conn != nil {
		add(b.conn.Close())
	}
	if keep := os.Getenv("BERTH_TESTBED_LOGS"); keep != "" {
		add(b.keepLogs(keep))
	}
	if mounts, err := mountsBelow(b.Dir); err != nil || len(mounts) > 0 {
		// Removing files through a mount could reach outside the bed.
		add(fmt.Errorf("keep %s: still mounted below it: %v %v", b.Dir, mounts, err))
	} else if err := os.RemoveAll(b.Dir); err != nil {
		add(fmt.Errorf("remove bed dir: %w", err))
	}
	if b.network.Index != 0 {
		add(releaseNetwork(claimDir, b.Dir, b.network))
	}
	return errors.Join(errs...)
}

// removeSandboxesLocked stops and removes every sandbox (and so every
// container) through CRI, and returns the network namespace paths they
// had, for the leftover sweep. It starts a stopped containerd only when
// CRI has sandboxes on disk: a bed that never ran a pod, or whose setup
// failed, has nothing to remove.
func (b *Bed) removeSandboxesLocked() ([]string, error) {
	if b.conn == nil || (!b.containerd.alive() && !b.hasSandboxes()) {
		return nil, nil
	}
	if err := b.startContainerdLocked(); err != nil {
		return nil, fmt.Errorf("start containerd to remove sandboxes: %w", err)
	}
	// A broken cache entry would fail its sandbox's stop for good.
	var repairErr error
	if _, err := b.RepairCNICache(); err != nil {
		repairErr = fmt.Errorf("repair the CNI cache: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rt := runtimeapi.NewRuntimeServiceClient(b.conn)
	list, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return nil, fmt.Errorf("list sandboxes: %w", err)
	}
	// A few at a time: tests leave tens of pods, and each stop waits on
	// its shim and CNI DEL.
	var (
		mu    sync.Mutex // guards netns and errs
		netns []string
		errs  []error
		wg    sync.WaitGroup
		slots = make(chan struct{}, 8)
	)
	for _, sb := range list.GetItems() {
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			path, err := removeSandbox(ctx, rt, sb.Id)
			mu.Lock()
			defer mu.Unlock()
			if path != "" {
				netns = append(netns, path)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	return netns, errors.Join(append(errs, repairErr)...)
}

// removeSandbox stops and removes one sandbox, returning the network
// namespace path it had ("" if unknown or on the host network).
func removeSandbox(ctx context.Context, rt runtimeapi.RuntimeServiceClient, id string) (string, error) {
	var netns string
	if st, err := rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true}); err == nil {
		netns = netnsPath(st.GetInfo()["info"])
	}
	// A sandbox that vanished since the listing (an agent under test was
	// still removing it) is as good as removed.
	if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil && status.Code(err) != codes.NotFound {
		return netns, fmt.Errorf("stop sandbox %s: %w", id, err)
	}
	if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil && status.Code(err) != codes.NotFound {
		return netns, fmt.Errorf("remove sandbox %s: %w", id, err)
	}
	return netns, nil
}

// hasSandboxes reports whether containerd's CRI plugin keeps any sandbox
// directory in the bed's root or state dir (it removes them with the
// sandbox), or CRI-O's storage any container (a sandbox's infra container
// among them; a host-network sandbox without containers has none, and
// needs no CNI DEL either).
func (b *Bed) hasSandboxes() bool {
	if b.version.CRIO {
		// Infra containers are "volatile" in containers/storage: they
		// have a file of their own beside the others.
		dir := b.path("storage", "root", b.snapshotter+"-containers")
		for _, name := range []string{"containers.json", "volatile-containers.json"} {
			var list []json.RawMessage
			data, err := os.ReadFile(filepath.Join(dir, name))
			if err == nil && json.Unmarshal(data, &list) == nil && len(list) > 0 {
				return true
			}
		}
		return false
	}
	for _, base := range []string{"root", "state"} {
		entries, err := os.ReadDir(b.path(base, "io.containerd.grpc.v1.cri", "sandboxes"))
		if err == nil && len(entries) > 0 {
			return true
		}
	}
	return false
}

// netnsPath extracts the network namespace path from containerd 1.6's
// verbose sandbox info (its OCI runtime spec's network namespace), or ""
// for a host-network sandbox or info of another shape.
func netnsPath(info string) string {
	var v struct {
		RuntimeSpec struct {
			Linux struct {
				Namespaces []struct {
					Type string `json:"type"`
					Path string `json:"path"`
				} `json:"namespaces"`
			} `json:"linux"`
		} `json:"runtimeSpec"`
	}
	if json.Unmarshal([]byte(info), &v) != nil {
		return ""
	}
	for _, ns := range v.RuntimeSpec.Linux.Namespaces {
		if ns.Type == "network" {
			return ns.Path
		}
	}
	return ""
}

// killShims sweeps up after containerd when CRI could not: it force-deletes
// every container left in the bed's runc root (killing its processes and
// removing its cgroups), kills the shims serving the bed's socket and
// whatever still runs below them, and removes their sockets. It returns
// the network namespace inodes ("net:[N]") those processes were in.
func (b *Bed) killShims() (map[string]bool, error) {
	procs, err := listProcs()
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for _, p := range procs {
		children[p.PPID] = append(children[p.PPID], p.PID)
	}
	var shims []procInfo
	var doomed []int
	for _, p := range procs {
		if b.isShim(p.Args) {
			shims = append(shims, p)
			doomed = append(doomed, descendants(children, p.PID)...)
			doomed = append(doomed, p.PID)
		}
	}
	inodes := map[string]bool{}
	for _, pid := range doomed {
		if ns, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/net"); err == nil {
			inodes[ns] = true
		}
	}
	// The host's own network namespace is no leftover.
	if ns, err := os.Readlink("/proc/self/ns/net"); err == nil {
		delete(inodes, ns)
	}

	var errs []error
	runcRoot := filepath.Join(b.path("runc"), criNamespace)
	if b.version.CRIO {
		runcRoot = b.path("runc")
	}
	if entries, err := os.ReadDir(runcRoot); err == nil {
		for _, e := range entries {
			if out, err := exec.Command("runc", "--root", runcRoot, "delete", "--force", e.Name()).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("runc delete %s: %w: %s", e.Name(), err, out))
			}
		}
	}
	for _, pid := range doomed {
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("kill pid %d: %w", pid, err))
		}
	}
	for _, pid := range doomed {
		p := &process{PID: pid, Marker: ""}
		if !p.waitGone(10 * time.Second) {
			errs = append(errs, fmt.Errorf("pid %d survived SIGKILL", pid))
		}
	}
	for _, s := range shims {
		if b.version.CRIO {
			continue // conmon's sockets are below the bed's Dir
		}
		sock := shimSocket(argValue(s.Args, "-address"), argValue(s.Args, "-namespace"), argValue(s.Args, "-id"))
		if err := os.Remove(sock); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove shim socket: %w", err))
		}
	}
	return inodes, errors.Join(errs...)
}

// isShim reports whether a process with args is one of the bed's shims:
// containerd's runc shim serving the bed's socket, or CRI-O's conmon
// writing exit files into the bed's exits dir.
func (b *Bed) isShim(args []string) bool {
	if b.version.CRIO {
		return filepath.Base(args[0]) == "conmon" && argValue(args, "--exit-dir") == b.path("crio", "exits")
	}
	return filepath.Base(args[0]) == "containerd-shim-runc-v2" && argValue(args, "-address") == b.Socket
}

// shimSocket is the path containerd 1.6 gives a shim's socket: a hash of
// containerd's address, the namespace and the shim id, under
// /run/containerd/s.
func shimSocket(address, namespace, id string) string {
	sum := sha256.Sum256([]byte(filepath.Join(address, namespace, id)))
	return filepath.Join(shimSocketDir, hex.EncodeToString(sum[:]))
}

// argValue returns the argument after flag in args, or "".
func argValue(args []string, flag string) string {
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// descendants returns every process below pid in the children map.
func descendants(children map[int][]int, pid int) []int {
	var out []int
	for _, c := range children[pid] {
		out = append(out, descendants(children, c)...)
		out = append(out, c)
	}
	return out
}

// removeNetns unmounts and removes the bed's network namespaces that are
// still there: those at the given paths, and any under /run/netns whose
// namespace is one of inodes.
func removeNetns(paths []string, inodes map[string]bool) error {
	mounts, err := readMountinfo()
	if err != nil {
		return err
	}
	doomed := map[string]bool{}
	for _, p := range paths {
		doomed[filepath.Clean(strings.Replace(p, "/var/run/", "/run/", 1))] = true
	}
	for _, m := range mounts {
		if m.FSType == "nsfs" && filepath.Dir(m.Point) == netnsDir && inodes[m.Root] {
			doomed[m.Point] = true
		}
	}
	var errs []error
	for p := range doomed {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount netns %s: %w", p, err))
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove netns %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// deleteNetwork deletes the bed's bridge and the CNI state kept outside the
// bed (libcni's result cache, and host-local's default dir in case a config
// without our dataDir was ever used).
func (b *Bed) deleteNetwork() error {
	if b.network.Index == 0 {
		return nil
	}
	var errs []error
	if _, err := net.InterfaceByName(b.network.Bridge); err == nil {
		if out, err := exec.Command("ip", "link", "del", b.network.Bridge).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("delete bridge %s: %w: %s", b.network.Bridge, err, out))
		}
	}
	if err := os.RemoveAll(filepath.Join(cniNetworksDir, b.network.Name)); err != nil {
		errs = append(errs, fmt.Errorf("remove IPAM state: %w", err))
	}
	results, _ := filepath.Glob(filepath.Join(cniResultsDir, b.network.Name+"-*"))
	for _, r := range results {
		if err := os.Remove(r); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove CNI result: %w", err))
		}
	}
	return errors.Join(errs...)
}

// hostPortChain is where the portmap plugin hooks each sandbox's DNAT
// chain, with a comment naming the CNI network and the sandbox.
const hostPortChain = "CNI-HOSTPORT-DNAT"

// deleteHostPorts removes the portmap rules of the bed's network left by
// sandboxes that never got a CNI DEL (containerd gone): each one's jump
// from CNI-HOSTPORT-DNAT and its own chain. Rules are deleted by their
// spec, not their number, which other beds may shift meanwhile. The shared
// CNI-HOSTPORT-* chains stay, as after any CNI DEL. No iptables, or no
// chain, is no error.
func (b *Bed) deleteHostPorts() error {
	if b.network.Index == 0 {
		return nil
	}
	if _, err := exec.LookPath("iptables"); err != nil {
		return nil
	}
	out, err := exec.Command("iptables", "-w", "-t", "nat", "-S", hostPortChain).Output()
	if err != nil {
		return nil // no chain: portmap never ran here
	}
	var errs []error
	for _, rule := range hostPortRules(string(out), b.network.Name) {
		args := append([]string{"-w", "-t", "nat", "-D"}, rule.spec...)
		if out, err := exec.Command("iptables", args...).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("delete hostPort rule %v: %w: %s", rule.spec, err, out))
		}
		for _, op := range []string{"-F", "-X"} {
			if out, err := exec.Command("iptables", "-w", "-t", "nat", op, rule.chain).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("iptables %s %s: %w: %s", op, rule.chain, err, out))
			}
		}
	}
	return errors.Join(errs...)
}

// hostPortRule is a jump portmap added to CNI-HOSTPORT-DNAT for a sandbox.
type hostPortRule struct {
	spec  []string // the rule as iptables arguments, chain first
	chain string   // the sandbox's own chain it jumps to
}

// hostPortRules picks, from `iptables -S CNI-HOSTPORT-DNAT` output, the
// rules portmap added for network: their comment reads
// `dnat name: "NETWORK" id: "SANDBOX"`.
func hostPortRules(listing, network string) []hostPortRule {
	var rules []hostPortRule
	for _, line := range strings.Split(listing, "\n") {
		args := splitRule(line)
		if len(args) < 2 || args[0] != "-A" || !strings.HasPrefix(argValue(args, "--comment"), fmt.Sprintf("dnat name: %q id: ", network)) {
			continue
		}
		rules = append(rules, hostPortRule{spec: args[1:], chain: argValue(args, "-j")})
	}
	return rules
}

// splitRule splits an `iptables -S` line into arguments: words separated
// by spaces, where double quotes group and a backslash escapes the next
// character, as iptables prints comments.
func splitRule(line string) []string {
	var args []string
	var cur strings.Builder
	inWord, quoted := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
			inWord = true
		case c == '"':
			quoted = !quoted
			inWord = true
		case c == ' ' && !quoted:
			if inWord {
				args = append(args, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		args = append(args, cur.String())
	}
	return args
}

// mount is one line of /proc/self/mountinfo.
type mount struct {
	Root   string // the mounted object's root: a path, or "net:[N]" for nsfs
	Point  string
	FSType string
}

// readMountinfo parses /proc/self/mountinfo.
func readMountinfo() ([]mount, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	defer f.Close()
	return parseMountinfo(bufio.NewScanner(f))
}

// parseMountinfo parses mountinfo lines: "ID PARENT MAJ:MIN ROOT POINT
// OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS", paths octal-escaped.
func parseMountinfo(sc *bufio.Scanner) ([]mount, error) {
	var mounts []mount
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" && i >= 6 {
				sep = i
				break
			}
		}
		if sep < 0 || sep+1 >= len(fields) {
			continue
		}
		mounts = append(mounts, mount{Root: unescapeMount(fields[3]), Point: unescapeMount(fields[4]), FSType: fields[sep+1]})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	return mounts, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space, ...).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var out strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				out.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		out.WriteByte(s[i])
	}
	return out.String()
}

// mountsBelow returns the mount points strictly below dir, deepest first.
func mountsBelow(dir string) ([]string, error) {
	mounts, err := readMountinfo()
	if err != nil {
		return nil, err
	}
	var below []string
	for _, m := range mounts {
		if strings.HasPrefix(m.Point, dir+"/") {
			below = append(below, m.Point)
		}
	}
	sort.Slice(below, func(i, j int) bool {
		return strings.Count(below[i], "/") > strings.Count(below[j], "/")
	})
	return below, nil
}

// UnmountBelow unmounts everything mounted below dir, deepest first,
// repeating while mounts stacked on the same point remain: what a
// berth stopped with its pods running leaves (secret volumes on tmpfs)
// once the pods were removed through CRI, which os.RemoveAll cannot.
func UnmountBelow(dir string) error {
	for range 10 {
		below, err := mountsBelow(dir)
		if err != nil || len(below) == 0 {
			return err
		}
		for _, p := range below {
			if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("unmount %s: %w", p, err)
			}
		}
	}
	return fmt.Errorf("mounts below %s keep coming back", dir)
}

// keepLogs copies the bed's daemon logs into dir as BEDNAME-FILE, before
// Close removes them with the rest of the bed.
func (b *Bed) keepLogs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("keep logs: %w", err)
	}
	for _, name := range []string{"containerd.log", "registry.log"} {
		data, err := os.ReadFile(b.path(name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("keep logs: %w", err)
		}
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(b.Dir)+"-"+name), data, 0o644); err != nil {
			return fmt.Errorf("keep logs: %w", err)
		}
	}
	return nil
}

// tail returns the last n lines of file, for error messages.
func tail(file string, n int) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
