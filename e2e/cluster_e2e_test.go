//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/berth-agent/berth/e2e/controlplane"
	"github.com/berth-agent/berth/e2e/testbed"
)

// The control plane is started by the first cluster test and shared by the
// others: kube-apiserver takes seconds to start. closeControlPlane, run by
// TestMain, stops it.
var (
	cpOnce sync.Once
	cp     *controlplane.ControlPlane
	cpErr  error
)

// clusterTimeout bounds each wait on the API server: a status reaches it
// within 2 s, a Lease renewal within 10 s.
const clusterTimeout = 90 * time.Second

func closeControlPlane() {
	if cp != nil {
		cp.Close()
	}
}

// cluster is one test's view of the control plane: the admin client and
// the berth joined to it.
type cluster struct {
	t     *testing.T
	admin kubernetes.Interface
	b     *berth
}

// joinCluster starts (once) the control plane and a berth joined to it
// with the node's credentials and extra args, with manifests.
func joinCluster(t *testing.T, manifests map[string]string, args ...string) *cluster {
	t.Helper()
	c := clusterAdmin(t)
	kc, err := cp.NodeKubeconfig(nodeName)
	if err != nil {
		t.Fatal(err)
	}
	c.b = newBerth(t, berthOptions{manifests: manifests, args: append(clusterArgs(t, kc), args...)})
	return c
}

// clusterArgs are the flags of a berth joining the cluster with
// kubeconfig: the kubelet's healthz port on a free port, so that berths of
// parallel test runs (or a kubelet) on this machine do not collide on
// 10248.
func clusterArgs(t *testing.T, kubeconfig string) []string {
	_, port, _ := net.SplitHostPort(testbed.FreeAddr(t))
	return []string{"--kubeconfig", kubeconfig, "--healthz-port", port}
}

// clusterAdmin starts (once) the control plane and returns the admin's
// view of it, without a berth, the previous test's Node deleted.
func clusterAdmin(t *testing.T) *cluster {
	t.Helper()
	cpOnce.Do(func() {
		started := time.Now()
		cp, cpErr = controlplane.Start()
		if cpErr == nil {
			t.Logf("control plane %s up in %s", controlplane.KubernetesVersion, time.Since(started).Round(time.Millisecond))
		}
	})
	if cpErr != nil {
		t.Fatalf("start the control plane: %v", cpErr)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cp.AdminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, admin: admin}
	c.cleanup() // a previous test's Node and mirror pods
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(cp.Logs())
		}
	})
	return c
}

// cleanup deletes the Node (its Lease and mirror pods go with it, the
// garbage collector is not running here, so they are deleted too).
func (c *cluster) cleanup() {
	ctx := context.Background()
	_ = c.admin.CoreV1().Nodes().Delete(ctx, nodeName, metav1.DeleteOptions{})
	_ = c.admin.CoordinationV1().Leases("kube-node-lease").Delete(ctx, nodeName, metav1.DeleteOptions{})
	grace := int64(0)
	_ = c.admin.CoreV1().Pods("default").DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, metav1.ListOptions{})
}

func (c *cluster) node() (*v1.Node, error) {
	return c.admin.CoreV1().Nodes().Get(context.Background(), nodeName, metav1.GetOptions{})
}

// waitNode waits until the Node satisfies cond and returns it.
func (c *cluster) waitNode(what string, cond func(*v1.Node) (bool, string)) *v1.Node {
	c.t.Helper()
	var got *v1.Node
	took := c.b.waitFor("Node "+what, clusterTimeout, func() (bool, string) {
		n, err := c.node()
		if err != nil {
			return false, err.Error()
		}
		got = n
		return cond(n)
	})
	c.t.Logf("Node %s after %s", what, took.Round(time.Millisecond))
	return got
}

func nodeReady(n *v1.Node) (bool, string) {
	for _, cond := range n.Status.Conditions {
		if cond.Type == v1.NodeReady {
			return cond.Status == v1.ConditionTrue, fmt.Sprintf("Ready=%s %s", cond.Status, cond.Message)
		}
	}
	return false, "no Ready condition"
}

// mirrors lists the node's mirror pods.
func (c *cluster) mirrors() ([]v1.Pod, error) {
	return controlplane.MirrorPods(context.Background(), c.admin, nodeName)
}

