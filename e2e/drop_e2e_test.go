//go:build e2e

package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestDropRunning drops manifests into a running berth's directory: each
// gives one ready sandbox and one running container, labelled as
// docs/architecture.md says, on the bed's pod network or on the host network, and /pods shows
// it Running and Ready with the right IP.
func TestDropRunning(t *testing.T) {
	_, subnet, err := net.ParseCIDR(bed.Subnet)
	if err != nil {
		t.Fatalf("bed subnet %q: %v", bed.Subnet, err)
	}
	b := newBerth(t, berthOptions{})
	b.waitReady()

	tests := []struct {
		name        string
		hostNetwork bool
	}{
		{name: "podnet"},
		{name: "hostnet", hostNetwork: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			defer b.use(t)()
			pod := sleeper(tc.name)
			pod.Spec.HostNetwork = tc.hostNetwork
			name := podName(tc.name)

			written := time.Now()
			b.writeManifest(tc.name+".yaml", podManifest(pod))
			rp := b.waitRuntime(name, "main", "")
			t.Logf("%s: manifest written -> container RUNNING (seen through CRI) in %s", tc.name, time.Since(written).Round(time.Millisecond))

			api := b.waitRunning(name)
			uid := string(api.UID)
			if uid == "" {
				t.Fatalf("/pods shows %s without a uid", name)
			}
			if got := api.Annotations["kubernetes.io/config.hash"]; got != uid {
				t.Errorf("annotation kubernetes.io/config.hash = %q, want the uid %q", got, uid)
			}
			if api.Spec.NodeName != nodeName {
				t.Errorf("spec.nodeName = %q, want %q", api.Spec.NodeName, nodeName)
			}

			wantSandbox := map[string]string{labelPodName: name, labelPodNamespace: "default", labelPodUID: uid, labelManaged: "true"}
			checkLabels(t, "sandbox", rp.sandbox.Labels, wantSandbox)
			if md := rp.sandbox.Metadata; md.Name != name || md.Namespace != "default" || md.Uid != uid {
				t.Errorf("sandbox metadata = %v, want name %s namespace default uid %s", md, name, uid)
			}
			wantContainer := map[string]string{labelPodName: name, labelPodNamespace: "default", labelPodUID: uid, labelContainerName: "main", labelManaged: "true"}
			checkLabels(t, "container", rp.container.Labels, wantContainer)
			if n, err := restartCountAnnotation(rp.container); err != nil || n != 0 {
				t.Errorf("container restart count annotation = %d, %v; want 0", n, err)
			}

			cs := containerStatus(api, "main")
			if cs == nil {
				t.Fatalf("/pods lacks the status of container main: %s", describePod(api))
			}
			if cs.State.Running == nil || !cs.Ready || cs.RestartCount != 0 {
				t.Errorf("container status = %s ready=%v restarts=%d, want running, ready, 0 restarts", describeState(cs.State), cs.Ready, cs.RestartCount)
			}
			if shortID(cs.ContainerID) != shortID(rp.container.Id) || len(cs.ContainerID) < len(rp.container.Id) {
				t.Errorf("/pods containerID = %q, CRI's running container is %s", cs.ContainerID, rp.container.Id)
			}
			if c := podCondition(api, v1.PodInitialized); c == nil || c.Status != v1.ConditionTrue {
				t.Errorf("Initialized condition = %v, want True", c)
			}
			if c := podCondition(api, v1.ContainersReady); c == nil || c.Status != v1.ConditionTrue {
				t.Errorf("ContainersReady condition = %v, want True", c)
			}
			if api.Status.StartTime == nil {
				t.Errorf("status.startTime not set")
			}

			ctx, cancel := criCtx()
			defer cancel()
			st, err := bed.Runtime().PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: rp.sandbox.Id})
			if err != nil {
				t.Fatalf("PodSandboxStatus: %v", err)
			}
			netMode := st.GetStatus().GetLinux().GetNamespaces().GetOptions().GetNetwork()
			sandboxIP := st.GetStatus().GetNetwork().GetIp()
			if tc.hostNetwork {
				if netMode != runtimeapi.NamespaceMode_NODE {
					t.Errorf("host-network sandbox network namespace mode = %v, want NODE", netMode)
				}
				if ip := net.ParseIP(api.Status.PodIP); ip == nil || subnet.Contains(ip) {
					t.Errorf("host-network pod: podIP %q, want the host's IP (not in the pod subnet %s)", api.Status.PodIP, bed.Subnet)
				}
				if api.Status.HostIP != "" && api.Status.PodIP != api.Status.HostIP {
					t.Errorf("host-network pod: podIP %q differs from hostIP %q", api.Status.PodIP, api.Status.HostIP)
				}
			} else {
				if netMode != runtimeapi.NamespaceMode_POD {
					t.Errorf("pod-network sandbox network namespace mode = %v, want POD", netMode)
				}
				if ip := net.ParseIP(sandboxIP); ip == nil || !subnet.Contains(ip) {
					t.Errorf("sandbox IP %q not in the bed's subnet %s", sandboxIP, bed.Subnet)
				}
				if api.Status.PodIP != sandboxIP {
					t.Errorf("/pods podIP = %q, CRI sandbox IP = %q", api.Status.PodIP, sandboxIP)
				}
				if len(api.Status.PodIPs) == 0 || api.Status.PodIPs[0].IP != sandboxIP {
					t.Errorf("/pods podIPs = %v, want [%s]", api.Status.PodIPs, sandboxIP)
				}
			}

			// The same pod over the unix socket and by name.
			code, body, err := b.getUnix("/pods/default/" + name)
			if err != nil || code != http.StatusOK {
				t.Fatalf("GET /pods/default/%s over %s: %d %v %.200s", name, b.socket, code, err, body)
			}
			var one v1.Pod
			if err := json.Unmarshal(body, &one); err != nil {
				t.Fatalf("GET /pods/default/%s: %v", name, err)
			}
			if one.UID != api.UID || one.Status.Phase != v1.PodRunning {
				t.Errorf("GET /pods/default/%s over the socket: uid %s phase %s, want uid %s Running", name, one.UID, one.Status.Phase, api.UID)
			}
		})
	}

	// Both pods at once, nothing else.
	list := b.mustPods()
	if len(list.Items) != len(tests) {
		var names []string
		for _, p := range list.Items {
			names = append(names, p.Name)
		}
		t.Errorf("/pods lists %v, want exactly the %d pods dropped", names, len(tests))
	}
	if code, body := b.status("/pods/default/nosuchpod"); code != http.StatusNotFound {
		t.Errorf("GET /pods/default/nosuchpod = %d %s, want 404", code, body)
	}
	if code, body := b.status("/healthz"); code != http.StatusOK || body != "ok" {
		t.Errorf("/healthz = %d %q, want 200 ok", code, body)
	}
	if code, body := b.status("/metrics"); code != http.StatusOK || !strings.Contains(body, "# TYPE berth_") {
		t.Errorf("/metrics = %d, want 200 with berth_ metric families: %.300s", code, body)
	}
	if fi, err := os.Stat(b.socket); err != nil {
		t.Errorf("API socket: %v", err)
	} else if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o660 {
		t.Errorf("API socket %s has mode %s, want a socket with mode 0660", b.socket, fi.Mode())
	}
}

// checkLabels requires every wanted label with its exact value.
func checkLabels(t *testing.T, what string, got, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s label %s = %q, want %q (labels: %v)", what, k, got[k], v, got)
		}
	}
}
