//go:build e2e

package testbed

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestBedRunsPods proves the bed is a real runtime: pods on the CNI
// network and on the host network run busybox, their output lands in CRI
// log files, and they stop and go away.
func TestBedRunsPods(t *testing.T) {
	b := StartT(t, Options{})
	_, subnet, err := net.ParseCIDR(b.Subnet)
	if err != nil {
		t.Fatalf("bed subnet %q: %v", b.Subnet, err)
	}
	tests := []struct {
		name        string
		hostNetwork bool
	}{
		{name: "cni-network"},
		{name: "host-network", hostNetwork: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			rt := b.Runtime()
			p := runPod(ctx, t, b, tc.name, tc.hostNetwork, "echo hello from "+tc.name)

			st, err := rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: p.sandbox})
			if err != nil {
				t.Fatalf("PodSandboxStatus: %v", err)
			}
			if got := st.GetStatus().GetState(); got != runtimeapi.PodSandboxState_SANDBOX_READY {
				t.Errorf("sandbox state = %v, want SANDBOX_READY", got)
			}
			ip := net.ParseIP(st.GetStatus().GetNetwork().GetIp())
			if tc.hostNetwork {
				if ip != nil && subnet.Contains(ip) {
					t.Errorf("host-network sandbox got pod IP %s", ip)
				}
			} else if ip == nil || !subnet.Contains(ip) {
				t.Errorf("sandbox IP %q not in the bed's subnet %s", st.GetStatus().GetNetwork().GetIp(), b.Subnet)
			}

			waitExited(ctx, t, rt, p.container)
			log, err := os.ReadFile(p.logFile)
			if err != nil {
				t.Fatalf("read container log: %v", err)
			}
			if !strings.Contains(string(log), " stdout F hello from "+tc.name+"\n") {
				t.Errorf("container log %s = %q, want a CRI stdout line %q", p.logFile, log, "hello from "+tc.name)
			}

			if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.sandbox}); err != nil {
				t.Fatalf("StopPodSandbox: %v", err)
			}
			if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.sandbox}); err != nil {
				t.Fatalf("RemovePodSandbox: %v", err)
			}
			list, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{Id: p.sandbox}})
			if err != nil {
				t.Fatalf("ListPodSandbox: %v", err)
			}
			if len(list.GetItems()) != 0 {
				t.Errorf("sandbox %s still listed after removal", p.sandbox)
			}
		})
	}
}

// TestBusyboxImage checks the image tests and examples rely on: the
// applets they use are there, the image's Cmd is sh, and the nobody
// account resolves.
func TestBusyboxImage(t *testing.T) {
	b := StartT(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	script := `for a in sh httpd sleep cat nc wget; do command -v $a >/dev/null || echo "missing $a"; done; echo "user $(id -un) in $(pwd) tmp $(stat -c %a /tmp)"`
	p := runPodWith(ctx, t, b, "applets", false, script, func(_ *runtimeapi.PodSandboxConfig, c *runtimeapi.ContainerConfig) {
		c.Linux.SecurityContext.RunAsUser = &runtimeapi.Int64Value{Value: 65534}
	})
	waitExited(ctx, t, b.Runtime(), p.container)
	log, err := os.ReadFile(p.logFile)
	if err != nil {
		t.Fatalf("read container log: %v", err)
	}
	if strings.Contains(string(log), "missing") || !strings.Contains(string(log), " stdout F user nobody in / tmp 1777\n") {
		t.Errorf("container log = %q, want every applet and %q", log, "user nobody in / tmp 1777")
	}
	st, err := b.Images().ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: "busybox:1.36"}, Verbose: true})
	if err != nil || st.GetImage() == nil {
		t.Fatalf("ImageStatus busybox:1.36 (the short name manifests use) = %v, %v", st.GetImage(), err)
	}
	if !strings.Contains(st.GetInfo()["info"], `"Cmd":["sh"]`) {
		t.Errorf("busybox image config lacks Cmd [sh]: %.400s", st.GetInfo()["info"])
	}
}

