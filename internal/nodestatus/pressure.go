package nodestatus

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Pressure says which resources the node is short of: each field is empty,
// or the message of its pressure condition.
type Pressure struct {
	Memory, Disk, PID string
}

// The thresholds are the kubelet's default hard eviction thresholds
// (memory.available<100Mi, nodefs.available<10%, nodefs.inodesFree<5%),
// and for PIDs, which the kubelet leaves unset, fewer than 5% of pid_max
// free. berth evicts nothing: the conditions only tell the scheduler.
const (
	memoryAvailableMin = 100 << 20
	diskAvailableMin   = 0.10
	inodesFreeMin      = 0.05
	pidsFreeMin        = 0.05
)

// Measure reads the machine's memory, the file system holding rootDir and
// the PIDs in use; a figure it cannot read counts as no pressure.
func Measure(rootDir string) Pressure {
	var p Pressure
	if avail, ok := memAvailable(); ok && avail < memoryAvailableMin {
		p.Memory = fmt.Sprintf("memory available %s is below %s", quantity(avail), quantity(memoryAvailableMin))
	}
	var st unix.Statfs_t
	if err := unix.Statfs(rootDir, &st); err == nil && st.Blocks > 0 {
		switch {
		case float64(st.Bavail) < diskAvailableMin*float64(st.Blocks):
			p.Disk = fmt.Sprintf("%s has %s available, below 10%%", rootDir, quantity(int64(st.Bavail)*int64(st.Bsize)))
		case st.Files > 0 && float64(st.Ffree) < inodesFreeMin*float64(st.Files):
			p.Disk = fmt.Sprintf("%s has %d inodes free, below 5%%", rootDir, st.Ffree)
		}
	}
	if used, max, ok := pidsInUse(); ok && float64(max-used) < pidsFreeMin*float64(max) {
		p.PID = fmt.Sprintf("%d of %d PIDs in use, fewer than 5%% free", used, max)
	}
	return p
}

func quantity(b int64) string { return resource.NewQuantity(b, resource.BinarySI).String() }

// memAvailable is MemAvailable from /proc/meminfo, in bytes.
func memAvailable() (int64, bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		return kb * 1024, err == nil
	}
	return 0, false
}

// pidsInUse is the number of tasks (the fourth field of /proc/loadavg,
// "running/total") and kernel.pid_max.
func pidsInUse() (used, max int64, ok bool) {
	la, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0, 0, false
	}
	fields := strings.Fields(string(la))
	if len(fields) < 4 {
		return 0, 0, false
	}
	_, total, found := strings.Cut(fields[3], "/")
	pm, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if !found || err != nil {
		return 0, 0, false
	}
	used, err1 := strconv.ParseInt(total, 10, 64)
	max, err2 := strconv.ParseInt(strings.TrimSpace(string(pm)), 10, 64)
	return used, max, err1 == nil && err2 == nil && max > 0
}