// waitMirrors waits until the node's mirror pods satisfy cond.
func (c *cluster) waitMirrors(what string, cond func([]v1.Pod) (bool, string)) []v1.Pod {
	c.t.Helper()
	var got []v1.Pod
	took := c.b.waitFor("mirror pods: "+what, clusterTimeout, func() (bool, string) {
		ms, err := c.mirrors()
		if err != nil {
			return false, err.Error()
		}
		got = ms
		return cond(ms)
	})
	c.t.Logf("mirror pods %s after %s", what, took.Round(time.Millisecond))
	return got
}

func describeMirrors(ms []v1.Pod) string {
	var parts []string
	for _, m := range ms {
		parts = append(parts, fmt.Sprintf("%s(uid %s, hash %s, %s)", m.Name, m.UID, m.Annotations["kubernetes.io/config.mirror"], m.Status.Phase))
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// mirrorNamed returns the one mirror pod named name; ok is false when
// there is none, and the test fails when there are several.
func mirrorNamed(ms []v1.Pod, name string) (v1.Pod, int) {
	var found v1.Pod
	n := 0
	for _, m := range ms {
		if m.Name == name {
			found, n = m, n+1
		}
	}
	return found, n
}

// secretPod is a pod whose environment comes from a Secret of its own
// manifest: NodeRestriction refuses its mirror.
func secretPod(name string) string {
	p := sleeper(name)
	p.Spec.Containers[0].Env = []v1.EnvVar{{Name: "TOKEN", ValueFrom: &v1.EnvVarSource{SecretKeyRef: &v1.SecretKeySelector{
		LocalObjectReference: v1.LocalObjectReference{Name: "creds"}, Key: "token",
	}}}}
	return "apiVersion: v1\nkind: Secret\nmetadata:\n  name: creds\nstringData:\n  token: not-for-the-cluster\n---\n" + podManifest(p)
}

// TestClusterNodeLeaseAndMirrors joins berth to a real API server (with
// the Node authorizer and NodeRestriction): the Node registers Ready with
// its labels, taints and capacity, the Lease renews, a static pod gets a
// mirror pod with the config hash and the Node as owner, an edit replaces
// it, a removal deletes it, and a pod using a Secret gets none and says
// why.
func TestClusterNodeLeaseAndMirrors(t *testing.T) {
	c := joinCluster(t, map[string]string{
		"web.yaml":    podManifest(sleeper("web")),
		"secret.yaml": secretPod("vault"),
	}, "--node-labels", "berth.io/e2e=yes", "--register-with-taints", "berth.io/static=true:NoSchedule")
	b := c.b

	n := c.waitNode("Ready", nodeReady)
	for k, want := range map[string]string{"berth.io/e2e": "yes", "kubernetes.io/hostname": nodeName, "kubernetes.io/os": "linux"} {
		if n.Labels[k] != want {
			t.Errorf("Node label %s = %q, want %q", k, n.Labels[k], want)
		}
	}
	if !slices.ContainsFunc(n.Spec.Taints, func(tt v1.Taint) bool { return tt.Key == "berth.io/static" && tt.Effect == v1.TaintEffectNoSchedule }) {
		t.Errorf("Node taints = %v", n.Spec.Taints)
	}
	if q := n.Status.Capacity[v1.ResourcePods]; q.Value() != 110 {
		t.Errorf("capacity pods = %s, want 110", q.String())
	}
	if q := n.Status.Allocatable[v1.ResourceCPU]; q.IsZero() {
		t.Errorf("allocatable = %v, no cpu", n.Status.Allocatable)
	}
	if v := n.Status.NodeInfo.KubeletVersion; !strings.HasPrefix(v, "v1.") || !strings.Contains(v, "+berth.") {
		t.Errorf("kubeletVersion = %q", v)
	}

	// The Lease: owned by the Node, renewed.
	var first time.Time
	b.waitFor("the Lease renewed", clusterTimeout, func() (bool, string) {
		l, err := c.admin.CoordinationV1().Leases("kube-node-lease").Get(context.Background(), nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != n.UID {
			return false, fmt.Sprintf("owners %v, want the Node %s", l.OwnerReferences, n.UID)
		}
		if first.IsZero() {
			first = l.Spec.RenewTime.Time
		}
		return l.Spec.RenewTime.After(first), fmt.Sprintf("renewed at %v", l.Spec.RenewTime)
	})

	web := b.waitRunning(podName("web"))
	hash := web.Annotations["kubernetes.io/config.hash"]
	ms := c.waitMirrors("web Running", func(ms []v1.Pod) (bool, string) {
		m, count := mirrorNamed(ms, podName("web"))
		return count == 1 && m.Status.Phase == v1.PodRunning, describeMirrors(ms)
	})
	m, _ := mirrorNamed(ms, podName("web"))
	if m.Annotations["kubernetes.io/config.mirror"] != hash {
		t.Errorf("mirror annotation = %q, want the config hash %q", m.Annotations["kubernetes.io/config.mirror"], hash)
	}
	if o := m.OwnerReferences; len(o) != 1 || o[0].Kind != "Node" || o[0].UID != n.UID || o[0].Controller == nil || !*o[0].Controller {
		t.Errorf("mirror ownerReferences = %+v, want one controller reference to Node %s", o, n.UID)
	}
	if _, count := mirrorNamed(ms, podName("vault")); count != 0 {
		t.Errorf("the Secret-using pod has a mirror: %s", describeMirrors(ms))
	}
	vault := b.waitPod(podName("vault"), "without a mirror, saying why", func(p *v1.Pod) bool {
		c := podCondition(p, "berth.io/Mirrored")
		return c != nil && c.Status == v1.ConditionFalse && c.Reason == "NodeRestriction"
	})
	if c := podCondition(vault, "berth.io/Mirrored"); !strings.Contains(c.Message, `Secret "creds"`) {
		t.Errorf("Mirrored condition %q does not name the Secret", c.Message)
	}
	code, body, err := b.getUnix("/pods/default/" + podName("vault") + "/events")
	if err != nil || code != 200 || !strings.Contains(string(body), "NodeRestriction") {
		t.Errorf("events of the Secret-using pod: %d %v %s, want a NodeRestriction event", code, err, body)
	}

	// An edit replaces the mirror.
	edited := sleeper("web")
	edited.Spec.Containers[0].Command = []string{"sh", "-c", "echo edited; " + sleepForever}
	b.writeManifest("web.yaml", podManifest(edited))
	c.waitMirrors("web replaced", func(ms []v1.Pod) (bool, string) {
		nm, count := mirrorNamed(ms, podName("web"))
		return count == 1 && nm.UID != m.UID && nm.Annotations["kubernetes.io/config.mirror"] != hash, describeMirrors(ms)
	})
	// A removal deletes it.
	b.removeManifest("web.yaml")
	c.waitMirrors("web deleted", func(ms []v1.Pod) (bool, string) {
		_, count := mirrorNamed(ms, podName("web"))
		return count == 0, describeMirrors(ms)
	})
}

// TestClusterAPIServerRestart stops the API server under a running berth:
// the pod keeps running untouched, berth says the API server is gone, and
// once it is back the node is Ready again with one mirror pod, the same.
func TestClusterAPIServerRestart(t *testing.T) {
	c := joinCluster(t, map[string]string{"web.yaml": podManifest(sleeper("web"))})
	b := c.b
	c.waitNode("Ready", nodeReady)
	before := b.waitRunning(podName("web"))
	ms := c.waitMirrors("web Running", func(ms []v1.Pod) (bool, string) {
		m, count := mirrorNamed(ms, podName("web"))
		return count == 1 && m.Status.Phase == v1.PodRunning, describeMirrors(ms)
	})
	mirror, _ := mirrorNamed(ms, podName("web"))

	cp.StopAPIServer()
	b.waitFor("berth to say the API server is gone", clusterTimeout, func() (bool, string) {
		return b.logContains("node not kept up to date"), "no such log line"
	})
	down := waitNodeState(t, b, "an API server error", func(s nodeState) bool { return s.Error != "" && s.ErrorSince != nil })
	if !down.Registered || down.APIServer == "" || strings.Contains(down.APIServer, "@") {
		t.Errorf("berth node while the API server is down: %+v", down)
	}
	stdout, stderr := berthPodsApart(t, b)
	if want := "Warning: node " + nodeName + ": API server " + down.APIServer + " unreachable since "; !strings.Contains(stderr, want) || !strings.Contains(stderr, "; pods keep running") {
		t.Errorf("berth pods' stderr while the API server is down lacks %q:\n%s", want, stderr)
	}
	if !strings.Contains(stdout, podName("web")) {
		t.Errorf("berth pods' stdout while the API server is down lacks web:\n%s", stdout)
	}
	during := b.waitRunning(podName("web"))
	if cs, was := containerStatus(during, "main"), containerStatus(before, "main"); cs.ContainerID != was.ContainerID || cs.RestartCount != was.RestartCount {
		t.Errorf("the container changed while the API server was down: %s -> %s", was.ContainerID, cs.ContainerID)
	}
	if err := cp.StartAPIServer(); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	b.waitFor("berth to say the node is up to date again", clusterTimeout, func() (bool, string) {
		return b.logContains("node up to date again"), "no such log line"
	})
	up := waitNodeState(t, b, "no error", func(s nodeState) bool { return s.Error == "" })
	if up.ErrorSince != nil || !up.Registered || up.LastLeaseRenewal == nil {
		t.Errorf("berth node once the API server is back: %+v", up)
	}
	if _, stderr := berthPodsApart(t, b); strings.Contains(stderr, "API server") {
		t.Errorf("berth pods warns of the API server once it is back:\n%s", stderr)
	}
	// Nothing here marks the Node NotReady while the API server is down
	// (no node lifecycle controller): the renewed Lease is what the
	// control plane would see the node back by.
	b.waitFor("the Lease renewed after the restart", clusterTimeout, func() (bool, string) {
		l, err := c.admin.CoordinationV1().Leases("kube-node-lease").Get(context.Background(), nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return l.Spec.RenewTime.After(restarted), fmt.Sprintf("renewed at %v, restarted at %v", l.Spec.RenewTime, restarted)
	})
	c.waitNode("Ready again", nodeReady)
	ms = c.waitMirrors("still one", func(ms []v1.Pod) (bool, string) {
		_, count := mirrorNamed(ms, podName("web"))
		return count == 1, describeMirrors(ms)
	})
	if m, _ := mirrorNamed(ms, podName("web")); m.UID != mirror.UID {
		t.Errorf("mirror re-created across the API server's restart: %s -> %s", mirror.UID, m.UID)
	}
	after := b.waitRunning(podName("web"))
	if cs, was := containerStatus(after, "main"), containerStatus(before, "main"); cs.ContainerID != was.ContainerID {
		t.Errorf("the container changed across the API server's restart: %s -> %s", was.ContainerID, cs.ContainerID)
	}
}

// TestClusterBerthKilled SIGKILLs berth, removes one manifest while it is
// down and restarts it: the removed pod's mirror is deleted at the start,
// the other keeps its one mirror pod.
func TestClusterBerthKilled(t *testing.T) {
	c := joinCluster(t, map[string]string{"web.yaml": podManifest(sleeper("web")), "gone.yaml": podManifest(sleeper("gone"))})
	b := c.b
	ms := c.waitMirrors("both", func(ms []v1.Pod) (bool, string) {
		_, w := mirrorNamed(ms, podName("web"))
		_, g := mirrorNamed(ms, podName("gone"))
		return w == 1 && g == 1, describeMirrors(ms)
	})
	web, _ := mirrorNamed(ms, podName("web"))
	b.kill()
	b.removeManifest("gone.yaml")
	b.start()
	b.waitReady()
	ms = c.waitMirrors("gone's deleted", func(ms []v1.Pod) (bool, string) {
		_, g := mirrorNamed(ms, podName("gone"))
		return g == 0, describeMirrors(ms)
	})
	if m, count := mirrorNamed(ms, podName("web")); count != 1 || m.UID != web.UID {
		t.Errorf("web's mirror after the restart: %s, want the one mirror %s kept", describeMirrors(ms), web.UID)
	}
}

// nodeState is what `berth node -o json` prints (the daemon's /node).
type nodeState struct {
	NodeName         string     `json:"nodeName"`
	Registered       bool       `json:"registered"`
	APIServer        string     `json:"apiServer"`
	LastLeaseRenewal *time.Time `json:"lastLeaseRenewal"`
	Error            string     `json:"error"`
	ErrorSince       *time.Time `json:"errorSince"`
}

// waitNodeState runs `berth node -o json` until its answer satisfies cond.
func waitNodeState(t *testing.T, b *berth, what string, cond func(nodeState) bool) nodeState {
	t.Helper()
	var got nodeState
	b.waitFor("berth node: "+what, clusterTimeout, func() (bool, string) {
		out, err := exec.Command(berthBin, "node", "-o", "json", "--socket", b.socket).Output()
		if err != nil {
			return false, fmt.Sprintf("berth node: %v", err)
		}
		got = nodeState{}
		if err := json.Unmarshal(out, &got); err != nil {
			return false, fmt.Sprintf("berth node -o json: %v: %s", err, out)
		}
		return cond(got), string(out)
	})
	return got
}

// berthPodsApart runs `berth pods` and returns its stdout and stderr apart.
func berthPodsApart(t *testing.T, b *berth) (stdout, stderr string) {
	t.Helper()
	var out, errb strings.Builder
	cmd := exec.Command(berthBin, "pods", "--socket", b.socket)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		t.Fatalf("berth pods: %v\n%s%s", err, out.String(), errb.String())
	}
	return out.String(), errb.String()
}