// TestBedPodNetworking serves HTTP from a pod and reaches it from the host
// the ways berth and its users do: the pod IP (HTTP probes) and a hostPort
// (portmap), on loopback and on the host's own address.
func TestBedPodNetworking(t *testing.T) {
	b := StartT(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hostPort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	p := runPodWith(ctx, t, b, "web", false, "echo served > /var/www/index.html && exec httpd -f -p 80 -h /var/www",
		func(c *runtimeapi.PodSandboxConfig, _ *runtimeapi.ContainerConfig) {
			c.PortMappings = []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80, HostPort: int32(hostPort)}}
		})
	st, err := b.Runtime().PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: p.sandbox})
	if err != nil {
		t.Fatalf("PodSandboxStatus: %v", err)
	}
	podIP := st.GetStatus().GetNetwork().GetIp()
	targets := []string{
		net.JoinHostPort(podIP, "80"),
		net.JoinHostPort("127.0.0.1", fmt.Sprint(hostPort)),
	}
	if ip := hostIP(t); ip != "" {
		targets = append(targets, net.JoinHostPort(ip, fmt.Sprint(hostPort)))
	}
	for _, target := range targets {
		body, err := getRetry(ctx, "http://"+target+"/")
		if err != nil {
			t.Errorf("GET %s: %v", target, err)
			continue
		}
		if body != "served\n" {
			t.Errorf("GET %s = %q, want %q", target, body, "served\n")
		}
	}
}

// hostIP returns an IPv4 address of the host outside loopback and the
// beds' subnets, or "" when it has none.
func hostIP(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && !strings.HasPrefix(ipn.IP.String(), "10.231.") {
			return ipn.IP.String()
		}
	}
	return ""
}

// getRetry GETs url until it answers (the server in the pod takes a moment
// to listen) and returns the body.
func getRetry(ctx context.Context, url string) (string, error) {
	client := &http.Client{Timeout: 2 * time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return "", err
		}
		resp, err := client.Do(req)
		if err == nil {
			body, rerr := io.ReadAll(resp.Body)
			resp.Body.Close()
			if rerr == nil && resp.StatusCode == http.StatusOK {
				return string(body), nil
			}
			err = fmt.Errorf("status %d, body %q, %v", resp.StatusCode, body, rerr)
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestBedRegistryPull pulls busybox from the bed's registry through CRI,
// over plain HTTP, and runs it.
func TestBedRegistryPull(t *testing.T) {
	b := StartT(t, Options{Registry: true})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	img := &runtimeapi.ImageSpec{Image: b.RegistryBusyboxImage}
	before, err := b.Images().ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: img})
	if err != nil {
		t.Fatalf("ImageStatus before pull: %v", err)
	}
	if before.GetImage() != nil {
		t.Fatalf("%s present before the pull: the test would prove nothing", b.RegistryBusyboxImage)
	}
	pulled, err := b.Images().PullImage(ctx, &runtimeapi.PullImageRequest{Image: img})
	if err != nil {
		t.Fatalf("PullImage %s: %v", b.RegistryBusyboxImage, err)
	}
	st, err := b.Images().ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: img})
	if err != nil {
		t.Fatalf("ImageStatus after pull: %v", err)
	}
	if st.GetImage() == nil || st.GetImage().GetId() != pulled.GetImageRef() {
		t.Fatalf("ImageStatus after pull = %v, want image %s", st.GetImage(), pulled.GetImageRef())
	}
	if !slices.Contains(st.GetImage().GetRepoTags(), b.RegistryBusyboxImage) {
		t.Errorf("repo tags %v lack %s", st.GetImage().GetRepoTags(), b.RegistryBusyboxImage)
	}
}

