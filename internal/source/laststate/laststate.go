package laststate

import (
	"bytes"
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

	"github.com/berth-agent/berth/internal/podrules"
	"github.com/berth-agent/berth/internal/podspec"
	v1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/berth-agent/berth/internal/statefile"
)

// stateVersion is the layout of a last-good state file. A file of another
// version is ignored, as a corrupt one would be.
const stateVersion = 1

// stateSuffix ends every state file; temporary files start with a dot and
// never end with it, so a write cut short by a kill is never read.
const stateSuffix = ".json"

// State persists each entry of one source (a manifest file of the
// file source, the URL body of the HTTP source) with the pods it currently
// yields after podsnapshot.KeepLastGood, so that a restart or a reboot while a manifest
// is broken runs the last good version instead of removing a running pod as
// an orphan. One file per entry, <dir>/<sha256 of the origin>.json, holding
// the origin, the decoded pods (identity, defaults and all: the same UID and
// spec as before the restart, so the agent adopts the running pod) and when
// they were accepted.
//
// The files are berth's own, but a corrupt, truncated, oversized, foreign
// or stale file is only ever ignored with a warning: the state can never
// stop berth from starting, it can only fail to help.
//
// A State belongs to its source's goroutine; it has no lock.
type State struct {
	dir      string // <state dir>/<source>; "" disables persistence
	source   string
	nodeName string
	maxBytes int64
	clock    clock.PassiveClock
	log      *slog.Logger

	// entries are the files present in dir, by origin, as written or
	// found at Load; stale ones are names without a known origin.
	entries map[string]*savedEntry
	stale   []string
	// broken says dir cannot be used (not ours, not creatable); persisting
	// is off and was logged once.
	broken bool
	// writeErr is the last write failure, logged once: the write is
	// retried on every Save.
	writeErr string
	// unsynced are the state files Stage wrote and Sync has not made
	// durable yet; dirUnsynced is set when the directory changed since.
	unsynced    []string
	dirUnsynced bool
}

// savedEntry is what one state file holds, to skip writes that would not
// change it.
type savedEntry struct {
	pods    []*v1.Pod         // the slice last saved: sources resend it unchanged
	objects []podspec.Object  // likewise
	sum     [sha256.Size]byte // of the encoded pods, lines and objects
}

// stateFile is the JSON layout of one state file.
type stateFile struct {
	Version  int        `json:"version"`
	Source   string     `json:"source"`
	Origin   string     `json:"origin"`
	NodeName string     `json:"nodeName"`
	Accepted time.Time  `json:"accepted"`
	Pods     []statePod `json:"pods"`
	// Objects are the entry's ConfigMaps and Secrets. Secrets are kept
	// in the clear: the file is berth's (0600, in a 0700 directory under
	// the root-only --root-dir), as the manifest it came from is root's;
	// without them a restart while the manifest is broken could not run
	// the pods that use them.
	Objects []podspec.Object `json:"objects,omitempty"`
}

// statePod is one kept pod with its line in the manifest, which duplicate
// problems name.
type statePod struct {
	Line int     `json:"line"`
	Pod  *v1.Pod `json:"pod"`
	// DerivedUID: the UID is berth's hash of the manifest (Result.DerivedUID).
	DerivedUID bool `json:"derivedUID,omitempty"`
}

// Config is what a source's State needs to know.
type Config struct {
	// StateDir is berth's state directory; "" disables persistence.
	StateDir string
	// Source names the source, and its directory under StateDir.
	Source string
	// NodeName is the node the pods are for; a state of another is stale.
	NodeName string
	// MaxBytes bounds a state file, as the manifest it came from is.
	MaxBytes int64
	Clock    clock.PassiveClock
	Log      *slog.Logger
}

// New returns the state of cfg.Source under cfg.StateDir, or a disabled
// one when no state dir is configured.
func New(cfg Config) *State {
	l := &State{source: cfg.Source, nodeName: cfg.NodeName, maxBytes: cfg.MaxBytes,
		clock: cfg.Clock, log: cfg.Log, entries: map[string]*savedEntry{}}
	if cfg.StateDir != "" {
		l.dir = filepath.Join(cfg.StateDir, cfg.Source)
	}
	return l
}

// stateName is the file name of an entry: a hash, so that no origin (a
// path, a URL) ever builds a path of its own under the state dir.
func stateName(origin string) string {
	sum := sha256.Sum256([]byte(origin))
	return hex.EncodeToString(sum[:]) + stateSuffix
}

