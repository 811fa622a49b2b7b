package poddns

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestParseResolvConf(t *testing.T) {
	in := `# generated
nameserver 192.168.1.1
nameserver 192.168.1.2 # second
domain old.example
search corp.example. lab.example ; trailing
options ndots:2 timeout:1
options rotate
nameserver
bogus line
`
	got, err := parseResolvConf(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := resolvConf{
		nameservers: []string{"192.168.1.1", "192.168.1.2"},
		searches:    []string{"corp.example", "lab.example"},
		options:     []string{"ndots:2", "timeout:1", "rotate"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
}

func TestDNSConfig(t *testing.T) {
	dir := t.TempDir()
	hostResolv := filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(hostResolv, []byte("nameserver 1.1.1.1\nnameserver 8.8.8.8\nsearch home.lan\noptions edns0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var longSearches []string
	for i := range 40 {
		longSearches = append(longSearches, fmt.Sprintf("d%02d.example", i))
	}
	val := func(s string) *string { return &s }
	tests := []struct {
		name       string
		resolv     string
		clusterDNS []string
		domain     string
		hostNet    bool
		policy     v1.DNSPolicy
		dnsConfig  *v1.PodDNSConfig
		want       *runtimeapi.DNSConfig
		wantErr    string
	}{
		{
			name: "Default copies the host file", resolv: hostResolv, policy: v1.DNSDefault,
			want: &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1", "8.8.8.8"}, Searches: []string{"home.lan"}, Options: []string{"edns0"}},
		},
		{
			name: "Default without a resolver file leaves it to the runtime", policy: v1.DNSDefault,
			want: nil,
		},
		{
			name: "ClusterFirst without cluster DNS falls back to Default", resolv: hostResolv, policy: v1.DNSClusterFirst,
			want: &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1", "8.8.8.8"}, Searches: []string{"home.lan"}, Options: []string{"edns0"}},
		},
		{
			name: "unset policy is ClusterFirst", resolv: hostResolv, clusterDNS: []string{"10.96.0.10"}, domain: "cluster.local",
			want: &runtimeapi.DNSConfig{
				Servers:  []string{"10.96.0.10"},
				Searches: []string{"prod.svc.cluster.local", "svc.cluster.local", "cluster.local", "home.lan"},
				Options:  []string{"ndots:5"},
			},
		},
		{
			name: "ClusterFirst without a cluster domain", resolv: hostResolv, clusterDNS: []string{"10.96.0.10"}, policy: v1.DNSClusterFirst,
			want: &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Searches: []string{"home.lan"}, Options: []string{"ndots:5"}},
		},
		{
			name: "ClusterFirst on the host network is Default", resolv: hostResolv, clusterDNS: []string{"10.96.0.10"}, hostNet: true,
			policy: v1.DNSClusterFirst,
			want:   &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1", "8.8.8.8"}, Searches: []string{"home.lan"}, Options: []string{"edns0"}},
		},
		{
			name: "ClusterFirstWithHostNet uses cluster DNS", resolv: hostResolv, clusterDNS: []string{"10.96.0.10"}, domain: "k.local",
			hostNet: true, policy: v1.DNSClusterFirstWithHostNet,
			want: &runtimeapi.DNSConfig{
				Servers:  []string{"10.96.0.10"},
				Searches: []string{"prod.svc.k.local", "svc.k.local", "k.local", "home.lan"},
				Options:  []string{"ndots:5"},
			},
		},
		{
			name: "None takes dnsConfig only", resolv: hostResolv, policy: v1.DNSNone,
			dnsConfig: &v1.PodDNSConfig{Nameservers: []string{"9.9.9.9"}, Searches: []string{"a.example"}, Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: val("1")}}},
			want:      &runtimeapi.DNSConfig{Servers: []string{"9.9.9.9"}, Searches: []string{"a.example"}, Options: []string{"ndots:1"}},
		},
		{
			name: "None without dnsConfig is an error", policy: v1.DNSNone,
			wantErr: "dnsPolicy None needs dnsConfig",
		},
		{
			name: "dnsConfig merges: servers and searches appended once, options overridden by name", resolv: hostResolv, policy: v1.DNSDefault,
			dnsConfig: &v1.PodDNSConfig{
				Nameservers: []string{"8.8.8.8", "9.9.9.9"},
				Searches:    []string{"home.lan", "x.example"},
				Options:     []v1.PodDNSConfigOption{{Name: "edns0"}, {Name: "ndots", Value: val("3")}},
			},
			want: &runtimeapi.DNSConfig{Servers: []string{"1.1.1.1", "8.8.8.8", "9.9.9.9"}, Searches: []string{"home.lan", "x.example"}, Options: []string{"edns0", "ndots:3"}},
		},
		{
			name: "ClusterFirst ndots overridden by dnsConfig", clusterDNS: []string{"10.96.0.10"}, policy: v1.DNSClusterFirst,
			dnsConfig: &v1.PodDNSConfig{Options: []v1.PodDNSConfigOption{{Name: "ndots", Value: val("2")}, {Name: "single-request"}}},
			want:      &runtimeapi.DNSConfig{Servers: []string{"10.96.0.10"}, Options: []string{"ndots:2", "single-request"}},
		},
		{
			name: "at most three nameservers", policy: v1.DNSNone,
			dnsConfig: &v1.PodDNSConfig{Nameservers: []string{"1.0.0.1", "1.0.0.2", "1.0.0.3", "1.0.0.4"}},
			want:      &runtimeapi.DNSConfig{Servers: []string{"1.0.0.1", "1.0.0.2", "1.0.0.3"}},
		},
		{
			name: "search list cut to 32 domains", policy: v1.DNSNone,
			dnsConfig: &v1.PodDNSConfig{Searches: longSearches},
			want:      &runtimeapi.DNSConfig{Searches: longSearches[:32]},
		},
		{
			name: "unreadable resolver file", resolv: filepath.Join(dir, "missing"), policy: v1.DNSDefault,
			wantErr: "read the host's resolver file",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{ResolvConf: tt.resolv, ClusterDNS: tt.clusterDNS, ClusterDomain: tt.domain}
			pod := &v1.Pod{
				ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "prod"},
				Spec:       v1.PodSpec{DNSPolicy: tt.policy, HostNetwork: tt.hostNet, DNSConfig: tt.dnsConfig},
			}
			got, err := c.For(pod)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %v\nwant %v", got, tt.want)
			}
		})
	}
}

func TestLimitSearchesByLength(t *testing.T) {
	long := strings.Repeat("x", 1000)
	got := limitSearches([]string{long, long, long})
	if len(got) != 2 {
		t.Errorf("kept %d domains of 1000 characters, want 2 (2001 <= 2048 < 3002)", len(got))
	}
}