// TestBedSurvivesOutageAndLeavesNothing runs a long-lived pod, kills
// containerd under it (its shim keeps it running), brings containerd back,
// kills it again and closes the bed in that state: nothing of the bed may
// remain on the machine.
func TestBedSurvivesOutageAndLeavesNothing(t *testing.T) {
	b, err := Start(Options{Registry: true})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := runPod(ctx, t, b, "sleeper", false, "echo up; exec sleep 3600")
	netns := []string{sandboxNetns(ctx, t, b, p.sandbox)}
	for i := range 3 {
		more := runPod(ctx, t, b, fmt.Sprint("more-", i), false, "exec sleep 3600")
		netns = append(netns, sandboxNetns(ctx, t, b, more.sandbox))
	}

	if err := b.StopContainerd(); err != nil {
		t.Fatalf("StopContainerd: %v", err)
	}
	if err := b.StartContainerd(); err != nil {
		t.Fatalf("StartContainerd: %v", err)
	}
	st, err := b.Runtime().ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: p.container})
	if err != nil {
		t.Fatalf("ContainerStatus after restart: %v", err)
	}
	if st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("container after a containerd restart: %v, want CONTAINER_RUNNING", st.GetStatus().GetState())
	}
	if err := b.StopContainerd(); err != nil {
		t.Fatalf("StopContainerd: %v", err)
	}
	sockets := shimSockets(t, b)
	if len(sockets) == 0 {
		t.Fatalf("no shim of the bed is running during the outage")
	}
	if !b.hasSandboxes() {
		t.Fatalf("no sandbox on disk: Close would not restart containerd to remove it through CRI")
	}

	if err := b.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	assertNothingLeft(t, b, netns...)
	for _, s := range sockets {
		if !shimGone(s) {
			t.Errorf("shim socket %s survived Close", s)
		}
	}
}

// shimSockets returns the sockets of the bed's running shims, checking
// that each is where shimSocket says containerd puts it. CRI-O's conmon
// keeps its sockets below the bed's Dir: there it returns the conmon
// processes' stat files in /proc, which outlive them as zombies (PID 1 of
// a container may reap late): shimGone tells.
func shimSockets(t *testing.T, b *Bed) []string {
	t.Helper()
	procs, err := listProcs()
	if err != nil {
		t.Fatal(err)
	}
	var sockets []string
	for _, p := range procs {
		if !b.isShim(p.Args) {
			continue
		}
		if b.version.CRIO {
			sockets = append(sockets, fmt.Sprintf("/proc/%d/stat", p.PID))
			continue
		}
		s := shimSocket(b.Socket, argValue(p.Args, "-namespace"), argValue(p.Args, "-id"))
		if _, err := os.Stat(s); err != nil {
			t.Errorf("shim %d: socket not where expected: %v", p.PID, err)
		}
		sockets = append(sockets, s)
	}
	return sockets
}

// shimGone reports whether what shimSockets returned is gone: a socket
// removed, a conmon process exited (a zombie has exited).
func shimGone(s string) bool {
	if pid, ok := strings.CutPrefix(s, "/proc/"); ok {
		n, err := strconv.Atoi(strings.TrimSuffix(pid, "/stat"))
		return err == nil && (procState(n) == 0 || procState(n) == 'Z')
	}
	_, err := os.Stat(s)
	return err != nil
}

// TestCLIUpDown drives the CLI's library path: a bed started in a given
// dir is found again by Attach from its state file and torn down from
// there.
func TestCLIUpDown(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "bed")
	b, err := Start(Options{Dir: dir, Registry: true})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	if _, err := Start(Options{Dir: dir}); err == nil {
		t.Fatalf("a second bed started in %s", dir)
	}
	a, err := Attach(dir)
	if err != nil {
		t.Fatalf("Attach: %v", err)
	}
	if a.Socket != b.Socket || a.Bridge != b.Bridge || a.Subnet != b.Subnet || a.Registry != b.Registry {
		t.Errorf("Attach = %+v, want the bed %+v", a, b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := a.Runtime().Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		t.Fatalf("Version through the attached bed: %v", err)
	}
	p := runPod(ctx, t, a, "attached", false, "exec sleep 3600")
	netns := sandboxNetns(ctx, t, a, p.sandbox)
	if err := a.Close(); err != nil {
		t.Errorf("Close the attached bed: %v", err)
	}
	assertNothingLeft(t, b, netns)
}

