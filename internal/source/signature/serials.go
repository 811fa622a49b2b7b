package signature

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/berth-agent/berth/internal/podspec"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/statefile"
)

// serialVersion is the layout of a source's serial file; a file of another
// version is ignored, as a corrupt one is.
const serialVersion = 2

// legacySerialVersion is the layout of the serial files of an earlier
// berth, one per origin, which load migrates (see Serials.legacy).
const legacySerialVersion = 1

// Bounds of the serial state of one source. Live entries (a pod or object
// a manifest holds now, a file present, the URL) are evicted only when
// they alone pass the bound; entries of pods and files long gone go first,
// the oldest accepted first. maxSerialFileBytes bounds the file they make
// (a name is at most 330 bytes, so names need under 4 MiB; paths are what
// --pod-manifest-path and a file name make): a state past it is kept in
// memory only, with a warning.
const (
	maxSerialNames     = 8192
	maxSerialOrigins   = 1024
	maxSerialFileBytes = 8 << 20
	// maxLegacySerialBytes bounds one serial file of an earlier berth.
	maxLegacySerialBytes = 16 << 10
)

// Serials keeps the serials a signed source accepted, so that no
// older signed version of a pod runs again, whatever manifest it comes in:
//
//   - per name (a pod's full name, name_namespace, or a ConfigMap's or
//     Secret's kind, name and namespace: Key), the highest serial of
//     an accepted body that defined it, or replaced or removed it from the
//     manifest it came from. A body is refused when anything it defines or
//     replaces has a higher serial: an old signed body dropped under
//     another file name, or served at another URL, never runs.
//   - per origin (a manifest file's path, the URL), the highest serial
//     accepted from it: an old body that would empty a file, or defines
//     only pods long removed from it, is refused there too.
//
// An equal serial is accepted: it is the same version read again (after a
// restart, from a server that ignores conditional requests), and two
// manifests signed with the same serial are the same version as far as
// berth can tell; which of two such files defines a pod is decided as for
// any duplicate name, the first by name.
//
// Both are kept in memory and under <state dir>/serials/<source>.json,
// written atomically (write, fsync, rename, fsync the directory) by Flush,
// which sources call before the accepted body's pods reach the store, so
// after a kill the file is never older than what ran. Entries of pods and
// files that are gone stay (a body dropped back later is still refused),
// within maxSerialNames and maxSerialOrigins.
//
// A corrupt, foreign or unreadable file is ignored with a warning, as the
// last good state is: berth always starts. Only root can write there, and
// an atomic write leaves no torn file.
//
// A Serials belongs to its source's goroutine; it has no lock.
type Serials struct {
	dir    string // "" keeps serials in memory only
	source string
	clock  clock.PassiveClock
	log    *slog.Logger

	loaded  bool
	origins map[string]serialEntry
	names   map[string]serialEntry
	// legacy are the serials of origins read from an earlier berth's
	// per-origin files that were not yet given to the names the origin
	// defines (Adopt); legacyFiles are those files, removed once the
	// state is written in its own file.
	legacy      map[string]uint64
	legacyFiles []string
	dirty       bool   // changed since the last write
	writeErr    string // the last write failure, logged once
	broken      bool   // dir is unusable; logged once
	overflow    bool   // live entries past the bound were evicted; logged once
}

// serialEntry is one accepted serial and when it was first accepted, to
// evict the oldest first.
type serialEntry struct {
	Serial   uint64    `json:"serial"`
	Accepted time.Time `json:"accepted"`
}

// serialFile is the JSON layout of a source's serial file.
type serialFile struct {
	Version int                    `json:"version"`
	Source  string                 `json:"source"`
	Origins map[string]serialEntry `json:"origins"`
	Names   map[string]serialEntry `json:"names"`
}