// Load reads the persisted entries, by origin. Every file that cannot be
// used is logged and left for the next Save to remove; so are the
// temporary files of a write a kill cut short. A missing directory (a
// first start, a root dir of an earlier version) is simply no state.
func (l *State) Load() map[string]podspec.Result {
	if !l.ensureDir() {
		return nil
	}
	names, err := statefile.ListDir(l.dir)
	if err != nil {
		l.log.Warn("cannot list the last good manifests; starting without them", "dir", l.dir, "err", err)
		return nil
	}
	out := map[string]podspec.Result{}
	for _, name := range names {
		p := filepath.Join(l.dir, name)
		if !strings.HasSuffix(name, stateSuffix) || strings.HasPrefix(name, ".") {
			l.stale = append(l.stale, name)
			continue
		}
		sf, res, err := l.readEntry(p)
		if err == nil && stateName(sf.Origin) != name {
			err = fmt.Errorf("it is named for another origin than %q", sf.Origin)
		}
		if err != nil {
			l.log.Warn("ignoring a last good manifest state file", "file", p, "err", err)
			l.stale = append(l.stale, name)
			continue
		}
		out[sf.Origin] = res
		l.entries[sf.Origin] = &savedEntry{pods: res.Pods, objects: res.Objects, sum: sumState(sf)}
	}
	return out
}

// readEntry reads and checks one state file: a regular file of ours that
// no one else may write, within the size limit, of this version, source and
// node, whose pods are still valid and carry the identity of its origin.
func (l *State) readEntry(p string) (stateFile, podspec.Result, error) {
	data, err := statefile.ReadOwned(p, l.maxBytes)
	if err != nil {
		return stateFile{}, podspec.Result{}, err
	}
	return decodeState(data, l.source, l.nodeName)
}

// decodeState parses a state file and checks that its pods are what the
// source would deliver for its origin on this node. It never trusts the
// file: anything unexpected is an error.
func decodeState(data []byte, source, nodeName string) (stateFile, podspec.Result, error) {
	var sf stateFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&sf); err != nil {
		return sf, podspec.Result{}, fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return sf, podspec.Result{}, errors.New("trailing data after the state")
	}
	switch {
	case sf.Version != stateVersion:
		return sf, podspec.Result{}, fmt.Errorf("version %d, want %d", sf.Version, stateVersion)
	case sf.Source != source:
		return sf, podspec.Result{}, fmt.Errorf("source %q, want %q", sf.Source, source)
	case sf.NodeName != nodeName:
		// The node was renamed: every name and UID changed with it.
		return sf, podspec.Result{}, fmt.Errorf("node %q, this node is %q", sf.NodeName, nodeName)
	case sf.Origin == "":
		return sf, podspec.Result{}, errors.New("no origin")
	case len(sf.Pods) == 0 && len(sf.Objects) == 0:
		return sf, podspec.Result{}, errors.New("no pods")
	}
	var res podspec.Result
	for i, sp := range sf.Pods {
		pod := sp.Pod
		if pod == nil {
			return sf, podspec.Result{}, fmt.Errorf("pods[%d]: empty", i)
		}
		if err := podspec.CheckIdentity(pod, source, sf.Origin, nodeName); err != nil {
			return sf, podspec.Result{}, fmt.Errorf("pods[%d]: %w", i, err)
		}
		// A state of an earlier berth lacks the defaults added since;
		// defaults only fill what is unset, the UID stays.
		podrules.Default(pod)
		if errs := append(podrules.Validate(pod), podrules.CheckStandalone(pod)...); len(errs) > 0 {
			return sf, podspec.Result{}, fmt.Errorf("pods[%d] %q: %w", i, pod.Name, errs.ToAggregate())
		}
		res.AddRestored(pod, sp.Line, sp.DerivedUID)
	}
	for i, o := range sf.Objects {
		if (o.ConfigMap == nil) == (o.Secret == nil) {
			return sf, podspec.Result{}, fmt.Errorf("objects[%d]: must be one ConfigMap or one Secret", i)
		}
		if errs := podspec.CheckObject(&o); len(errs) > 0 {
			return sf, podspec.Result{}, fmt.Errorf("objects[%d] %s %q: %w", i, o.Kind(), o.Meta().Name, errs.ToAggregate())
		}
		res.Objects = append(res.Objects, o)
	}
	return sf, res, nil
}

// Save makes the state files match the entries: the pods of each origin
// written when they changed, the files of origins that are gone (or yield
// no pods) removed, with the stale files Load found. Sources call it before
// handing the same entries to the store, so a kill in between finds on disk
// at least what the agent was told. Failures are logged and retried on the
// next Save.
func (l *State) Save(entries map[string]podspec.Result) {
	l.Stage(entries)
	l.Sync()
}

// Stage is Save without the fsyncs: each changed entry is written and
// renamed into place, so a berth killed right after finds it, and Sync
// makes it survive a power cut. The file source stages, hands the pods to
// the store, and syncs while the agent starts them: two fsyncs take 3 to
// 100 ms on a busy disk, which a new pod would otherwise wait for. Only a
// power cut within that window can lose the entry (or leave it empty,
// which reads as no last good version), and a manifest read good a
// moment before is then still there.
func (l *State) Stage(entries map[string]podspec.Result) {
	if l.dir == "" || l.broken {
		return
	}
	for origin, res := range entries {
		if len(res.Pods) == 0 && len(res.Objects) == 0 {
			continue
		}
		if e := l.entries[origin]; e != nil && slices.Equal(e.pods, res.Pods) && slices.Equal(e.objects, res.Objects) {
			continue
		}
		l.write(origin, res)
	}
	removed := len(l.stale) > 0
	for origin := range l.entries {
		if res := entries[origin]; len(res.Pods) == 0 && len(res.Objects) == 0 {
			l.remove(stateName(origin), origin)
			removed = true
		}
	}
	l.stale = slices.DeleteFunc(l.stale, func(name string) bool { return l.remove(name, "") })
	if removed {
		// A removal lost to a power cut would bring back pods whose
		// manifest is gone, should that manifest come back broken.
		l.dirUnsynced = true
	}
}