// TestCloseWithoutContainerd covers teardown when containerd cannot come
// back to clean up through CRI: the sweep must still kill the pod's
// processes and shim and remove its netns, mounts and bridge.
func TestCloseWithoutContainerd(t *testing.T) {
	b, err := Start(Options{})
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	hostPort, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	p := runPodWith(ctx, t, b, "stranded", false, "exec sleep 3600", func(c *runtimeapi.PodSandboxConfig, _ *runtimeapi.ContainerConfig) {
		c.PortMappings = []*runtimeapi.PortMapping{{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80, HostPort: int32(hostPort)}}
	})
	netns := sandboxNetns(ctx, t, b, p.sandbox)
	if rules := natRulesOf(t, b); rules == 0 {
		t.Fatalf("no portmap rule for the bed's network: the test would prove nothing")
	}
	if err := b.StopContainerd(); err != nil {
		t.Fatalf("StopContainerd: %v", err)
	}
	sockets := shimSockets(t, b)
	if err := os.WriteFile(b.configPath(), []byte("this is not TOML ]]"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = b.Close()
	if err == nil || !strings.Contains(err.Error(), "start containerd to remove sandboxes") {
		t.Errorf("Close = %v, want it to report that containerd could not clean up", err)
	}
	assertNothingLeft(t, b, netns)
	for _, s := range sockets {
		if !shimGone(s) {
			t.Errorf("shim socket %s survived Close", s)
		}
	}
	if rules := natRulesOf(t, b); rules != 0 {
		t.Errorf("%d portmap rules of the bed's network survived Close", rules)
	}
}

// natRulesOf counts the nat rules whose comment names the bed's CNI
// network (iptables-save escapes the comment's quotes).
func natRulesOf(t *testing.T, b *Bed) int {
	t.Helper()
	out, err := exec.Command("iptables-save", "-t", "nat").Output()
	if err != nil {
		t.Fatalf("iptables-save: %v", err)
	}
	return strings.Count(string(out), `\"`+b.network.Name+`\"`)
}

// TestConcurrentBeds starts beds at the same time, as parallel test
// binaries do: each gets its own bridge and subnet and runs pods there.
// The beds start on goroutines, not in parallel subtests: -parallel
// (GOMAXPROCS by default, 2 here) may run such subtests one after another,
// and a closed bed's network is free for the next, so their networks
// would differ by chance only.
func TestConcurrentBeds(t *testing.T) {
	const beds = 3
	all := make([]*Bed, beds)
	errs := make([]error, beds)
	var wg sync.WaitGroup
	for i := range beds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			all[i], errs[i] = Start(Options{})
		}()
	}
	wg.Wait()
	for i, b := range all {
		if errs[i] != nil {
			t.Errorf("start bed %d: %v", i, errs[i])
			continue
		}
		b.CloseWith(t)
	}
	if t.Failed() {
		t.FailNow()
	}
	subnets := map[string]bool{}
	bridges := map[string]bool{}
	for _, b := range all {
		if subnets[b.Subnet] || bridges[b.Bridge] {
			t.Errorf("subnet %s or bridge %s given to two beds up at once", b.Subnet, b.Bridge)
		}
		subnets[b.Subnet], bridges[b.Bridge] = true, true
	}
	for i, b := range all {
		t.Run(fmt.Sprint("bed", i), func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			p := runPod(ctx, t, b, "pod", false, "echo hi")
			st, err := b.Runtime().PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: p.sandbox})
			if err != nil {
				t.Fatalf("PodSandboxStatus: %v", err)
			}
			_, subnet, _ := net.ParseCIDR(b.Subnet)
			if ip := net.ParseIP(st.GetStatus().GetNetwork().GetIp()); ip == nil || !subnet.Contains(ip) {
				t.Errorf("pod IP %q not in the bed's subnet %s", st.GetStatus().GetNetwork().GetIp(), b.Subnet)
			}
			waitExited(ctx, t, b.Runtime(), p.container)
		})
	}
}