// legacySerialFile is the JSON layout of an earlier berth's serial file of
// one origin, <source>-<sha256 of the origin>.json.
type legacySerialFile struct {
	Version  int       `json:"version"`
	Source   string    `json:"source"`
	Origin   string    `json:"origin"`
	Serial   uint64    `json:"serial"`
	Accepted time.Time `json:"accepted"`
}

// NewSerials returns the serials of source under stateDir, kept in memory
// only when stateDir is "".
func NewSerials(stateDir, source string, clk clock.PassiveClock, log *slog.Logger) *Serials {
	st := &Serials{source: source, clock: clk, log: log,
		origins: map[string]serialEntry{}, names: map[string]serialEntry{}, legacy: map[string]uint64{}}
	if stateDir != "" {
		st.dir = filepath.Join(stateDir, "serials")
	}
	return st
}

// Key is the name a pod (its full name) or an object (its kind,
// then its full name) is kept under. Neither a pod's name nor a
// namespace holds "/" or "_", so keys never collide and split back.
func Key(kind, name, namespace string) string {
	if kind == "" {
		return podspec.JoinFullName(name, namespace)
	}
	return kind + "/" + podspec.JoinFullName(name, namespace)
}

// DescribeKey names what a key stands for, for problems.
func DescribeKey(key string) string {
	kind, full, ok := strings.Cut(key, "/")
	if !ok {
		kind, full = "pod", key
	}
	name, namespace, _ := strings.Cut(full, "_")
	return fmt.Sprintf("%s %q in namespace %q", kind, name, namespace)
}

// Keys are the keys of what a result holds: its pods, then its
// objects, in order.
func Keys(res podspec.Result) []string {
	keys := make([]string, 0, len(res.Pods)+len(res.Objects))
	for _, p := range res.Pods {
		keys = append(keys, Key("", p.Name, p.Namespace))
	}
	for _, o := range res.Objects {
		keys = append(keys, Key(o.Identity()))
	}
	return keys
}

// legacyName is the file of origin in an earlier berth's layout.
func (st *Serials) legacyName(origin string) string {
	sum := sha256.Sum256([]byte(origin))
	return st.source + "-" + hex.EncodeToString(sum[:]) + ".json"
}

// fileName is the source's serial file.
func (st *Serials) fileName() string { return st.source + ".json" }

// conflict returns what of keys (or "" for origin itself) has a serial
// above n, and that serial; ok is false when nothing does.
func (st *Serials) conflict(origin string, keys []string, n uint64) (key string, last uint64, ok bool) {
	st.load()
	if e, known := st.origins[origin]; known && e.Serial > n {
		return "", e.Serial, true
	}
	for _, k := range keys {
		if e, known := st.names[k]; known && e.Serial > n {
			return k, e.Serial, true
		}
	}
	return "", 0, false
}

// SerialOf is the serial recorded for key.
func (st *Serials) SerialOf(key string) (uint64, bool) {
	st.load()
	e, ok := st.names[key]
	return e.Serial, ok
}

// OriginSerial is the highest serial accepted from origin: no body origin
// yielded before is newer.
func (st *Serials) OriginSerial(origin string) (uint64, bool) {
	st.load()
	e, ok := st.origins[origin]
	return e.Serial, ok
}

// record raises origin and keys to n (a serial conflict did not refuse);
// Flush persists it.
func (st *Serials) record(origin string, keys []string, n uint64) {
	st.load()
	now := st.clock.Now().UTC()
	raise := func(m map[string]serialEntry, k string) {
		if e, ok := m[k]; !ok || e.Serial < n {
			m[k] = serialEntry{Serial: n, Accepted: now}
			st.dirty = true
		}
	}
	raise(st.origins, origin)
	for _, k := range keys {
		raise(st.names, k)
	}
	delete(st.legacy, origin)
}

