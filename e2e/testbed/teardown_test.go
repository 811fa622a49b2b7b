package testbed

import (
	"bufio"
	"slices"
	"strings"
	"testing"
)

func TestParseMountinfo(t *testing.T) {
	info := `27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
412 27 0:4 net:[4026532401] /run/netns/cni-1234 rw shared:5 - nsfs nsfs rw
413 27 0:55 / /tmp/bed\040dir/state/shm rw,nosuid - tmpfs shm rw,size=65536k
414 27 0:56 / /tmp/bed/rootfs rw master:1 shared:2 - overlay overlay rw,lowerdir=/x
garbage line
`
	mounts, err := parseMountinfo(bufio.NewScanner(strings.NewReader(info)))
	if err != nil {
		t.Fatalf("parseMountinfo: %v", err)
	}
	want := []mount{
		{Root: "/", Point: "/", FSType: "ext4"},
		{Root: "net:[4026532401]", Point: "/run/netns/cni-1234", FSType: "nsfs"},
		{Root: "/", Point: "/tmp/bed dir/state/shm", FSType: "tmpfs"},
		{Root: "/", Point: "/tmp/bed/rootfs", FSType: "overlay"},
	}
	if !slices.Equal(mounts, want) {
		t.Errorf("mounts =\n%+v\nwant\n%+v", mounts, want)
	}
}

func TestNetnsPath(t *testing.T) {
	tests := []struct {
		name string
		info string
		want string
	}{
		{
			name: "pod network",
			info: `{"pid":1,"runtimeSpec":{"linux":{"namespaces":[{"type":"pid"},{"type":"network","path":"/var/run/netns/cni-abc"}]}}}`,
			want: "/var/run/netns/cni-abc",
		},
		{
			name: "host network",
			info: `{"runtimeSpec":{"linux":{"namespaces":[{"type":"pid"},{"type":"ipc"}]}}}`,
		},
		{name: "not JSON", info: "{"},
		{name: "empty"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := netnsPath(tc.info); got != tc.want {
				t.Errorf("netnsPath = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestShimSocket(t *testing.T) {
	// containerd 1.6: sha256 of filepath.Join(address, namespace, id) in
	// hex, under /run/containerd/s; for "/run/containerd/containerd.sock",
	// "k8s.io", "abc": sha256("/run/containerd/containerd.sock/k8s.io/abc").
	got := shimSocket("/run/containerd/containerd.sock", "k8s.io", "abc")
	want := "/run/containerd/s/" + strings.TrimPrefix(digestOf([]byte("/run/containerd/containerd.sock/k8s.io/abc")), "sha256:")
	if got != want {
		t.Errorf("shimSocket = %s, want %s", got, want)
	}
}

func TestDescendants(t *testing.T) {
	children := map[int][]int{1: {10, 20}, 10: {11}, 11: {12}, 20: {}}
	got := descendants(children, 10)
	slices.Sort(got)
	if want := []int{11, 12}; !slices.Equal(got, want) {
		t.Errorf("descendants(10) = %v, want %v", got, want)
	}
	if got := descendants(children, 20); len(got) != 0 {
		t.Errorf("descendants(20) = %v, want none", got)
	}
}

func TestArgValue(t *testing.T) {
	args := []string{"/usr/bin/containerd-shim-runc-v2", "-namespace", "k8s.io", "-id", "abc", "-address", "/bed/containerd.sock"}
	tests := map[string]string{"-namespace": "k8s.io", "-id": "abc", "-address": "/bed/containerd.sock", "-missing": ""}
	for flag, want := range tests {
		if got := argValue(args, flag); got != want {
			t.Errorf("argValue(%s) = %q, want %q", flag, got, want)
		}
	}
	if got := argValue([]string{"x", "-address"}, "-address"); got != "" {
		t.Errorf("argValue of a trailing flag = %q, want empty", got)
	}
}

func TestHostPortRules(t *testing.T) {
	listing := `-N CNI-HOSTPORT-DNAT
-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"berth-testbed-6\" id: \"x1\"" -m multiport --dports 8080 -j CNI-DN-aaaa
-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"berth-testbed-60\" id: \"x2\"" -m multiport --dports 8081 -j CNI-DN-bbbb
-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"cbr0\" id: \"x3\"" -m multiport --dports 8082 -j CNI-DN-cccc
-A CNI-HOSTPORT-DNAT -p tcp -m comment --comment "dnat name: \"berth-testbed-60\" id: \"x4\"" -m multiport --dports 8083 -j CNI-DN-dddd
`
	rules := hostPortRules(listing, "berth-testbed-60")
	var chains []string
	for _, r := range rules {
		chains = append(chains, r.chain)
	}
	if want := []string{"CNI-DN-bbbb", "CNI-DN-dddd"}; !slices.Equal(chains, want) {
		t.Fatalf("chains = %v, want %v", chains, want)
	}
	wantSpec := []string{"CNI-HOSTPORT-DNAT", "-p", "tcp", "-m", "comment", "--comment", `dnat name: "berth-testbed-60" id: "x2"`, "-m", "multiport", "--dports", "8081", "-j", "CNI-DN-bbbb"}
	if !slices.Equal(rules[0].spec, wantSpec) {
		t.Errorf("spec = %q, want %q", rules[0].spec, wantSpec)
	}
	if rules := hostPortRules(listing, "berth-testbed-7"); len(rules) != 0 {
		t.Errorf("rules for an absent network: %v", rules)
	}
}

func TestSplitRule(t *testing.T) {
	tests := []struct {
		line string
		want []string
	}{
		{line: "", want: nil},
		{line: "-A X  -j Y", want: []string{"-A", "X", "-j", "Y"}},
		{line: `--comment "a b" -j Y`, want: []string{"--comment", "a b", "-j", "Y"}},
		{line: `--comment "say \"hi\"" x`, want: []string{"--comment", `say "hi"`, "x"}},
		{line: `--comment ""`, want: []string{"--comment", ""}},
	}
	for _, tc := range tests {
		if got := splitRule(tc.line); !slices.Equal(got, tc.want) {
			t.Errorf("splitRule(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}
