//go:build e2e

package kubeadm

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/e2e/controlplane"
	"github.com/berth-agent/berth/e2e/testbed"
)

// Deadlines of the waits: failure bounds for a loaded machine, not
// expectations. The control plane's first start includes kube-apiserver
// installing its bootstrap objects; a Lease is renewed every 10 s.
const (
	kubeadmTimeout = 10 * time.Minute
	startTimeout   = 5 * time.Minute
	clusterTimeout = 3 * time.Minute
)

// The node controller's timing in kube-controller-manager (kubeadm's
// controllerManager.extraArgs): a node whose Lease was not renewed for
// nodeMonitorGrace is marked NotReady, looked at every 2 s. Shorter than
// the default 50 s, so that an API server stop of apiServerStop makes the
// NotReady observable.
const (
	nodeMonitorGrace = 20 * time.Second
	apiServerStop    = 45 * time.Second
)

const (
	controlPlaneNode = "berth-cp"
	workerNode       = "berth-worker"
	manifestDir      = kubernetesDir + "/manifests"
	adminConf        = kubernetesDir + "/admin.conf"
)

// controlPlanePods are kubeadm's static pods of the first node.
var controlPlanePods = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"}

// cluster is a test's kubeadm cluster: its release, directories, bed,
// config, admin client and first node.
type cluster struct {
	version string // the Kubernetes release kubeadm init set up
	dir     string // the test's directory: configs, the PKI, etcd's data, berth's
	// bin is the directory of kubeadm, kubectl and the control-plane
	// binaries (controlplane.KubeadmBinaries) of the release the node
	// runs: the test's goroutine changes it when it upgrades the node.
	bin     string
	bed     *testbed.Bed // the first node's containerd
	config  string       // kubeadm's --config
	address string       // the API server's advertise address
	admin   kubernetes.Interface
	cp      *node
}

// kubeadmConfig is the InitConfiguration and ClusterConfiguration of the
// run: local images (imagePullPolicy Never: they are imported, no registry
// is reachable), the bed's CRI socket, the PKI and etcd's data in the
// run's directory, no kubelet-start phase (berth is started instead) and
// no addons (their pods would be scheduled onto nodes, which berth does
// not run), kube-controller-manager and kube-scheduler without leader
// election (with one instance it only makes them exit when the API server
// is away longer than the lease), the node controller's grace shortened
// and the flex volume directory, which kube-controller-manager's pod
// mounts from the host with DirectoryOrCreate, in the run's directory.
func (c *cluster) kubeadmConfig() string {
	return fmt.Sprintf(`apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: %[1]s
nodeRegistration:
  name: %[2]s
  criSocket: %[3]s
  imagePullPolicy: Never
  ignorePreflightErrors: [all]
skipPhases: [kubelet-start, addon/coredns, addon/kube-proxy]
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: %[4]s
imageRepository: %[5]s
certificatesDir: %[6]s
etcd:
  local:
    imageTag: %[7]s
    dataDir: %[8]s
controllerManager:
  extraArgs:
  - {name: leader-elect, value: "false"}
  - {name: node-monitor-grace-period, value: %[9]s}
  - {name: node-monitor-period, value: 2s}
  - {name: v, value: "2"}
  - {name: flex-volume-plugin-dir, value: %[10]s}
scheduler:
  extraArgs:
  - {name: leader-elect, value: "false"}
`, c.address, controlPlaneNode, c.bed.Endpoint, c.version, imageRepository,
		filepath.Join(c.dir, "pki"), controlplane.EtcdVersion, filepath.Join(c.dir, "etcd"), nodeMonitorGrace, filepath.Join(c.dir, "flexvolume"))
}

// kubeadm runs the node's kubeadm with args and returns its output; an
// error fails t.
func (c *cluster) kubeadm(t *testing.T, args ...string) string {
	t.Helper()
	return runTool(t, c.bin, "kubeadm", args...)
}

// kubectl runs kubectl as the cluster's admin.
func (c *cluster) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	return runTool(t, c.bin, "kubectl", append([]string{"--kubeconfig", adminConf}, args...)...)
}

