package criconfig

import (
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	fakeri "k8s.io/cri-api/pkg/apis/testing"

	"github.com/berth-agent/berth/internal/podresources"
)

// newCfgBuilder is a Builder over the cri-api fake image service with its
// state and log directories in the test's temp dir and fixed machine
// figures (testNodeFacts).
func newCfgBuilder(t *testing.T, opts Options) (*Builder, *fakeri.FakeImageService) {
	t.Helper()
	if opts.RootDir == "" {
		opts.RootDir = t.TempDir()
	}
	if opts.PodLogsDir == "" {
		opts.PodLogsDir = t.TempDir()
	}
	if opts.HostIP == "" {
		opts.HostIP = "192.168.1.10"
	}
	img := fakeri.NewFakeImageService()
	if opts.ProbeNode == nil {
		opts.ProbeNode = testNodeFacts
	}
	return New(img, opts), img
}

// testNodeFacts are a machine's figures: 4 CPUs, 8 GiB, 100 GiB of disk,
// berth at oom_score_adj -999.
func testNodeFacts() (podresources.NodeFacts, error) {
	return podresources.NodeFacts{
		Allocatable: v1.ResourceList{
			v1.ResourceCPU:              resource.MustParse("4"),
			v1.ResourceMemory:           resource.MustParse("8Gi"),
			v1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
		},
		MinOOMScoreAdj: -999,
	}, nil
}

func sbPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-node1", Namespace: "prod", UID: "uid-7",
			Labels:      map[string]string{"app": "web", LabelManaged: "false"},
			Annotations: map[string]string{"kubernetes.io/config.source": "file"},
		},
		Spec: v1.PodSpec{
			Containers: []v1.Container{{Name: "app", Image: "busybox"}},
		},
	}
}

func TestSandboxConfigIdentity(t *testing.T) {
	m, _ := newCfgBuilder(t, Options{PodLogsDir: "/var/log/pods"})
	cfg, err := m.SandboxConfig(sbPod(), 3)
	if err != nil {
		t.Fatal(err)
	}
	wantMeta := &runtimeapi.PodSandboxMetadata{Name: "web-node1", Namespace: "prod", Uid: "uid-7", Attempt: 3}
	if !reflect.DeepEqual(cfg.Metadata, wantMeta) {
		t.Errorf("metadata = %v, want %v", cfg.Metadata, wantMeta)
	}
	wantLabels := map[string]string{
		"app": "web", LabelManaged: "true",
		LabelPodName: "web-node1", LabelPodNamespace: "prod", LabelPodUID: "uid-7",
	}
	if !reflect.DeepEqual(cfg.Labels, wantLabels) {
		t.Errorf("labels = %v, want %v", cfg.Labels, wantLabels)
	}
	wantAnn := map[string]string{"kubernetes.io/config.source": "file", AnnotationPodGracePeriod: "30"}
	if !reflect.DeepEqual(cfg.Annotations, wantAnn) {
		t.Errorf("annotations = %v, want %v", cfg.Annotations, wantAnn)
	}
	if want := "/var/log/pods/prod_web-node1_uid-7"; cfg.LogDirectory != want {
		t.Errorf("log directory = %q, want %q", cfg.LogDirectory, want)
	}
	if cfg.Hostname != "web-node1" {
		t.Errorf("hostname = %q", cfg.Hostname)
	}
	if cfg.Linux.CgroupParent != "" {
		t.Errorf("cgroup parent = %q, want the runtime's default", cfg.Linux.CgroupParent)
	}
	if cfg.DnsConfig != nil {
		t.Errorf("DNS config = %v without a resolver file, want nil", cfg.DnsConfig)
	}
}

