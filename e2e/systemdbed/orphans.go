package systemdbed

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ownerFile is Dir/owner.json: which process owns the bed (its PID and
// start time, so a recycled PID is not taken for it) and, once booted,
// the machine's PID 1 and nspawn's PID.
type ownerFile struct {
	PID    int    `json:"pid"`
	Start  uint64 `json:"start"`
	PID1   int    `json:"pid1,omitempty"`
	NSpawn int    `json:"nspawn,omitempty"`
}

// saveState records the running machine in the owner file.
func (b *Bed) saveState() error {
	path := filepath.Join(b.Dir, "owner.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read owner file: %w", err)
	}
	var o ownerFile
	if err := json.Unmarshal(data, &o); err != nil {
		return fmt.Errorf("read owner file: %w", err)
	}
	b.mu.Lock()
	o.PID1, o.NSpawn = b.pid1, b.nspawn.Process.Pid
	b.mu.Unlock()
	data, _ = json.Marshal(o)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write owner file: %w", err)
	}
	return nil
}

// reapOrphans tears down the beds whose owner is gone (a test binary
// killed by -timeout): their machine is killed (checked to be theirs by
// its root directory, so a recycled PID is never signalled), their overlay
// unmounted, their directory removed. Their pods' host cgroups are left:
// their IDs died with the owner.
func reapOrphans(logf func(format string, args ...any)) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range dirs {
		data, err := os.ReadFile(filepath.Join(dir, "owner.json"))
		if err != nil {
			continue
		}
		var o ownerFile
		if json.Unmarshal(data, &o) != nil {
			continue
		}
		if start, err := procStartTime(o.PID); err == nil && start == o.Start {
			continue // its owner still runs
		}
		logf("systemdbed: tearing down the bed of dead process %d in %s", o.PID, dir)
		root := filepath.Join(dir, "root")
		if o.PID1 != 0 {
			if r, err := os.Readlink("/proc/" + strconv.Itoa(o.PID1) + "/root"); err == nil && r == root {
				_ = syscall.Kill(o.PID1, syscall.SIGKILL)
			}
		}
		if o.NSpawn != 0 {
			if cmd, err := os.ReadFile("/proc/" + strconv.Itoa(o.NSpawn) + "/cmdline"); err == nil && strings.Contains(string(cmd), root) {
				_ = syscall.Kill(o.NSpawn, syscall.SIGKILL)
			}
		}
		time.Sleep(500 * time.Millisecond)
		if err := unmountBelow(dir); err != nil {
			logf("systemdbed: %v", err)
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			logf("systemdbed: remove %s: %v", dir, err)
		}
	}
}

// procStartTime returns a process's start time (field 22 of
// /proc/PID/stat), which with its PID identifies it.
func procStartTime(pid int) (uint64, error) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("read stat of %d: %w", pid, err)
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat of %d: malformed", pid)
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 {
		return 0, fmt.Errorf("stat of %d: malformed", pid)
	}
	return strconv.ParseUint(fields[19], 10, 64)
}