// Sync makes what Stage wrote durable: each file written, then the
// directory (its renames and removals).
func (l *State) Sync() {
	for _, name := range l.unsynced {
		if err := statefile.SyncFile(filepath.Join(l.dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			l.log.Warn("cannot sync a last good manifest state file", "file", filepath.Join(l.dir, name), "err", err)
		}
	}
	if l.dirUnsynced {
		if err := statefile.SyncDir(l.dir); err != nil {
			l.log.Warn("cannot sync the state directory", "dir", l.dir, "err", err)
		}
	}
	l.unsynced, l.dirUnsynced = l.unsynced[:0], false
}

// write persists one entry atomically: a temporary file in the same
// directory, fsynced, renamed over the entry's file, and the directory
// fsynced so the rename survives a power cut. An entry larger than the
// manifest size limit is not persisted: its older state is removed instead,
// since running a version older than the last good one after a restart
// would be a surprise.
func (l *State) write(origin string, res podspec.Result) {
	sf := stateFile{Version: stateVersion, Source: l.source, Origin: origin, NodeName: l.nodeName,
		Accepted: l.clock.Now().UTC()}
	for i, p := range res.Pods {
		sf.Pods = append(sf.Pods, statePod{Line: res.Lines[i], Pod: p, DerivedUID: res.DerivedUID(i)})
	}
	sf.Objects = res.Objects
	sum := sumState(sf)
	if e := l.entries[origin]; e != nil && e.sum == sum {
		e.pods, e.objects = res.Pods, res.Objects // the same parsed again
		return
	}
	data, err := json.Marshal(sf)
	if err != nil {
		l.log.Warn("cannot encode the last good manifest", "origin", origin, "err", err)
		return
	}
	name := stateName(origin)
	if int64(len(data)) > l.maxBytes {
		l.log.Warn("the last good manifest is larger than the limit and is not kept across restarts",
			"origin", origin, "bytes", len(data), "limit", l.maxBytes)
		l.remove(name, origin)
		return
	}
	if err := statefile.Replace(l.dir, name, data, 0o600); err != nil {
		err = fmt.Errorf("write state file %s: %w", name, err)
		if err.Error() != l.writeErr {
			l.log.Warn("cannot persist the last good manifest; retrying", "origin", origin, "err", err)
			l.writeErr = err.Error()
		}
		return
	}
	l.writeErr = ""
	l.entries[origin] = &savedEntry{pods: res.Pods, objects: res.Objects, sum: sum}
	l.unsynced = append(l.unsynced, name)
	l.dirUnsynced = true
}

// remove deletes one state file, idempotently, and forgets the entry of
// origin when given. It reports whether the file is gone.
func (l *State) remove(name, origin string) bool {
	err := os.Remove(filepath.Join(l.dir, name))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		l.log.Warn("cannot remove a last good manifest state file", "file", filepath.Join(l.dir, name), "err", err)
		return false
	}
	if origin != "" {
		delete(l.entries, origin)
	}
	return true
}

// ensureDir creates the source's state directory (0700) and checks it is
// ours and writable by us alone; otherwise persisting is off, logged once.
func (l *State) ensureDir() bool {
	if l.dir == "" || l.broken {
		return false
	}
	// The parents as the runtime manager makes --root-dir (0750); only
	// the source's own directory is private.
	if err := statefile.MakePrivateDir(l.dir); err != nil {
		l.log.Warn("cannot use the state directory; last good manifests are not kept across restarts", "dir", l.dir, "err", err)
		l.broken = true
		return false
	}
	return true
}

// sumState hashes what a state file says apart from when it was accepted.
func sumState(sf stateFile) [sha256.Size]byte {
	// Marshalling decoded objects cannot fail: every field is plain data.
	b, _ := json.Marshal(struct {
		Pods    []statePod
		Objects []podspec.Object
	}{sf.Pods, sf.Objects})
	return sha256.Sum256(b)
}

// Drop removes the state of a source that is no longer configured:
// its pods are no longer wanted, and a state left behind would run them
// again if the source came back with a broken manifest.
func Drop(stateDir, source string, log *slog.Logger) {
	if stateDir == "" {
		return
	}
	dir := filepath.Join(stateDir, source)
	if err := os.RemoveAll(dir); err != nil {
		log.Warn("cannot remove the state of a source no longer configured", "dir", dir, "err", err)
	}
}
