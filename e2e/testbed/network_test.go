package testbed

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
)

func TestNetworkFor(t *testing.T) {
	for _, n := range []int{1, 17, 254} {
		nw := networkFor(n)
		if len(nw.Bridge) > 15 {
			t.Errorf("bridge %q longer than IFNAMSIZ-1", nw.Bridge)
		}
		_, subnet, err := net.ParseCIDR(nw.Subnet)
		if err != nil {
			t.Fatalf("subnet %q: %v", nw.Subnet, err)
		}
		if ones, _ := subnet.Mask.Size(); ones != 24 {
			t.Errorf("subnet %s is not a /24", nw.Subnet)
		}
		if gw := net.ParseIP(nw.Gateway); gw == nil || !subnet.Contains(gw) {
			t.Errorf("gateway %s outside %s", nw.Gateway, nw.Subnet)
		}
	}
	if a, b := networkFor(1), networkFor(2); a.Name == b.Name || a.Bridge == b.Bridge || a.Subnet == b.Subnet {
		t.Errorf("networks 1 and 2 share a name: %+v %+v", a, b)
	}
}

func TestOverlaps(t *testing.T) {
	cidr := func(s string) *net.IPNet {
		ip, n, err := net.ParseCIDR(s)
		if err != nil {
			t.Fatal(err)
		}
		n.IP = ip // keep the host part, as interface addresses have it
		return n
	}
	tests := []struct {
		name string
		used []string
		want bool
	}{
		{name: "nothing used", want: false},
		{name: "default route only", used: []string{"0.0.0.0/0"}, want: false},
		{name: "other subnet", used: []string{"192.0.2.0/24", "10.231.18.0/24"}, want: false},
		{name: "same subnet", used: []string{"10.231.17.0/24"}, want: true},
		{name: "wider route", used: []string{"10.0.0.0/8"}, want: true},
		{name: "narrower route inside", used: []string{"10.231.17.128/25"}, want: true},
		{name: "address inside", used: []string{"10.231.17.5/32"}, want: true},
		{name: "interface address with host part", used: []string{"10.231.17.9/16"}, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var used []*net.IPNet
			for _, u := range tc.used {
				used = append(used, cidr(u))
			}
			_, subnet, _ := net.ParseCIDR("10.231.17.0/24")
			if got := overlaps(subnet, used); got != tc.want {
				t.Errorf("overlaps(%v) = %v, want %v", tc.used, got, tc.want)
			}
		})
	}
}

func TestReadRoutes(t *testing.T) {
	table := "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n" +
		"eth0\t00000000\t010200C0\t0003\t0\t0\t0\t00000000\t0\t0\t0\n" +
		"eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0\n"
	file := filepath.Join(t.TempDir(), "route")
	if err := os.WriteFile(file, []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	routes, err := readRoutes(file)
	if err != nil {
		t.Fatalf("readRoutes: %v", err)
	}
	var got []string
	for _, r := range routes {
		got = append(got, r.String())
	}
	want := []string{"0.0.0.0/0", "192.0.2.0/24"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("routes = %v, want %v", got, want)
	}
}

func TestPickNetwork(t *testing.T) {
	dir := t.TempDir()
	free := func(network) bool { return false }

	// Concurrent beds must all get different indexes.
	const beds = 20
	var mu sync.Mutex
	seen := map[int]string{}
	var wg sync.WaitGroup
	for i := range beds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bedDir := t.TempDir()
			n, err := pickNetwork(dir, bedDir, free)
			if err != nil {
				t.Errorf("bed %d: %v", i, err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if other, dup := seen[n.Index]; dup {
				t.Errorf("index %d given to %s and %s", n.Index, other, bedDir)
			}
			seen[n.Index] = bedDir
		}()
	}
	wg.Wait()

	// A claim whose bed dir is gone is stale and taken over; a network the
	// machine already uses is skipped.
	gone := filepath.Join(t.TempDir(), "gone")
	for i := 1; i <= 254; i++ {
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), []byte(t.TempDir()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{40, 41} {
		if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(i)), []byte(gone), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mine := t.TempDir()
	routed40 := func(n network) bool { return n.Index == 40 }
	n, err := pickNetwork(dir, mine, routed40)
	if err != nil {
		t.Fatalf("pickNetwork: %v", err)
	}
	if n.Index != 41 {
		t.Errorf("picked %d, want 41, the only stale claim whose network is free", n.Index)
	}
	if _, err := pickNetwork(dir, t.TempDir(), routed40); err == nil {
		t.Errorf("pickNetwork succeeded with every index claimed")
	}

	// Release drops only the bed's own claim.
	if err := releaseNetwork(dir, t.TempDir(), n); err != nil {
		t.Fatalf("releaseNetwork by another bed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "41")); err != nil {
		t.Errorf("another bed's release removed the claim: %v", err)
	}
	if err := releaseNetwork(dir, mine, n); err != nil {
		t.Fatalf("releaseNetwork: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "41")); !os.IsNotExist(err) {
		t.Errorf("claim 41 still there after release: %v", err)
	}
	if err := releaseNetwork(dir, mine, n); err != nil {
		t.Errorf("second releaseNetwork: %v", err)
	}
}

func TestCNIConflist(t *testing.T) {
	n := networkFor(17)
	data, err := cniConflist(n, "/bed/cni/ipam")
	if err != nil {
		t.Fatalf("cniConflist: %v", err)
	}
	var conf struct {
		Name    string `json:"name"`
		Plugins []struct {
			Type   string `json:"type"`
			Bridge string `json:"bridge"`
			IPMasq bool   `json:"ipMasq"`
			IPAM   struct {
				Type    string `json:"type"`
				DataDir string `json:"dataDir"`
				Ranges  [][]struct {
					Subnet string `json:"subnet"`
				} `json:"ranges"`
			} `json:"ipam"`
			Capabilities map[string]bool `json:"capabilities"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal(data, &conf); err != nil {
		t.Fatalf("conflist is not JSON: %v\n%s", err, data)
	}
	if conf.Name != n.Name || len(conf.Plugins) != 2 {
		t.Fatalf("conflist %s", data)
	}
	br, pm := conf.Plugins[0], conf.Plugins[1]
	if br.Type != "bridge" || br.Bridge != n.Bridge || br.IPMasq {
		t.Errorf("bridge plugin %+v", br)
	}
	if br.IPAM.Type != "host-local" || br.IPAM.DataDir != "/bed/cni/ipam" || len(br.IPAM.Ranges) != 1 || br.IPAM.Ranges[0][0].Subnet != n.Subnet {
		t.Errorf("ipam %+v", br.IPAM)
	}
	if pm.Type != "portmap" || !pm.Capabilities["portMappings"] {
		t.Errorf("portmap plugin %+v", pm)
	}
}
