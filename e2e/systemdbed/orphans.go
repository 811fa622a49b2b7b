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
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
	PID1  int    `json:"pid1,omitempty"`
	// PID1Start identifies PID1 (its root, read from outside its mount
	// namespace, shows as "/": no use).
	PID1Start uint64 `json:"pid1Start,omitempty"`
	NSpawn    int    `json:"nspawn,omitempty"`
}

// newOwnedDir creates a directory in os.TempDir() named with dirPrefix
// and owned by this process (its owner file), so the next Start removes
// it should this process die without removing it.
func newOwnedDir() (string, error) {
	start, err := procStartTime(os.Getpid())
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return "", fmt.Errorf("create bed dir: %w", err)
	}
	owner, _ := json.Marshal(ownerFile{PID: os.Getpid(), Start: start})
	if err := os.WriteFile(filepath.Join(dir, "owner.json"), owner, 0o644); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("write owner file: %w", err)
	}
	return dir, nil
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
	if o.PID1Start, err = procStartTime(o.PID1); err != nil {
		return err
	}
	data, _ = json.Marshal(o)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		return fmt.Errorf("write owner file: %w", err)
	}
	return nil
}

// reapOrphans tears down the beds whose owner is gone (a test binary
// killed by -timeout): their machine is killed (its PID 1 known by its
// start time, so a recycled PID is never signalled), their overlay
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
		logf("systemdbed: removing %s of dead process %d", dir, o.PID)
		root := filepath.Join(dir, "root")
		if o.PID1 != 0 {
			if start, err := procStartTime(o.PID1); err == nil && start == o.PID1Start {
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