func runTool(t *testing.T, bin, tool string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), kubeadmTimeout)
	defer cancel()
	started := time.Now()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, tool), args...)
	cmd.Env = toolEnv(bin)
	out, err := cmd.CombinedOutput()
	t.Logf("%s %s (%s):\n%s", tool, strings.Join(args, " "), time.Since(started).Round(time.Millisecond), out)
	if err != nil {
		t.Fatalf("%s %s: %v", tool, strings.Join(args, " "), err)
	}
	return string(out)
}

// toolEnv is the environment of kubeadm and kubectl in bin: the PATH
// holds only their own directory and utilsDir, so that kubeadm finds no
// systemctl (nor openrc) and leaves the machine's services alone: its
// kubelet-start and reset phases would stop and start a kubelet service.
func toolEnv(bin string) []string {
	env := []string{"PATH=" + bin + string(os.PathListSeparator) + utilsDir}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "PATH=") {
			env = append(env, kv)
		}
	}
	return env
}

// TestKubeadm runs kubeadm's flows on berth, one step after the other on
// the same cluster; a step that fails ends the test.
func TestKubeadm(t *testing.T) {
	c := initCluster(t, controlplane.KubernetesVersion)
	for _, step := range []struct {
		name string
		run  func(*testing.T, *cluster)
	}{
		{"StaticPodEdits", testStaticPodEdits},
		{"APIServerStopped", testAPIServerStopped},
		{"Join", testJoin},
		{"BerthKilled", testBerthKilled},
		{"BerthStopped", testBerthStopped},
	} {
		if !t.Run(step.name, func(t *testing.T) { step.run(t, c) }) {
			return
		}
	}
}