// orphanEnv makes the test binary, run again by TestOrphanReaped, start a
// bed, print its Dir and wait to be killed.
const orphanEnv = "BERTH_TESTBED_ORPHAN"

// TestOrphanReaped kills a process that owns a bed with a running pod, as
// a test -timeout does, and checks that the next Start tears the orphan
// down.
func TestOrphanReaped(t *testing.T) {
	if os.Getenv(orphanEnv) != "" {
		b, err := Start(Options{})
		if err != nil {
			fmt.Println("ERROR", err)
			os.Exit(1)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		p := runPod(ctx, t, b, "orphan", false, "exec sleep 3600")
		fmt.Println(b.Dir, sandboxNetns(ctx, t, b, p.sandbox))
		select {}
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOrphanReaped$")
	cmd.Env = append(os.Environ(), orphanEnv+"=1")
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	fields := strings.Fields(line)
	if err != nil || len(fields) != 2 {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("orphan owner said %q (%v)", line, err)
	}
	dir, netns := fields[0], fields[1]
	orphan, err := attach(dir, filepath.Join(dir, stateFile))
	if err != nil {
		t.Fatalf("read the orphan's state: %v", err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	if !orphan.containerd.alive() {
		t.Fatalf("the orphan's containerd died with its owner: nothing to reap")
	}

	b := StartT(t, Options{})
	if b.Dir == dir {
		t.Fatalf("new bed reuses the orphan's dir")
	}
	// Another test binary starting a bed now may be the one reaping it:
	// give its teardown time to finish.
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(dir); os.IsNotExist(err) && !claimed(orphan) {
			break
		}
	}
	assertNothingLeft(t, orphan, netns)
}

// pod is a sandbox with one container, as runPod made it.
type pod struct {
	sandbox   string
	container string
	logFile   string
}

// runPod runs a sandbox named name with one busybox container running
// script, logging in the CRI layout below the bed's Dir.
func runPod(ctx context.Context, t *testing.T, b *Bed, name string, hostNetwork bool, script string) pod {
	t.Helper()
	return runPodWith(ctx, t, b, name, hostNetwork, script, func(*runtimeapi.PodSandboxConfig, *runtimeapi.ContainerConfig) {})
}

// runPodWith is runPod with the sandbox and container configs adjusted by
// edit.
func runPodWith(ctx context.Context, t *testing.T, b *Bed, name string, hostNetwork bool, script string, edit func(*runtimeapi.PodSandboxConfig, *runtimeapi.ContainerConfig)) pod {
	t.Helper()
	rt := b.Runtime()
	uid := fmt.Sprintf("uid-%s-%d", name, time.Now().UnixNano())
	logDir := filepath.Join(b.Dir, "pods", "default_"+name+"_"+uid)
	netMode := runtimeapi.NamespaceMode_POD
	if hostNetwork {
		netMode = runtimeapi.NamespaceMode_NODE
	}
	sbConfig := &runtimeapi.PodSandboxConfig{
		Metadata:     &runtimeapi.PodSandboxMetadata{Name: name, Namespace: "default", Uid: uid},
		LogDirectory: logDir,
		Linux: &runtimeapi.LinuxPodSandboxConfig{
			SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
				NamespaceOptions: &runtimeapi.NamespaceOption{Network: netMode, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD},
			},
		},
	}
	if !hostNetwork {
		// As the kubelet does: containerd shares the host's UTS namespace
		// with host-network sandboxes, where runc refuses to set a hostname.
		sbConfig.Hostname = name
	}
	cConfig := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "main"},
		Image:    &runtimeapi.ImageSpec{Image: b.BusyboxImage, UserSpecifiedImage: b.BusyboxImage},
		// The sandbox's namespaces, as the kubelet passes them: CRI-O
		// refuses a container whose PID namespace differs.
		Linux:   &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: sbConfig.Linux.SecurityContext.NamespaceOptions}},
		Command: []string{"sh", "-c", script},
		LogPath: "main/0.log",
	}
	edit(sbConfig, cConfig)
	// As the kubelet does: CRI-O does not create the log file's directory.
	if err := os.MkdirAll(filepath.Join(logDir, "main"), 0o755); err != nil {
		t.Fatal(err)
	}
	sb, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbConfig})
	if err != nil {
		t.Fatalf("RunPodSandbox %s: %v", name, err)
	}
	c, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId:  sb.PodSandboxId,
		Config:        cConfig,
		SandboxConfig: sbConfig,
	})
	if err != nil {
		t.Fatalf("CreateContainer in %s: %v", name, err)
	}
	if _, err := rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: c.ContainerId}); err != nil {
		t.Fatalf("StartContainer in %s: %v", name, err)
	}
	return pod{sandbox: sb.PodSandboxId, container: c.ContainerId, logFile: filepath.Join(logDir, "main", "0.log")}
}