func TestSandboxConfigTable(t *testing.T) {
	grace := int64(5)
	tests := []struct {
		name    string
		opts    Options
		mutate  func(p *v1.Pod)
		check   func(t *testing.T, cfg *runtimeapi.PodSandboxConfig)
		wantErr string
	}{
		{
			name:   "grace period annotation",
			mutate: func(p *v1.Pod) { p.Spec.TerminationGracePeriodSeconds = &grace },
			check: func(t *testing.T, cfg *runtimeapi.PodSandboxConfig) {
				if got := cfg.Annotations[AnnotationPodGracePeriod]; got != "5" {
					t.Errorf("grace annotation = %q, want 5", got)
				}
			},
		},
		{
			name:   "long name cut to 63 without trailing dash",
			mutate: func(p *v1.Pod) { p.Name = strings.Repeat("a", 62) + "-bcdef" },
			check: func(t *testing.T, cfg *runtimeapi.PodSandboxConfig) {
				if want := strings.Repeat("a", 62); cfg.Hostname != want {
					t.Errorf("hostname = %q, want %q", cfg.Hostname, want)
				}
			},
		},
		{
			name:   "spec.hostname wins",
			mutate: func(p *v1.Pod) { p.Spec.Hostname = "db"; p.Spec.Subdomain = "sub" },
			check: func(t *testing.T, cfg *runtimeapi.PodSandboxConfig) {
				if cfg.Hostname != "db" {
					t.Errorf("hostname = %q, want db", cfg.Hostname)
				}
			},
		},
		{
			name: "setHostnameAsFQDN with a subdomain and cluster domain",
			opts: Options{ClusterDomain: "cluster.local"},
			mutate: func(p *v1.Pod) {
				p.Spec.Hostname, p.Spec.Subdomain, p.Spec.SetHostnameAsFQDN = "db", "sub", new(true)
			},
			check: func(t *testing.T, cfg *runtimeapi.PodSandboxConfig) {
				if want := "db.sub.prod.svc.cluster.local"; cfg.Hostname != want {
					t.Errorf("hostname = %q, want %q", cfg.Hostname, want)
				}
			},
		},
		{
			name:   "host network: no hostname, NODE network namespace",
			mutate: func(p *v1.Pod) { p.Spec.HostNetwork = true },
			check: func(t *testing.T, cfg *runtimeapi.PodSandboxConfig) {
				if cfg.Hostname != "" {
					t.Errorf("hostname = %q, want the host's", cfg.Hostname)
				}
				if got := cfg.Linux.SecurityContext.NamespaceOptions.Network; got != runtimeapi.NamespaceMode_NODE {
					t.Errorf("network namespace = %v", got)
				}
			},
		},
		{
			name: "namespaces: hostPID and hostIPC",
			mutate: func(p *v1.Pod) {
				p.Spec.HostPID, p.Spec.HostIPC = true, true
			},
			check: func(t *testing.T, cfg *runtimeapi.PodSandboxConfig) {
				want := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_NODE, Ipc: runtimeapi.NamespaceMode_NODE}
				if got := cfg.Linux.SecurityContext.NamespaceOptions; !reflect.DeepEqual(got, want) {
					t.Errorf("namespaces = %v, want %v", got, want)
				}
			},
		},
		{
			name:   "namespaces: shareProcessNamespace is a pod PID namespace",
			mutate: func(p *v1.Pod) { p.Spec.ShareProcessNamespace = new(true) },
			check: func(t *testing.T, cfg *runtimeapi.PodSandboxConfig) {
				want := &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_POD, Pid: runtimeapi.NamespaceMode_POD, Ipc: runtimeapi.NamespaceMode_POD}
				if got := cfg.Linux.SecurityContext.NamespaceOptions; !reflect.DeepEqual(got, want) {
					t.Errorf("namespaces = %v, want %v", got, want)
				}
			},
		},
		{
			name:   "namespaces: default is a container PID namespace",
			mutate: func(p *v1.Pod) {},
			check: func(t *testing.T, cfg *runtimeapi.PodSandboxConfig) {
				if got := cfg.Linux.SecurityContext.NamespaceOptions.Pid; got != runtimeapi.NamespaceMode_CONTAINER {
					t.Errorf("pid namespace = %v", got)
				}
			},
		},
		{
			name: "host ports become port mappings, others do not",
			mutate: func(p *v1.Pod) {
				p.Spec.Containers[0].Ports = []v1.ContainerPort{
					{ContainerPort: 80, HostPort: 8080},
					{ContainerPort: 53, HostPort: 5353, Protocol: v1.ProtocolUDP, HostIP: "127.0.0.1"},
					{ContainerPort: 9090},
				}
			},
			check: func(t *testing.T, cfg *runtimeapi.PodSandboxConfig) {
				want := []*runtimeapi.PortMapping{
					{Protocol: runtimeapi.Protocol_TCP, ContainerPort: 80, HostPort: 8080},
					{Protocol: runtimeapi.Protocol_UDP, ContainerPort: 53, HostPort: 5353, HostIp: "127.0.0.1"},
				}
				if !reflect.DeepEqual(cfg.PortMappings, want) {
					t.Errorf("port mappings = %v, want %v", cfg.PortMappings, want)
				}
			},
		},
		{
			name: "sysctls with either separator",
			mutate: func(p *v1.Pod) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{Sysctls: []v1.Sysctl{
					{Name: "net.ipv4.ip_unprivileged_port_start", Value: "0"},
					{Name: "net/ipv4/conf/eth0.100/forwarding", Value: "1"},
				}}
			},
			check: func(t *testing.T, cfg *runtimeapi.PodSandboxConfig) {
				want := map[string]string{"net.ipv4.ip_unprivileged_port_start": "0", "net.ipv4.conf.eth0/100.forwarding": "1"}
				if !reflect.DeepEqual(cfg.Linux.Sysctls, want) {
					t.Errorf("sysctls = %v, want %v", cfg.Linux.Sysctls, want)
				}
			},
		},
		{
			name: "pod security context",
			opts: Options{RootDir: "/var/lib/berth"},
			mutate: func(p *v1.Pod) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{
					RunAsUser: new(int64(1000)), RunAsGroup: new(int64(2000)),
					SupplementalGroups: []int64{3000}, FSGroup: new(int64(4000)),
					SELinuxOptions: &v1.SELinuxOptions{Level: "s0:c1,c2"},
					SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost, LocalhostProfile: new("audit.json")},
				}
				p.Spec.Containers[0].SecurityContext = &v1.SecurityContext{Privileged: new(true)}
			},
			check: func(t *testing.T, cfg *runtimeapi.PodSandboxConfig) {
				sc := cfg.Linux.SecurityContext
				if sc.RunAsUser.GetValue() != 1000 || sc.RunAsGroup.GetValue() != 2000 {
					t.Errorf("run as %v:%v", sc.RunAsUser, sc.RunAsGroup)
				}
				if !reflect.DeepEqual(sc.SupplementalGroups, []int64{3000, 4000}) {
					t.Errorf("supplemental groups = %v, want the fsGroup appended", sc.SupplementalGroups)
				}
				if sc.SelinuxOptions.GetLevel() != "s0:c1,c2" {
					t.Errorf("selinux = %v", sc.SelinuxOptions)
				}
				wantSeccomp := &runtimeapi.SecurityProfile{ProfileType: runtimeapi.SecurityProfile_Localhost, LocalhostRef: "/var/lib/berth/seccomp/audit.json"}
				if !reflect.DeepEqual(sc.Seccomp, wantSeccomp) {
					t.Errorf("seccomp = %v, want %v", sc.Seccomp, wantSeccomp)
				}
				if !sc.Privileged {
					t.Errorf("sandbox of a privileged container is not privileged")
				}
			},
		},
		{
			name: "seccomp defaults to Unconfined",
			check: func(t *testing.T, cfg *runtimeapi.PodSandboxConfig) {
				if got := cfg.Linux.SecurityContext.Seccomp.GetProfileType(); got != runtimeapi.SecurityProfile_Unconfined {
					t.Errorf("seccomp = %v", got)
				}
			},
		},
		{
			name: "overhead and pod resources",
			mutate: func(p *v1.Pod) {
				p.Spec.Overhead = v1.ResourceList{v1.ResourceCPU: resource.MustParse("100m"), v1.ResourceMemory: resource.MustParse("10Mi")}
				p.Spec.Containers[0].Resources.Limits = v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("100Mi")}
			},
			check: func(t *testing.T, cfg *runtimeapi.PodSandboxConfig) {
				oh := cfg.Linux.Overhead
				if oh.GetMemoryLimitInBytes() != 10<<20 || oh.GetCpuQuota() != 10000 {
					t.Errorf("overhead = %v", oh)
				}
				r := cfg.Linux.Resources
				if r.GetMemoryLimitInBytes() != 110<<20 || r.GetCpuQuota() != 110000 || r.GetCpuPeriod() != 100000 {
					t.Errorf("pod resources = %v, want limits of 1.1 CPU and 110Mi", r)
				}
			},
		},
		{
			name: "bad seccomp profile type",
			mutate: func(p *v1.Pod) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: "Weird"}}
			},
			wantErr: `sandbox config for pod prod/web-node1: unknown seccompProfile type "Weird"`,
		},
		{
			name: "Localhost seccomp without a profile",
			mutate: func(p *v1.Pod) {
				p.Spec.SecurityContext = &v1.PodSecurityContext{SeccompProfile: &v1.SeccompProfile{Type: v1.SeccompProfileTypeLocalhost}}
			},
			wantErr: "seccompProfile type Localhost needs localhostProfile",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, _ := newCfgBuilder(t, tt.opts)
			pod := sbPod()
			if tt.mutate != nil {
				tt.mutate(pod)
			}
			cfg, err := m.SandboxConfig(pod, 0)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, cfg)
		})
	}
}

func TestRuntimeHandler(t *testing.T) {
	pod := sbPod()
	if got := RuntimeHandler(pod); got != "" {
		t.Errorf("handler = %q without runtimeClassName, want the default", got)
	}
	pod.Spec.RuntimeClassName = new("kata")
	if got := RuntimeHandler(pod); got != "kata" {
		t.Errorf("handler = %q, want kata", got)
	}
}
