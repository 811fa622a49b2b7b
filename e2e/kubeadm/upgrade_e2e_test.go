//go:build e2e

package kubeadm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/berth-agent/berth/e2e/controlplane"
)

// upgradeFrom is the release TestKubeadmUpgrade sets up before upgrading
// to controlplane.KubernetesVersion: the minor before it, as kubeadm
// upgrades a control plane one minor at a time.
const upgradeFrom = "v1.36.3"

// upgradeConfig is the UpgradeConfiguration of `kubeadm upgrade apply`:
// the images local as at init (imagePullPolicy Never), and the preflight
// checks that cannot pass on a berth node made errors no longer:
// SystemVerification runs `kubelet --version`, and there is no kubelet;
// CreateJob runs a Job in the cluster, whose pod the scheduler binds to the
// node and berth, which runs static pods only, never starts;
// CoreDNSUnsupportedPlugins and CoreDNSMigration read the version of the
// CoreDNS the init skipped.
func upgradeConfig(version string) string {
	return `apiVersion: kubeadm.k8s.io/v1beta4
kind: UpgradeConfiguration
apply:
  kubernetesVersion: ` + version + `
  imagePullPolicy: Never
  ignorePreflightErrors: [SystemVerification, CreateJob, CoreDNSUnsupportedPlugins, CoreDNSMigration]
`
}

// TestKubeadmUpgrade is `kubeadm upgrade apply` on berth: a control plane
// set up by kubeadm init at upgradeFrom, with a static pod of the node's
// own beside it, is upgraded by the kubeadm of
// controlplane.KubernetesVersion, which rewrites the control plane's
// manifests one at a time and waits, for each, for the mirror pod's
// kubernetes.io/config.hash to change and the pod to run. Then each
// component's one mirror pod runs the new release's image, Ready; the
// node is Ready, the API server reports the new version, and the other
// static pod's container was not restarted.
func TestKubeadmUpgrade(t *testing.T) {
	c := initCluster(t, upgradeFrom, controlplane.KubernetesVersion)
	before := c.waitControlPlane(t)
	checkImages(t, before, upgradeFrom)

	sentinel := "sentinel-" + controlPlaneNode
	writeManifest(t, manifestDir, "sentinel.yaml", sleeperManifest("sentinel", "1"))
	c.waitMirrors(t, controlPlaneNode, "sentinel mirrored, Running", func(ms []v1.Pod) (bool, string) {
		found := named(ms, sentinel)
		return len(found) == 1 && found[0].Status.Phase == v1.PodRunning, describeMirrors(ms)
	})
	ctrs := containers(t, c.bed)

	bin, err := controlplane.StaticKubernetes(controlplane.KubernetesVersion)
	if err != nil {
		t.Fatal(err)
	}
	c.bin = bin // the operator installs the new kubeadm first
	config := filepath.Join(c.dir, "upgrade.yaml")
	if err := os.WriteFile(config, []byte(upgradeConfig(controlplane.KubernetesVersion)), 0o600); err != nil {
		t.Fatal(err)
	}
	out := c.kubeadm(t, "upgrade", "apply", "--config", config, "--yes")
	if !strings.Contains(out, "[upgrade] SUCCESS!") {
		t.Errorf("kubeadm upgrade apply printed no success line")
	}

	after := c.waitControlPlane(t)
	checkImages(t, after, controlplane.KubernetesVersion)
	for _, p := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		if after[p].Annotations["kubernetes.io/config.hash"] == before[p].Annotations["kubernetes.io/config.hash"] {
			t.Errorf("mirror pod of %s keeps config hash %s after the upgrade", p, before[p].Annotations["kubernetes.io/config.hash"])
		}
	}
	c.waitNode(t, controlPlaneNode, "Ready", nodeReady)
	ms, err := c.mirrors(controlPlaneNode)
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != len(controlPlanePods)+1 || len(named(ms, sentinel)) != 1 {
		t.Errorf("mirror pods %s, want one for each of the control plane's and %s", describeMirrors(ms), sentinel)
	}
	sv, err := c.admin.Discovery().ServerVersion()
	if err != nil {
		t.Fatal(err)
	}
	if sv.GitVersion != controlplane.KubernetesVersion {
		t.Errorf("the API server reports version %s, want %s", sv.GitVersion, controlplane.KubernetesVersion)
	}
	now := containers(t, c.bed)
	key := sentinel + "/main"
	if now[key] == "" || now[key] != ctrs[key] {
		t.Errorf("container %s is %q, was %q: restarted by the upgrade", key, now[key], ctrs[key])
	}
	// etcd's manifest may be the same in both releases (its image is
	// pinned): kubeadm then leaves it or restarts it, either is right.
	for _, p := range []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
		key := p + "-" + controlPlaneNode + "/" + p
		if now[key] == "" || now[key] == ctrs[key] {
			t.Errorf("container %s is %q, was %q: not started again from its new manifest", key, now[key], ctrs[key])
		}
	}
}

// checkImages fails t unless the control plane's pods run the images of
// version (etcd's of controlplane.EtcdVersion, which both releases use).
func checkImages(t *testing.T, pods map[string]v1.Pod, version string) {
	t.Helper()
	for _, p := range controlPlanePods {
		pod := pods[p]
		want := imageRef(p, version)
		if len(pod.Spec.Containers) != 1 || pod.Spec.Containers[0].Image != want {
			t.Errorf("mirror pod of %s has containers %+v, want one running %s", p, pod.Spec.Containers, want)
		}
	}
}
