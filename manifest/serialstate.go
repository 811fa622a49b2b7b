package manifest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"k8s.io/utils/clock"
)

// serialVersion is the layout of a serial file; a file of another version
// is ignored, as a corrupt one is.
const serialVersion = 1

// maxSerialFileBytes bounds a serial file: a few dozen bytes and the origin.
const maxSerialFileBytes = 16 << 10

// errOlderSerial refuses a serial below the last one accepted.
var errOlderSerial = errors.New("older serial")

// serialState keeps the last serial accepted from each signed origin, in
// memory and under <state dir>/serials/<source>-<sha256 of the origin>.json,
// so that a replayed older body is refused after a restart too. Files are
// written atomically (write, fsync, rename, fsync the directory) before the
// body's pods reach the store, so after a kill the file is never older than
// what ran.
//
// A corrupt, foreign or unreadable file is ignored with a warning, as the
// last good state is: berth always starts. Only root can write there, and
// an atomic write leaves no torn file.
//
// A serialState belongs to its source's goroutine; it has no lock.
type serialState struct {
	dir    string // "" keeps serials in memory only
	source string
	clock  clock.PassiveClock
	log    *slog.Logger

	last     map[string]uint64 // by origin, once loaded
	writeErr string            // the last write failure, logged once
	broken   bool              // dir is unusable; logged once
}

// serialFile is the JSON layout of one serial file.
type serialFile struct {
	Version  int       `json:"version"`
	Source   string    `json:"source"`
	Origin   string    `json:"origin"`
	Serial   uint64    `json:"serial"`
	Accepted time.Time `json:"accepted"`
}

func newSerialState(cfg SourceConfig, source string, log *slog.Logger) *serialState {
	st := &serialState{source: source, clock: cfg.clock(), log: log, last: map[string]uint64{}}
	if cfg.StateDir != "" {
		st.dir = filepath.Join(cfg.StateDir, "serials")
	}
	return st
}

// serialName is the file of origin: a hash, so no origin builds a path.
func (st *serialState) serialName(origin string) string {
	sum := sha256.Sum256([]byte(origin))
	return st.source + "-" + hex.EncodeToString(sum[:]) + ".json"
}

// accept records n as the serial of origin unless it is below the last
// one accepted, which it then returns with errOlderSerial. An equal serial
// is the same version fetched again (a server that ignores conditional
// requests, a signature published anew): accepted without a write.
func (st *serialState) accept(origin string, n uint64) (uint64, error) {
	last, known := st.last[origin]
	if !known {
		last, known = st.load(origin)
		if known {
			st.last[origin] = last
		}
	}
	switch {
	case known && n < last:
		return last, errOlderSerial
	case known && n == last:
		return last, nil
	}
	st.last[origin] = n
	st.save(origin, n)
	return n, nil
}

// load reads the persisted serial of origin; false when there is none
// usable.
func (st *serialState) load(origin string) (uint64, bool) {
	if st.dir == "" {
		return 0, false
	}
	p := filepath.Join(st.dir, st.serialName(origin))
	data, err := readStateFile(p, maxSerialFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false
	}
	var sf serialFile
	if err == nil {
		sf, err = decodeSerial(data, st.source, origin)
	}
	if err != nil {
		st.log.Warn("ignoring the last accepted serial; the next signed body sets it again", "file", p, "err", err)
		return 0, false
	}
	return sf.Serial, true
}

// decodeSerial parses a serial file and checks it is of source and origin.
func decodeSerial(data []byte, source, origin string) (serialFile, error) {
	var sf serialFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sf); err != nil {
		return sf, fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return sf, errors.New("trailing data after the serial")
	}
	switch {
	case sf.Version != serialVersion:
		return sf, fmt.Errorf("version %d, want %d", sf.Version, serialVersion)
	case sf.Source != source || sf.Origin != origin:
		return sf, fmt.Errorf("serial of %s %q, want %s %q", sf.Source, sf.Origin, source, origin)
	}
	return sf, nil
}

// save persists the serial of origin; failures are logged once and the
// write retried with the next accepted serial. The serial stays in memory
// either way, so replays are refused until berth restarts.
func (st *serialState) save(origin string, n uint64) {
	if st.dir == "" || !st.ensureDir() {
		return
	}
	data, _ := json.Marshal(serialFile{Version: serialVersion, Source: st.source, Origin: origin, Serial: n,
		Accepted: st.clock.Now().UTC()}) // plain data: cannot fail
	if err := writeAtomic(st.dir, st.serialName(origin), data); err != nil {
		if err.Error() != st.writeErr {
			st.log.Warn("cannot persist the accepted serial; a replayed older body would be refused only until berth restarts",
				"origin", origin, "err", err)
			st.writeErr = err.Error()
		}
		return
	}
	st.writeErr = ""
}

// ensureDir creates the serials directory (0700) and checks it is ours
// alone; otherwise serials are not persisted, logged once.
func (st *serialState) ensureDir() bool {
	if st.broken {
		return false
	}
	if err := MakePrivateDir(st.dir); err != nil {
		st.log.Warn("cannot use the serials directory; accepted serials are not kept across restarts", "dir", st.dir, "err", err)
		st.broken = true
		return false
	}
	return true
}

// readStateFile reads a file berth wrote under its state dir: never a
// symlink, never blocking, ours alone, and within limit bytes.
func readStateFile(p string, limit int64) ([]byte, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if err := OwnedByUs(info, false); err != nil {
		return nil, err
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("larger than the limit of %d bytes", limit)
	}
	return data, nil
}