// Adopt gives the names an origin holds (its last good pods, restored at
// start) the serial an earlier berth, which kept serials per origin only,
// accepted from it: that is how an upgrade keeps every pod it ran
// protected, including from a replay under another name.
func (st *Serials) Adopt(origin string, keys []string) {
	st.load()
	n, ok := st.legacy[origin]
	if !ok {
		return
	}
	now := st.clock.Now().UTC()
	for _, k := range keys {
		if e, known := st.names[k]; !known || e.Serial < n {
			st.names[k] = serialEntry{Serial: n, Accepted: now}
			st.dirty = true
		}
	}
	delete(st.legacy, origin)
}

// load reads the persisted state once: the source's file, and the
// per-origin files of an earlier berth, whose serials become origin
// serials (migrate on the next Flush).
func (st *Serials) load() {
	if st.loaded {
		return
	}
	st.loaded = true
	if st.dir == "" {
		return
	}
	p := filepath.Join(st.dir, st.fileName())
	data, err := statefile.ReadOwned(p, maxSerialFileBytes)
	if err == nil {
		var sf serialFile
		if sf, err = decodeSerial(data, st.source); err == nil {
			st.origins, st.names = sf.Origins, sf.Names
		}
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		st.log.Warn("ignoring the accepted serials; the next signed bodies set them again", "file", p, "err", err)
	}
	st.loadLegacy()
}

// loadLegacy reads the per-origin serial files of an earlier berth.
func (st *Serials) loadLegacy() {
	names, err := statefile.ListDir(st.dir)
	if err != nil {
		st.log.Warn("cannot list the accepted serials of an earlier version", "dir", st.dir, "err", err)
		return
	}
	for _, name := range names {
		if !strings.HasPrefix(name, st.source+"-") || !strings.HasSuffix(name, ".json") {
			continue
		}
		p := filepath.Join(st.dir, name)
		st.legacyFiles = append(st.legacyFiles, name)
		data, err := statefile.ReadOwned(p, maxLegacySerialBytes)
		var lf legacySerialFile
		if err == nil {
			lf, err = decodeLegacySerial(data, st.source)
		}
		if err == nil && st.legacyName(lf.Origin) != name {
			err = fmt.Errorf("it is named for another origin than %q", lf.Origin)
		}
		if err != nil {
			st.log.Warn("ignoring an accepted serial of an earlier version", "file", p, "err", err)
			continue
		}
		if e, ok := st.origins[lf.Origin]; !ok || e.Serial < lf.Serial {
			st.origins[lf.Origin] = serialEntry{Serial: lf.Serial, Accepted: lf.Accepted}
		}
		if lf.Serial > st.legacy[lf.Origin] {
			st.legacy[lf.Origin] = lf.Serial
		}
		st.dirty = true
	}
}

// decodeSerial parses a source's serial file and checks it is of source
// and within the bounds.
func decodeSerial(data []byte, source string) (serialFile, error) {
	var sf serialFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sf); err != nil {
		return serialFile{}, fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return serialFile{}, errors.New("trailing data after the serials")
	}
	switch {
	case sf.Version != serialVersion:
		return serialFile{}, fmt.Errorf("version %d, want %d", sf.Version, serialVersion)
	case sf.Source != source:
		return serialFile{}, fmt.Errorf("serials of source %q, want %q", sf.Source, source)
	case len(sf.Origins) > maxSerialOrigins:
		return serialFile{}, fmt.Errorf("%d origins, more than the bound of %d", len(sf.Origins), maxSerialOrigins)
	case len(sf.Names) > maxSerialNames:
		return serialFile{}, fmt.Errorf("%d names, more than the bound of %d", len(sf.Names), maxSerialNames)
	}
	_, emptyOrigin := sf.Origins[""]
	_, emptyName := sf.Names[""]
	if emptyOrigin || emptyName {
		return serialFile{}, errors.New("an empty origin or name")
	}
	if sf.Origins == nil {
		sf.Origins = map[string]serialEntry{}
	}
	if sf.Names == nil {
		sf.Names = map[string]serialEntry{}
	}
	return sf, nil
}