// initCluster is `kubeadm init` of Kubernetes version on berth, in a
// directory of t's, on a bed of its own holding the control-plane images
// of version and of the releases in more, with the host's private
// directories claimed until t ends; then berth is stopped, the node reset
// with `kubeadm reset` and the bed closed. The certificates and
// kubeconfigs come first, so that berth can start with the node's
// kubeconfig, and the kubelet-start phase, which with no init system on
// the PATH only writes the kubelet's files (berth reads none of them;
// `kubeadm upgrade` needs them); then the init itself, which finds them
// and waits for berth's healthz, the control plane's static pods and the
// Node. Then the Node is Ready, the four control-plane pods are mirrored
// Running and Ready with berth's restart counts, and the Lease renews.
func initCluster(t *testing.T, version string, more ...string) *cluster {
	ip, err := utilnet.ChooseHostInterface()
	if err != nil {
		t.Fatalf("choose the advertise address: %v", err)
	}
	c := &cluster{version: version, dir: filepath.Join(work, t.Name()), address: ip.String()}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	if c.bin, err = controlplane.StaticKubernetes(version); err != nil {
		t.Fatal(err)
	}
	// The bed first: starting it tears down the beds (and the pods) of
	// runs that died, which may hold the ports.
	c.bed = testbed.StartT(t, testbed.Options{})
	for _, v := range append([]string{version}, more...) {
		bin, err := controlplane.StaticKubernetes(v)
		if err != nil {
			t.Fatal(err)
		}
		images, err := imageArchives(v, bin, etcdBin)
		if err != nil {
			t.Fatal(err)
		}
		for ref, archive := range images {
			if err := c.bed.ImportImage(archive, ref); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("Kubernetes %s %v and etcd %s built, test bed up with their images in %s: endpoint %s",
		version, more, controlplane.EtcdVersion, time.Since(started).Round(time.Millisecond), c.bed.Endpoint)
	claimHost(t, c.dir)
	t.Cleanup(func() { c.reset(t) })

	c.config = filepath.Join(c.dir, "kubeadm.yaml")
	if err := os.WriteFile(c.config, []byte(c.kubeadmConfig()), 0o600); err != nil {
		t.Fatal(err)
	}
	c.kubeadm(t, "init", "phase", "certs", "all", "--config", c.config)
	c.kubeadm(t, "init", "phase", "kubeconfig", "all", "--config", c.config)
	c.kubeadm(t, "init", "phase", "kubelet-start", "--config", c.config)
	c.cp = newNode(t, filepath.Join(c.dir, controlPlaneNode), controlPlaneNode, c.bed, manifestDir,
		"--kubeconfig", kubernetesDir+"/kubelet.conf", "--node-ip", c.address)
	c.cp.start(t)
	t.Cleanup(func() {
		c.cp.stop(t)
		if t.Failed() {
			t.Log(c.cp.logTail())
			t.Log(c.cp.podLogTail("kube-controller-manager", "kube-controller-manager", "node", 200))
		}
	})
	c.kubeadm(t, "init", "--config", c.config)

	rc, err := clientcmd.BuildConfigFromFlags("", adminConf)
	if err != nil {
		t.Fatal(err)
	}
	if c.admin, err = kubernetes.NewForConfig(rc); err != nil {
		t.Fatal(err)
	}
	n := c.waitNode(t, controlPlaneNode, "Ready", nodeReady)
	if _, ok := n.Labels["node-role.kubernetes.io/control-plane"]; !ok {
		t.Errorf("Node %s has labels %v, want kubeadm's node-role.kubernetes.io/control-plane", n.Name, n.Labels)
	}
	c.waitControlPlane(t)
	c.kubectl(t, "get", "nodes", "-o", "wide")
	out := c.kubectl(t, "get", "pods", "-n", "kube-system", "-o", "wide")
	for _, p := range controlPlanePods {
		if !strings.Contains(out, p+"-"+controlPlaneNode) {
			t.Errorf("kubectl get pods -n kube-system lists no %s-%s", p, controlPlaneNode)
		}
	}
	c.waitLeaseRenewed(t, controlPlaneNode, time.Now())
	return c
}

// nodeReady is the Node's Ready condition: true when True.
func nodeReady(n *v1.Node) (bool, string) {
	cond := readyCondition(n)
	if cond == nil {
		return false, "no Ready condition"
	}
	return cond.Status == v1.ConditionTrue, fmt.Sprintf("Ready=%s %s: %s", cond.Status, cond.Reason, cond.Message)
}

func readyCondition(n *v1.Node) *v1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == v1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// waitNode waits until the Node name satisfies cond and returns it.
func (c *cluster) waitNode(t *testing.T, name, what string, cond func(*v1.Node) (bool, string)) *v1.Node {
	t.Helper()
	var got *v1.Node
	waitFor(t, "Node "+name+" "+what, clusterTimeout, func() (bool, string) {
		c.cp.alive(t)
		n, err := c.admin.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got = n
		return cond(n)
	})
	return got
}

// mirrors lists the mirror pods of node.
func (c *cluster) mirrors(node string) ([]v1.Pod, error) {
	return controlplane.MirrorPods(context.Background(), c.admin, node)
}

// waitMirrors waits until the node's mirror pods satisfy cond and returns
// them.
func (c *cluster) waitMirrors(t *testing.T, node, what string, cond func([]v1.Pod) (bool, string)) []v1.Pod {
	t.Helper()
	var got []v1.Pod
	waitFor(t, "mirror pods of "+node+": "+what, clusterTimeout, func() (bool, string) {
		c.cp.alive(t)
		ms, err := c.mirrors(node)
		if err != nil {
			return false, err.Error()
		}
		got = ms
		return cond(ms)
	})
	return got
}

func describeMirrors(ms []v1.Pod) string {
	var parts []string
	for _, m := range ms {
		parts = append(parts, fmt.Sprintf("%s(uid %s, hash %s, %s, ready %v, restarts %v)", m.Name, m.UID,
			m.Annotations["kubernetes.io/config.mirror"], m.Status.Phase, podReady(&m), restarts(&m)))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// named returns the mirror pods named name.
func named(ms []v1.Pod, name string) []v1.Pod {
	var out []v1.Pod
	for _, m := range ms {
		if m.Name == name {
			out = append(out, m)
		}
	}
	return out
}

func podReady(p *v1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == v1.PodReady {
			return cond.Status == v1.ConditionTrue
		}
	}
	return false
}

// restarts maps a pod's containers to their restart counts.
func restarts(p *v1.Pod) map[string]int32 {
	out := map[string]int32{}
	for _, cs := range p.Status.ContainerStatuses {
		out[cs.Name] = cs.RestartCount
	}
	return out
}

// waitControlPlane waits until the four control-plane pods each have
// exactly one mirror pod, Running and Ready, whose restart counts are
// berth's, and returns them by component.
func (c *cluster) waitControlPlane(t *testing.T) map[string]v1.Pod {
	t.Helper()
	out := map[string]v1.Pod{}
	c.waitMirrors(t, controlPlaneNode, "the control plane Running and Ready, restart counts as berth's", func(ms []v1.Pod) (bool, string) {
		local, err := c.cp.localPods()
		if err != nil {
			return false, err.Error()
		}
		for _, p := range controlPlanePods {
			name := p + "-" + controlPlaneNode
			found := named(ms, name)
			if len(found) != 1 {
				return false, fmt.Sprintf("%d mirror pods %s: %s", len(found), name, describeMirrors(ms))
			}
			m := found[0]
			if m.Namespace != "kube-system" || m.Status.Phase != v1.PodRunning || !podReady(&m) {
				return false, "not running and ready: " + describeMirrors(ms)
			}
			var mine *v1.Pod
			for i := range local {
				if local[i].Name == name && local[i].Namespace == "kube-system" {
					mine = &local[i]
				}
			}
			if mine == nil {
				return false, "berth's /pods has no " + name
			}
			if want, got := restarts(mine), restarts(&m); fmt.Sprint(want) != fmt.Sprint(got) {
				return false, fmt.Sprintf("%s: mirror restart counts %v, berth's %v", name, got, want)
			}
			out[p] = m
		}
		return true, ""
	})
	return out
}

// waitLeaseRenewed waits until the node's Lease is renewed after since.
func (c *cluster) waitLeaseRenewed(t *testing.T, node string, since time.Time) *coordinationv1.Lease {
	t.Helper()
	var got *coordinationv1.Lease
	waitFor(t, "Lease of "+node+" renewed", clusterTimeout, func() (bool, string) {
		l, err := c.admin.CoordinationV1().Leases("kube-node-lease").Get(context.Background(), node, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		got = l
		if l.Spec.RenewTime == nil {
			return false, "no renewTime"
		}
		return l.Spec.RenewTime.After(since), "renewed at " + l.Spec.RenewTime.String()
	})
	return got
}

// containers maps the running containers of the bed's pods (by pod name
// and container) to their IDs: a restarted container has a new one.
func containers(t *testing.T, b *testbed.Bed) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := b.Runtime().ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
	}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, ctr := range resp.Containers {
		out[ctr.Labels["io.kubernetes.pod.name"]+"/"+ctr.Metadata.Name] = ctr.Id
	}
	return out
}

// sleeperManifest is a busybox pod sleeping, with env to tell versions
// apart.
func sleeperManifest(name, version string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: default
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "echo started; exec sleep 1000000"]
    env:
    - {name: VERSION, value: %q}
`, name, testbed.BusyboxRef, version)
}

// secretManifest is a pod whose environment comes from a Secret of its
// own manifest: NodeRestriction refuses its mirror pod.
func secretManifest(name string) string {
	return `apiVersion: v1
kind: Secret
metadata:
  name: creds
  namespace: default
stringData:
  token: not-for-the-cluster
---
apiVersion: v1
kind: Pod
metadata:
  name: ` + name + `
  namespace: default
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: ` + testbed.BusyboxRef + `
    command: ["sh", "-c", "exec sleep 1000000"]
    env:
    - name: TOKEN
      valueFrom:
        secretKeyRef: {name: creds, key: token}
`
}

func writeManifest(t *testing.T, dir, name, content string) {
	t.Helper()
	tmp := filepath.Join(dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// testStaticPodEdits: a static pod added on the node gets a mirror pod; an
// edit replaces it (new config hash, new UID, never two); a removal
// deletes it; a pod using a local Secret runs without a mirror pod and
// says why in its berth.io/Mirrored condition.
func testStaticPodEdits(t *testing.T, c *cluster) {
	web := "web-" + controlPlaneNode
	writeManifest(t, manifestDir, "web.yaml", sleeperManifest("web", "1"))
	var first v1.Pod
	c.waitMirrors(t, controlPlaneNode, "web mirrored, Running", func(ms []v1.Pod) (bool, string) {
		found := named(ms, web)
		if len(found) != 1 || found[0].Status.Phase != v1.PodRunning {
			return false, describeMirrors(ms)
		}
		first = found[0]
		return true, ""
	})

	writeManifest(t, manifestDir, "web.yaml", sleeperManifest("web", "2"))
	c.waitMirrors(t, controlPlaneNode, "web's mirror replaced after the edit", func(ms []v1.Pod) (bool, string) {
		found := named(ms, web)
		if len(found) > 1 {
			t.Fatalf("two mirror pods %s: %s", web, describeMirrors(ms))
		}
		if len(found) != 1 || found[0].UID == first.UID ||
			found[0].Annotations["kubernetes.io/config.mirror"] == first.Annotations["kubernetes.io/config.mirror"] {
			return false, describeMirrors(ms)
		}
		return found[0].Status.Phase == v1.PodRunning, describeMirrors(ms)
	})

	if err := os.Remove(filepath.Join(manifestDir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	c.waitMirrors(t, controlPlaneNode, "web's mirror deleted", func(ms []v1.Pod) (bool, string) {
		return len(named(ms, web)) == 0, describeMirrors(ms)
	})

	vault := "vault-" + controlPlaneNode
	writeManifest(t, manifestDir, "vault.yaml", secretManifest("vault"))
	var cond v1.PodCondition
	waitFor(t, "vault running with berth.io/Mirrored=False", clusterTimeout, func() (bool, string) {
		local, err := c.cp.localPods()
		if err != nil {
			return false, err.Error()
		}
		for _, p := range local {
			if p.Name != vault {
				continue
			}
			for _, pc := range p.Status.Conditions {
				if pc.Type == "berth.io/Mirrored" {
					cond = pc
				}
			}
			return p.Status.Phase == v1.PodRunning && cond.Status == v1.ConditionFalse, fmt.Sprintf("%s %+v", p.Status.Phase, cond)
		}
		return false, "not in /pods"
	})
	if cond.Reason != "NodeRestriction" || !strings.Contains(cond.Message, "creds") {
		t.Errorf("vault's berth.io/Mirrored condition is %+v, want reason NodeRestriction naming Secret creds", cond)
	}
	// A pod added after vault runs gets its mirror pod: berth's mirror
	// rounds went past vault, which still has none.
	writeManifest(t, manifestDir, "sentinel.yaml", sleeperManifest("sentinel", "1"))
	ms := c.waitMirrors(t, controlPlaneNode, "sentinel mirrored", func(ms []v1.Pod) (bool, string) {
		return len(named(ms, "sentinel-"+controlPlaneNode)) == 1, describeMirrors(ms)
	})
	if len(named(ms, vault)) != 0 {
		t.Errorf("mirror pods %s: want none of %s", describeMirrors(ms), vault)
	}
	for _, f := range []string{"vault.yaml", "sentinel.yaml"} {
		if err := os.Remove(filepath.Join(manifestDir, f)); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "vault and sentinel gone", clusterTimeout, func() (bool, string) {
		local, err := c.cp.localPods()
		if err != nil {
			return false, err.Error()
		}
		for _, p := range local {
			if p.Name == vault || p.Name == "sentinel-"+controlPlaneNode {
				return false, p.Name + " still in /pods"
			}
		}
		ms, err := c.mirrors(controlPlaneNode)
		return err == nil && len(ms) == len(controlPlanePods), describeMirrors(ms)
	})
}

// testAPIServerStopped moves kube-apiserver's manifest out of the manifest
// directory, as an administrator stops it, for apiServerStop (longer than
// the Lease's 40 s), and back. No other pod restarts; the Node is Ready,
// the Lease and the mirror pods resume, one per pod. The node controller
// does not mark the node NotReady here: once the API server is back it
// waits until its informers have caught up ("read version is not as new
// as written version") and by then berth has renewed the Lease, as a
// kubelet would; testBerthStopped shows the NotReady.
func testAPIServerStopped(t *testing.T, c *cluster) {
	before := c.waitControlPlane(t)
	ctrs := containers(t, c.bed)
	parked := filepath.Join(kubernetesDir, "kube-apiserver.yaml")
	if err := os.Rename(filepath.Join(manifestDir, "kube-apiserver.yaml"), parked); err != nil {
		t.Fatal(err)
	}
	apiServer := "kube-apiserver-" + controlPlaneNode + "/kube-apiserver"
	waitFor(t, "kube-apiserver stopped", startTimeout, func() (bool, string) {
		_, running := containers(t, c.bed)[apiServer]
		return !running, "still running"
	})
	// The stop itself: the scenario's length, no assertion rests on it.
	time.Sleep(apiServerStop)
	if err := os.Rename(parked, filepath.Join(manifestDir, "kube-apiserver.yaml")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the API server back", startTimeout, func() (bool, string) {
		_, err := c.admin.CoreV1().Nodes().Get(context.Background(), controlPlaneNode, metav1.GetOptions{})
		return err == nil, fmt.Sprint(err)
	})
	back := time.Now()

	c.waitNode(t, controlPlaneNode, "Ready", nodeReady)
	c.waitLeaseRenewed(t, controlPlaneNode, back)
	after := c.waitControlPlane(t)
	for _, p := range []string{"etcd", "kube-controller-manager", "kube-scheduler"} {
		if fmt.Sprint(restarts(ptr(after[p]))) != fmt.Sprint(restarts(ptr(before[p]))) {
			t.Errorf("%s restarted: restart counts %v, were %v", p, restarts(ptr(after[p])), restarts(ptr(before[p])))
		}
	}
	now := containers(t, c.bed)
	for k, id := range ctrs {
		if k == apiServer {
			continue
		}
		if now[k] != id {
			t.Errorf("container %s is %q, was %q: restarted", k, now[k], id)
		}
	}
}

func ptr(p v1.Pod) *v1.Pod { return &p }

// testJoin joins a second node with `kubeadm join` through TLS bootstrap:
// kubeadm's kubelet-start phase discovers the cluster with the token and
// writes bootstrap-kubelet.conf; berth, on a containerd of its own (a
// second machine's), bootstraps its certificate with it (the CSR approved
// by kube-controller-manager's csrapproving controller through kubeadm's
// RBAC, signed by its csrsigning), registers Ready and mirrors its static
// pod. The kubelet-wait-bootstrap phase is skipped: on this one machine
// /etc/kubernetes/kubelet.conf is the first node's, which it would take
// for the second's.
func testJoin(t *testing.T, c *cluster) {
	bed2 := testbed.StartT(t, testbed.Options{})
	join := strings.Fields(c.kubeadm(t, "token", "create", "--print-join-command", "--kubeconfig", adminConf))
	if len(join) < 3 || join[0] != "kubeadm" || join[1] != "join" {
		t.Fatalf("kubeadm token create printed %q, want a kubeadm join command", join)
	}
	var token string
	for i, f := range join {
		if f == "--token" && i+1 < len(join) {
			token = join[i+1]
		}
	}
	c.kubeadm(t, append(join[1:], "--node-name", workerNode, "--cri-socket", bed2.Endpoint,
		"--ignore-preflight-errors", "all", "--skip-phases", "kubelet-wait-bootstrap")...)
	bootstrap := filepath.Join(c.dir, "bootstrap-kubelet.conf")
	data, err := os.ReadFile(kubernetesDir + "/bootstrap-kubelet.conf")
	if err != nil {
		t.Fatalf("kubeadm join wrote no bootstrap kubeconfig: %v", err)
	}
	if err := os.WriteFile(bootstrap, data, 0o600); err != nil {
		t.Fatal(err)
	}
	manifests := filepath.Join(c.dir, workerNode+"-manifests")
	if err := os.MkdirAll(manifests, 0o755); err != nil {
		t.Fatal(err)
	}
	writeManifest(t, manifests, "job.yaml", sleeperManifest("job", "1"))
	w := newNode(t, filepath.Join(c.dir, workerNode), workerNode, bed2, manifests,
		"--bootstrap-kubeconfig", bootstrap, "--kubeconfig", filepath.Join(c.dir, workerNode, "kubelet.conf"),
		"--healthz-port", strings.Split(testbed.FreeAddr(t), ":")[1], "--node-ip", c.address)
	w.start(t)
	t.Cleanup(func() {
		w.stop(t)
		if t.Failed() {
			t.Log(w.logTail())
		}
	})
	c.waitNode(t, workerNode, "Ready", func(n *v1.Node) (bool, string) {
		w.alive(t)
		return nodeReady(n)
	})
	csrs, err := c.admin.CertificatesV1().CertificateSigningRequests().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tokenUser := "system:bootstrap:" + strings.Split(token, ".")[0]
	var approvedBy []string
	for _, csr := range csrs.Items {
		if csr.Spec.Username != tokenUser {
			continue
		}
		for _, cond := range csr.Status.Conditions {
			if cond.Type == "Approved" {
				approvedBy = append(approvedBy, cond.Reason)
			}
		}
		if len(csr.Status.Certificate) == 0 {
			t.Errorf("CSR %s of %s has no certificate", csr.Name, tokenUser)
		}
	}
	if !slices.Contains(approvedBy, "AutoApproved") {
		t.Errorf("the CSRs of %s were approved with reasons %v, want kube-controller-manager's AutoApproved", tokenUser, approvedBy)
	}
	c.waitMirrors(t, workerNode, "job mirrored, Running", func(ms []v1.Pod) (bool, string) {
		w.alive(t)
		found := named(ms, "job-"+workerNode)
		return len(found) == 1 && found[0].Status.Phase == v1.PodRunning, describeMirrors(ms)
	})
}

// testBerthKilled SIGKILLs the first node's berth while the API server is
// up and starts it again: once it has listed the node's mirror pods and
// renewed the Lease, every mirror pod is the one from before (same UID,
// none duplicated or lost) and no container restarted.
func testBerthKilled(t *testing.T, c *cluster) {
	before := c.waitControlPlane(t)
	ctrs := containers(t, c.bed)
	c.cp.signal(t, 9)
	restarted := time.Now()
	c.cp.start(t)
	waitFor(t, "berth ready after the restart", startTimeout, func() (bool, string) {
		c.cp.alive(t)
		return c.cp.ready()
	})
	waitFor(t, "berth listed the mirror pods", clusterTimeout, func() (bool, string) {
		n, ok := c.cp.metric("berth_mirror_pods")
		return ok && n == float64(len(controlPlanePods)), fmt.Sprintf("berth_mirror_pods %v (%v)", n, ok)
	})
	c.waitLeaseRenewed(t, controlPlaneNode, restarted)
	after := c.waitControlPlane(t)
	for _, p := range controlPlanePods {
		if after[p].UID != before[p].UID {
			t.Errorf("mirror pod of %s replaced: uid %s, was %s", p, after[p].UID, before[p].UID)
		}
	}
	if ms, err := c.mirrors(controlPlaneNode); err != nil || len(ms) != len(controlPlanePods) {
		t.Errorf("mirror pods %s (%v), want exactly the %d of the control plane", describeMirrors(ms), err, len(controlPlanePods))
	}
	now := containers(t, c.bed)
	for k, id := range ctrs {
		if now[k] != id {
			t.Errorf("container %s is %q, was %q: restarted", k, now[k], id)
		}
	}
}

// testBerthStopped stops the first node's berth (SIGTERM leaves the pods
// running) until kube-controller-manager's node lifecycle controller, the
// Lease not renewed for nodeMonitorGrace, marks the Node's Ready
// condition Unknown, then starts it again: the node is Ready again, the
// mirror pods are Ready again (the controller had marked them not ready),
// and no container restarted. The wait is on the condition, the state the
// controller writes first, not on its NodeNotReady event: events are
// best effort, recorded after the write and dropped when the recorder's
// queue is full. The wait allows startTimeout: the controller skips its
// rounds while its Lease informer is behind the live Lease (the lease
// circuit breaker of 1.37), which takes tens of seconds after an API
// server restart.
func testBerthStopped(t *testing.T, c *cluster) {
	c.waitControlPlane(t)
	ctrs := containers(t, c.bed)
	stopped := time.Now()
	c.cp.stop(t)
	waitFor(t, "the node lifecycle controller marking the Node's Ready condition Unknown", startTimeout, func() (bool, string) {
		n, err := c.admin.CoreV1().Nodes().Get(context.Background(), controlPlaneNode, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		cond := readyCondition(n)
		if cond == nil {
			return false, "no Ready condition"
		}
		return cond.Status == v1.ConditionUnknown && cond.Reason == "NodeStatusUnknown" && !cond.LastTransitionTime.Time.Before(stopped.Truncate(time.Second)),
			fmt.Sprintf("Ready=%s %s since %s: %s", cond.Status, cond.Reason, cond.LastTransitionTime.Format(time.RFC3339), cond.Message)
	})
	c.cp.start(t)
	c.waitNode(t, controlPlaneNode, "Ready again", func(n *v1.Node) (bool, string) {
		ok, detail := nodeReady(n)
		return ok && readyCondition(n).LastTransitionTime.After(stopped), detail
	})
	c.waitControlPlane(t)
	now := containers(t, c.bed)
	for k, id := range ctrs {
		if now[k] != id {
			t.Errorf("container %s is %q, was %q: restarted", k, now[k], id)
		}
	}
}
