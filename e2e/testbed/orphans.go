package testbed

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// owner identifies the process a temporary bed belongs to: its PID and
// start time (clock ticks after boot, /proc/PID/stat field 22), so that a
// recycled PID is not taken for the owner.
type owner struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"`
}

// selfOwner returns the owner record of this process.
func selfOwner() (*owner, error) {
	pid := os.Getpid()
	start, err := procStartTime(pid)
	if err != nil {
		return nil, err
	}
	return &owner{PID: pid, StartTime: start}, nil
}

// alive reports whether the owner process still runs.
func (o *owner) alive() bool {
	start, err := procStartTime(o.PID)
	return err == nil && start == o.StartTime && procState(o.PID) != 'Z'
}

// procStartTime reads a process's start time from /proc/PID/stat.
func procStartTime(pid int) (uint64, error) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("read process %d: %w", pid, err)
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	// Fields after the command: state is field 3, starttime field 22.
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 20 {
		return 0, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
	}
	return start, nil
}

// reapOrphans tears down the temporary beds whose owner process died
// without closing them (a test binary killed by its -timeout, a crash), so
// one broken run does not leave containerds, shims and bridges to every
// later one. Beds from `testbed up` have no owner and are never reaped.
// Failures are logged, not returned: they are no reason to fail a new bed.
func reapOrphans(dir string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		bedDir, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		if err := reapOrphan(string(bedDir)); err != nil {
			slog.Warn("tear down an orphaned test bed", "dir", string(bedDir), "err", err)
		}
	}
}

// reapOrphan closes the bed in bedDir if its owner is dead. Renaming the
// state file first makes sure that of several processes finding the same
// orphan, only one tears it down.
func reapOrphan(bedDir string) error {
	state := filepath.Join(bedDir, stateFile)
	st, err := readState(state)
	if err != nil || st.Owner == nil || st.Owner.alive() {
		return nil
	}
	reaping := state + ".reaping"
	if err := os.Rename(state, reaping); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // another process got there first
		}
		return fmt.Errorf("claim orphan: %w", err)
	}
	b, err := attach(bedDir, reaping)
	if err != nil {
		return err
	}
	// The bed is ours now: should Close rewrite the state (restarting
	// containerd), other processes must see a live owner and keep off.
	if me, err := selfOwner(); err == nil {
		b.owner = me
	}
	slog.Info("tearing down an orphaned test bed", "dir", bedDir, "owner", st.Owner.PID)
	return b.Close()
}