// decodeLegacySerial parses an earlier berth's serial file of one origin
// and checks it is of source.
func decodeLegacySerial(data []byte, source string) (legacySerialFile, error) {
	var lf legacySerialFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&lf); err != nil {
		return legacySerialFile{}, fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return legacySerialFile{}, errors.New("trailing data after the serial")
	}
	switch {
	case lf.Version != legacySerialVersion:
		return legacySerialFile{}, fmt.Errorf("version %d, want %d", lf.Version, legacySerialVersion)
	case lf.Source != source:
		return legacySerialFile{}, fmt.Errorf("serial of source %q, want %q", lf.Source, source)
	case lf.Origin == "":
		return legacySerialFile{}, errors.New("no origin")
	}
	return lf, nil
}

// Flush bounds the state and persists it when it changed. live reports
// the origins and names the source holds now, which eviction keeps; it is
// called only when a bound is passed. Failures are logged once and the
// write retried at the next Flush; the serials stay in memory either way,
// so replays are refused until berth restarts.
func (st *Serials) Flush(live func() (origins, names sets.Set[string])) {
	if !st.dirty {
		return
	}
	if len(st.origins) > maxSerialOrigins || len(st.names) > maxSerialNames {
		liveOrigins, liveNames := live()
		st.evict(st.origins, maxSerialOrigins, liveOrigins)
		st.evict(st.names, maxSerialNames, liveNames)
	}
	if st.dir == "" || !st.ensureDir() {
		st.dirty = false
		return
	}
	data, _ := json.Marshal(serialFile{Version: serialVersion, Source: st.source,
		Origins: st.origins, Names: st.names}) // plain data: cannot fail
	if len(data) > maxSerialFileBytes {
		st.writeFailed(fmt.Errorf("the serials take %d bytes, more than the limit of %d", len(data), maxSerialFileBytes))
		return
	}
	if err := statefile.WriteAtomic(st.dir, st.fileName(), data, 0o600); err != nil {
		err = fmt.Errorf("write state file %s: %w", st.fileName(), err)
		st.writeFailed(err)
		return
	}
	st.writeErr, st.dirty = "", false
	for _, name := range st.legacyFiles {
		if err := os.Remove(filepath.Join(st.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			st.log.Warn("cannot remove an accepted serial of an earlier version", "file", filepath.Join(st.dir, name), "err", err)
		}
	}
	st.legacyFiles = nil
}

func (st *Serials) writeFailed(err error) {
	if err.Error() != st.writeErr {
		st.log.Warn("cannot persist the accepted serials; a replayed older body would be refused only until berth restarts",
			"dir", st.dir, "err", err)
		st.writeErr = err.Error()
	}
}

// evict removes entries of m beyond limit: those not live first, then (a
// source holding more than the bound, logged once) live ones, the oldest
// accepted first.
func (st *Serials) evict(m map[string]serialEntry, limit int, live sets.Set[string]) {
	if len(m) <= limit {
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if la, lb := live.Has(a), live.Has(b); la != lb {
			if la {
				return 1
			}
			return -1
		}
		return cmp.Or(m[a].Accepted.Compare(m[b].Accepted), strings.Compare(a, b))
	})
	for _, k := range keys[:len(m)-limit] {
		if live.Has(k) && !st.overflow {
			st.log.Warn("more signed pods, objects or files than the serials kept of them; the oldest lose their replay protection",
				"limit", limit)
			st.overflow = true
		}
		delete(m, k)
	}
}

// ensureDir creates the serials directory (0700) and checks it is ours
// alone; otherwise serials are not persisted, logged once.
func (st *Serials) ensureDir() bool {
	if st.broken {
		return false
	}
	if err := statefile.MakePrivateDir(st.dir); err != nil {
		st.log.Warn("cannot use the serials directory; accepted serials are not kept across restarts", "dir", st.dir, "err", err)
		st.broken = true
		return false
	}
	return true
}