// waitExited waits for the container to exit and checks it exited 0.
func waitExited(ctx context.Context, t *testing.T, rt runtimeapi.RuntimeServiceClient, id string) {
	t.Helper()
	for {
		st, err := rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
		if err != nil {
			t.Fatalf("ContainerStatus: %v", err)
		}
		if st.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_EXITED {
			if code := st.GetStatus().GetExitCode(); code != 0 {
				t.Fatalf("container exited %d: %s %s", code, st.GetStatus().GetReason(), st.GetStatus().GetMessage())
			}
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("container %s did not exit: %v", id, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// sandboxNetns returns the sandbox's network namespace path from CRI's
// verbose status, checking it exists.
func sandboxNetns(ctx context.Context, t *testing.T, b *Bed, id string) string {
	t.Helper()
	st, err := b.Runtime().PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if err != nil {
		t.Fatalf("PodSandboxStatus: %v", err)
	}
	path := netnsPath(st.GetInfo()["info"])
	if path == "" {
		t.Fatalf("no netns path in the sandbox's verbose info: %.500s", st.GetInfo()["info"])
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("sandbox netns: %v", err)
	}
	return path
}

// anyProcess reports whether a live process has marker in its command line.
func anyProcess(marker string) bool {
	procs, err := listProcs()
	if err != nil {
		return false
	}
	for _, p := range procs {
		if strings.Contains(strings.Join(p.Args, " "), marker) {
			return true
		}
	}
	return false
}

// assertNothingLeft checks that the closed bed b left no process, mount,
// bridge, network namespace (of those given), claim or directory behind.
func assertNothingLeft(t *testing.T, b *Bed, netns ...string) {
	t.Helper()
	if anyProcess(b.Dir) {
		t.Errorf("a process naming %s in its command line survived Close", b.Dir)
	}
	mounts, err := readMountinfo()
	if err != nil {
		t.Fatal(err)
	}
	gone := map[string]bool{}
	for _, n := range netns {
		gone[strings.Replace(n, "/var/run/", "/run/", 1)] = true
	}
	for _, m := range mounts {
		if strings.HasPrefix(m.Point, b.Dir+"/") || m.Point == b.Dir || gone[m.Point] {
			t.Errorf("mount %s (%s) survived Close", m.Point, m.FSType)
		}
	}
	if _, err := net.InterfaceByName(b.Bridge); err == nil {
		t.Errorf("bridge %s survived Close", b.Bridge)
	}
	if claimed(b) {
		t.Errorf("the bed's claim on network %d survived Close", b.network.Index)
	}
	for _, p := range append(netns, b.Dir, filepath.Join(cniNetworksDir, b.network.Name)) {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s survived Close", p)
		}
	}
	if results, _ := filepath.Glob(filepath.Join(cniResultsDir, b.network.Name+"-*")); len(results) > 0 {
		t.Errorf("CNI results %v survived Close", results)
	}
}

// claimed reports whether b's claim on its network index is still there
// (another bed may have claimed the index since: that is not b's).
func claimed(b *Bed) bool {
	owner, err := os.ReadFile(filepath.Join(claimDir, fmt.Sprint(b.network.Index)))
	return err == nil && string(owner) == b.Dir
}
