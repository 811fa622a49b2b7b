package bench

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of /proc/PID/stat's CPU times. The kernel reports
// them in USER_HZ, which is 100 on every Linux ABI (getconf CLK_TCK).
const userHZ = 100

// cpuTicks is a process's user plus system CPU time, in USER_HZ ticks,
// from /proc/PID/stat (fields 14 and 15). It counts every thread, live or
// exited, which a per-thread reading would miss.
func cpuTicks(pid int) (int64, error) {
	return statTicks(pid, false)
}

// statTicks is cpuTicks, plus with children the time of the children the
// process has reaped (fields 16 and 17): a shim's reaped `runc exec` and
// `runc kill` runs, which do the work of probes and stops.
func statTicks(pid int, children bool) (int64, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read cpu time: %w", err)
	}
	// The command name is in parentheses and may hold blanks.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("pid %d: malformed stat", pid)
	}
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 15 {
		return 0, fmt.Errorf("pid %d: short stat", pid)
	}
	fields := f[11:13]
	if children {
		fields = f[11:15]
	}
	var sum int64
	for _, v := range fields {
		t, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("pid %d: stat times: %w", pid, err)
		}
		sum += t
	}
	return sum, nil
}

// cpuPercent turns a tick delta over a wall-clock window into percent of
// one core.
func cpuPercent(ticks int64, window time.Duration) float64 {
	return float64(ticks) / userHZ / window.Seconds() * 100
}

// memory is a process's resident set now and at its peak, in KiB, from
// /proc/PID/status, and the two parts of the resident set now: anonymous
// memory (heap, stacks) and file pages (for a Go agent, its binary's).
type memory struct {
	RSS, HWM, Anon, File int64
}

// readMemory reads VmRSS, VmHWM, RssAnon and RssFile.
func readMemory(pid int) (memory, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, fmt.Errorf("read memory: %w", err)
	}
	var m memory
	for _, line := range strings.Split(string(data), "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(val)
		if len(f) == 0 {
			continue
		}
		kib, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch key {
		case "VmRSS":
			m.RSS = kib
		case "VmHWM":
			m.HWM = kib
		case "RssAnon":
			m.Anon = kib
		case "RssFile":
			m.File = kib
		}
	}
	if m.RSS == 0 {
		return m, fmt.Errorf("pid %d: no VmRSS", pid)
	}
	return m, nil
}

// findProcs lists the PIDs whose command (argv[0]'s base name) is name and
// whose arguments contain marker: the bed's containerd is known by its
// config path, its shims by its socket.
func findProcs(name, marker string) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || len(cmdline) == 0 {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if filepath.Base(args[0]) == name && strings.Contains(string(cmdline), marker) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// groupTicks reads the CPU ticks of pids, with those of their reaped
// children; processes that are gone are skipped, since a shim may exit
// between listing and reading.
func groupTicks(pids []int) map[int]int64 {
	out := map[int]int64{}
	for _, pid := range pids {
		if t, err := statTicks(pid, true); err == nil {
			out[pid] = t
		}
	}
	return out
}

// groupDelta is the CPU used between two groupTicks readings by the
// processes present in both.
func groupDelta(before, after map[int]int64) int64 {
	var d int64
	for pid, a := range after {
		if b, ok := before[pid]; ok {
			d += a - b
		}
	}
	return d
}
