package volumes

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/podpath"
	"github.com/berth-agent/berth/internal/statefile"
)

// User namespaces (hostUsers: false; KEP-127, GA in Kubernetes 1.36). As
// the kubelet does, every such pod gets its own 65536 IDs of the host,
// container IDs 0-65535 mapped onto them, for UIDs and GIDs alike, so no
// two pods share a host ID and root in a pod is nobody on the host.

// usernsBlock is the size of one pod's ID range, the kubelet's.
const usernsBlock = 1 << 16

// The default range pods' IDs come from when /etc/subuid and /etc/subgid
// name none for the user berth: the upper half of the 32-bit ID space,
// far from the users and the subordinate ranges useradd hands out (from
// 100000 on), 16384 pods' worth.
const (
	defaultUsernsFirst  = 1 << 31
	defaultUsernsLength = 1 << 30
)

// usernsFile is the pod directory's record of its mapping. It outlives
// berth (a restarted berth gives an adopted pod's new containers the
// sandbox's mapping) and goes with the pod directory, which frees it.
const usernsFile = "userns"

// maxUsernsRecordBytes bounds a record when read: one is a short JSON
// object.
const maxUsernsRecordBytes = 4096

// UsernsMapping is a pod's mapping as recorded: container ID 0 is host ID
// HostID, for Length IDs, the same for UIDs and GIDs.
type UsernsMapping struct {
	HostID uint32 `json:"hostID"`
	Length uint32 `json:"length"`
}

// usernsAllocator hands out pods' ID blocks from [first, first+length).
// mu serializes allocations, so two pods created at once never pick the
// same free block: the choice reads every pod's record and writes its own
// under mu.
type usernsAllocator struct {
	mu            sync.Mutex
	first, length uint32
	// subIDFiles are Options.SubIDFiles, /etc/subuid and /etc/subgid.
	subIDFiles [2]string
	// loaded tells whether first and length were read yet (lazily, on the
	// first pod that needs them: most nodes never do).
	loaded  bool
	loadErr error
}

// load reads the range of the user berth from /etc/subuid and /etc/subgid
// (as the kubelet reads the user kubelet's), which must be the same for
// both, start at or above 65536 and be whole blocks; without an entry for
// berth, the default range.
func (a *usernsAllocator) load() error {
	if a.loaded {
		return a.loadErr
	}
	a.loaded = true
	var ranges [2][2]uint64
	found := 0
	for i, path := range a.subIDFiles {
		first, length, ok, err := readSubID(path, "berth")
		if err != nil {
			a.loadErr = err
			return err
		}
		if ok {
			ranges[i] = [2]uint64{first, length}
			found++
		}
	}
	switch {
	case found == 0:
		a.first, a.length = defaultUsernsFirst, defaultUsernsLength
		return nil
	case found == 1 || ranges[0] != ranges[1]:
		a.loadErr = fmt.Errorf("the ranges of user berth in %s and %s differ: give it the same range in both", a.subIDFiles[0], a.subIDFiles[1])
		return a.loadErr
	}
	first, length := ranges[0][0], ranges[0][1]
	if first < usernsBlock || first%usernsBlock != 0 || length < usernsBlock || length%usernsBlock != 0 || first+length > 1<<32-1 {
		a.loadErr = fmt.Errorf("the range of user berth in %s (%d, %d IDs) must start at a multiple of 65536 other than 0 and hold whole blocks of 65536 IDs", a.subIDFiles[0], first, length)
		return a.loadErr
	}
	a.first, a.length = uint32(first), uint32(length)
	return nil
}

// readSubID finds user's "user:first:count" line in a subordinate-ID file.
// A missing file is no entry.
func readSubID(path, user string) (first, length uint64, ok bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, 1<<20))
	for sc.Scan() {
		fields := strings.Split(strings.TrimSpace(sc.Text()), ":")
		if len(fields) != 3 || fields[0] != user {
			continue
		}
		first, err1 := strconv.ParseUint(fields[1], 10, 32)
		length, err2 := strconv.ParseUint(fields[2], 10, 32)
		if err1 != nil || err2 != nil {
			return 0, 0, false, fmt.Errorf("%s: bad line for user %s: %q", path, user, sc.Text())
		}
		return first, length, true, nil
	}
	return 0, 0, false, sc.Err()
}

// PodUserns is the pod's mapping: the one recorded in its pod directory,
// or a new free block, recorded (written, synced, renamed) before it is
// used, so a SIGKILL or a power cut at any point leaves either no record
// (nothing was started with it) or the one the sandbox has.
func (h *Host) PodUserns(uid types.UID) (UsernsMapping, error) {
	a := &h.userns
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.load(); err != nil {
		return UsernsMapping{}, err
	}
	podDir, err := h.PodDir(uid)
	if err != nil {
		return UsernsMapping{}, err
	}
	if mp, ok, err := readUserns(filepath.Join(podDir, usernsFile)); err != nil || ok {
		return mp, err
	}
	used, err := h.usedUsernsBlocks()
	if err != nil {
		return UsernsMapping{}, err
	}
	for host := uint64(a.first); host+usernsBlock <= uint64(a.first)+uint64(a.length); host += usernsBlock {
		if used[uint32(host)] {
			continue
		}
		mp := UsernsMapping{HostID: uint32(host), Length: usernsBlock}
		if err := podpath.MkdirAll(h.opts.RootDir, podDir, 0o750); err != nil {
			return UsernsMapping{}, fmt.Errorf("create the pod directory: %w", err)
		}
		if err := writeUserns(filepath.Join(podDir, usernsFile), mp); err != nil {
			return UsernsMapping{}, fmt.Errorf("record the user namespace of the pod: %w", err)
		}
		return mp, nil
	}
	return UsernsMapping{}, fmt.Errorf("no free range of 65536 IDs left for a user namespace (%d pods use one)", len(used))
}

// usedUsernsBlocks reads every pod directory's record.
func (h *Host) usedUsernsBlocks() (map[uint32]bool, error) {
	used := map[uint32]bool{}
	pods := filepath.Join(h.opts.RootDir, "pods")
	entries, err := os.ReadDir(pods)
	if errors.Is(err, fs.ErrNotExist) {
		return used, nil
	}
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		mp, ok, err := readUserns(filepath.Join(pods, e.Name(), usernsFile))
		if err != nil {
			return nil, err
		}
		if ok {
			used[mp.HostID] = true
		}
	}
	return used, nil
}

// readUserns reads a record; ok is false when there is none. A record is
// berth's own state file: one it did not write is refused, not trusted.
func readUserns(path string) (UsernsMapping, bool, error) {
	data, err := statefile.ReadOwned(path, maxUsernsRecordBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return UsernsMapping{}, false, nil
	}
	if err != nil {
		return UsernsMapping{}, false, fmt.Errorf("%s: %w", path, err)
	}
	var mp UsernsMapping
	if err := json.Unmarshal(data, &mp); err != nil || mp.Length != usernsBlock || mp.HostID%usernsBlock != 0 || mp.HostID == 0 {
		return UsernsMapping{}, false, fmt.Errorf("%s: not a user-namespace record of berth: %q", path, data)
	}
	return mp, true, nil
}

// writeUserns writes a record durably: temporary file, fsync, rename,
// fsync of the directory.
func writeUserns(path string, mp UsernsMapping) error {
	data, err := json.Marshal(mp)
	if err != nil {
		return err
	}
	return statefile.WriteAtomic(filepath.Dir(path), filepath.Base(path), data, 0o600)
}
