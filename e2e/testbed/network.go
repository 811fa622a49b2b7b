package testbed

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// claimDir is where beds of every process on the machine claim their
// network index, so concurrent beds never share a bridge or subnet. A claim
// is a file named after the index holding the bed's Dir; it is stale once
// that Dir is gone.
const claimDir = "/run/berth-testbed"

// network is the CNI network of one bed. All its names derive from Index,
// so claiming the index claims them all.
type network struct {
	Index   int    `json:"index"`
	Name    string `json:"name"`    // CNI network name, also host-local's state dir name
	Bridge  string `json:"bridge"`  // at most 15 bytes, the kernel's IFNAMSIZ-1
	Subnet  string `json:"subnet"`  // the pod /24
	Gateway string `json:"gateway"` // the bridge's address, .1 of the subnet
}

// networkFor derives the network of index n (1..254): 10.231.n.0/24 on
// bridge berthtb<n>.
func networkFor(n int) network {
	return network{
		Index:   n,
		Name:    "berth-testbed-" + strconv.Itoa(n),
		Bridge:  "berthtb" + strconv.Itoa(n),
		Subnet:  fmt.Sprintf("10.231.%d.0/24", n),
		Gateway: fmt.Sprintf("10.231.%d.1", n),
	}
}

// pickNetwork claims a free network index for bedDir in dir. It starts at
// a random index so concurrent beds rarely contend, skips indexes whose
// network inUse reports as present on the machine (a route, address or
// link of the same name), and holds an exclusive flock on dir while it
// looks, so two processes cannot claim the same index.
func pickNetwork(dir, bedDir string, inUse func(network) bool) (network, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return network{}, fmt.Errorf("create claim dir: %w", err)
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return network{}, err
	}
	defer unlock()
	start := rand.IntN(254)
	for i := range 254 {
		n := networkFor(1 + (start+i)%254)
		claim := filepath.Join(dir, strconv.Itoa(n.Index))
		if owner, err := os.ReadFile(claim); err == nil {
			if _, err := os.Stat(string(owner)); err == nil {
				continue
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			return network{}, fmt.Errorf("read claim %s: %w", claim, err)
		}
		if inUse(n) {
			continue
		}
		if err := os.WriteFile(claim, []byte(bedDir), 0o644); err != nil {
			return network{}, fmt.Errorf("write claim %s: %w", claim, err)
		}
		return n, nil
	}
	return network{}, errors.New("no free test bed network: all of 10.231.1-254.0/24 are claimed or routed")
}

// releaseNetwork drops bedDir's claim on n, and only its own: a claim
// that another bed took over (after this one was gone) stays.
func releaseNetwork(dir, bedDir string, n network) error {
	unlock, err := lockDir(dir)
	if err != nil {
		return err
	}
	defer unlock()
	claim := filepath.Join(dir, strconv.Itoa(n.Index))
	owner, err := os.ReadFile(claim)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read claim %s: %w", claim, err)
	}
	if string(owner) != bedDir {
		return nil
	}
	if err := os.Remove(claim); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove claim %s: %w", claim, err)
	}
	return nil
}

// lockDir takes an exclusive flock on dir/.lock and returns its release.
func lockDir(dir string) (func(), error) {
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open claim lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock claim dir: %w", err)
	}
	return func() { f.Close() }, nil
}

// networkInUse reports whether n would clash with the machine's current
// network setup: a link with the bridge's name, or an IPv4 route or
// address overlapping the subnet (the default route excepted).
func networkInUse(n network) bool {
	if _, err := net.InterfaceByName(n.Bridge); err == nil {
		return true
	}
	_, subnet, err := net.ParseCIDR(n.Subnet)
	if err != nil {
		return true
	}
	var used []*net.IPNet
	if routes, err := readRoutes("/proc/net/route"); err == nil {
		used = append(used, routes...)
	}
	if addrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				used = append(used, ipn)
			}
		}
	}
	return overlaps(subnet, used)
}

// overlaps reports whether subnet shares an address with any of used,
// ignoring default routes (prefix length 0), which overlap everything.
func overlaps(subnet *net.IPNet, used []*net.IPNet) bool {
	for _, u := range used {
		if ones, _ := u.Mask.Size(); ones == 0 {
			continue
		}
		if u.Contains(subnet.IP) || subnet.Contains(u.IP.Mask(u.Mask)) {
			return true
		}
	}
	return false
}

// readRoutes parses the kernel's IPv4 routing table (/proc/net/route),
// whose destinations and masks are little-endian hex.
func readRoutes(file string) ([]*net.IPNet, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("read routes: %w", err)
	}
	defer f.Close()
	var routes []*net.IPNet
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 8 || fields[0] == "Iface" {
			continue
		}
		dst, err1 := hex.DecodeString(fields[1])
		mask, err2 := hex.DecodeString(fields[7])
		if err1 != nil || err2 != nil || len(dst) != 4 || len(mask) != 4 {
			continue
		}
		ip := make(net.IP, 4)
		binary.BigEndian.PutUint32(ip, binary.LittleEndian.Uint32(dst))
		m := make(net.IPMask, 4)
		binary.BigEndian.PutUint32(m, binary.LittleEndian.Uint32(mask))
		routes = append(routes, &net.IPNet{IP: ip, Mask: m})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read routes: %w", err)
	}
	return routes, nil
}

// cniConflist renders the bed's CNI network: a bridge with host-local IPAM
// (state kept in ipamDir, inside the bed) and portmap for hostPort. No IP
// masquerading: pods have nowhere to go, and it would leave iptables rules
// behind if a pod were torn down without CNI DEL.
func cniConflist(n network, ipamDir string) ([]byte, error) {
	type obj = map[string]any
	conf := obj{
		"cniVersion": "0.4.0",
		"name":       n.Name,
		"plugins": []obj{
			{
				"type":        "bridge",
				"bridge":      n.Bridge,
				"isGateway":   true,
				"ipMasq":      false,
				"hairpinMode": true,
				"ipam": obj{
					"type":    "host-local",
					"ranges":  [][]obj{{{"subnet": n.Subnet, "gateway": n.Gateway}}},
					"routes":  []obj{{"dst": "0.0.0.0/0"}},
					"dataDir": ipamDir,
				},
			},
			{"type": "portmap", "capabilities": obj{"portMappings": true}},
		},
	}
	data, err := json.MarshalIndent(conf, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("render CNI conflist: %w", err)
	}
	return data, nil
}
