package rollback

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
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/statefile"
)

// rollbackStateVersion is the layout of a rollback state file: 2 keys a
// record by source, origin and full name (Key). Layout 1 keyed it
// by full name alone; such a file is rewritten on load (decodeRollbackState
// says what of it is kept). A file of any other version is ignored, as a
// corrupt one is.
const (
	rollbackStateVersion       = 2
	rollbackStateVersionByName = 1
)

// maxRollbackStateBytes bounds a state file: one pod spec and a few lines.
// A pod larger than this (a manifest holds at most a few MiB) is not kept
// across restarts, and says so in the log.
const maxRollbackStateBytes = 4 << 20

// nameRecord is what berth knows of the versions of one Key (a
// full name as one manifest serves it), persisted as one file: the last
// version that was Ready (not the last *valid* one, which the sources keep
// as their last good manifest: a valid manifest may still crash-loop), and
// the rollback in force, if any.
type nameRecord struct {
	// LastReady is the last version of the full name whose pod was Ready
	// for the settle time, as the store delivered it.
	LastReady *v1.Pod   `json:"lastReady,omitempty"`
	ReadyAt   time.Time `json:"readyAt,omitzero"`
	// RolledBack is set while LastReady runs in place of a newer version
	// that failed; it ends when the manifest changes again.
	RolledBack *rollback `json:"rolledBack,omitempty"`
}

// rollback is one rollback in force: the bad version (by UID, which is the
// manifest's hash) and why, and the good version run in its place.
type rollback struct {
	Bad       types.UID `json:"bad"`
	BadSource string    `json:"badSource"`
	BadOrigin string    `json:"badOrigin"`
	Good      types.UID `json:"good"`
	At        time.Time `json:"at"`
	Reason    string    `json:"reason"`
	Message   string    `json:"message"`
}

// rollbackFile is the JSON layout of one state file.
type rollbackFile struct {
	Version  int    `json:"version"`
	NodeName string `json:"nodeName"`
	// Source and Origin name the manifest the record belongs to; a
	// layout-1 file has neither.
	Source   string `json:"source"`
	Origin   string `json:"origin"`
	FullName string `json:"fullName"`
	nameRecord
	// dropped is the rollback of a layout-1 file that a decode left out:
	// its failed version came from another manifest than the last Ready
	// one.
	dropped *rollback
}

func (rf *rollbackFile) key() Key {
	return Key{Source: rf.Source, Origin: rf.Origin, FullName: rf.FullName}
}

// fileName is the name the file must have.
func (rf *rollbackFile) fileName() string {
	if rf.Version == rollbackStateVersionByName {
		return rollbackStateNameByName(rf.FullName)
	}
	return rollbackStateName(rf.key())
}

// rollbackState persists the records under <root-dir>/rollback, one file
// per Key (<sha256 of source, origin and full name>.json), each
// written atomically (write, fsync, rename, fsync the directory), so a
// SIGKILL or a power cut leaves the old record or the new, never a mix. A file that is
// corrupt, foreign or stale is ignored with a warning: the state can only
// fail to help, never stop berth.
//
// It has no lock: the rollbacks' mutex guards every call.
type rollbackState struct {
	dir      string // "" keeps nothing across restarts
	nodeName string
	log      *slog.Logger
	// broken says dir cannot be used; persisting is off and was logged.
	broken bool
}

// rollbackStateName is the file of k's record. NUL separates the parts:
// none of them holds one.
func rollbackStateName(k Key) string {
	sum := sha256.Sum256([]byte(k.Source + "\x00" + k.Origin + "\x00" + k.FullName))
	return hex.EncodeToString(sum[:]) + ".json"
}

// rollbackStateNameByName is the file of a layout-1 record.
func rollbackStateNameByName(fullName string) string {
	sum := sha256.Sum256([]byte(fullName))
	return hex.EncodeToString(sum[:]) + ".json"
}

// load returns every usable record by key, removing the files that cannot
// be used (and the temporary files of a write a kill cut short), so they
// are not warned about at every start. Layout-1 files are rewritten in the
// current layout; a current file of the same key wins over one.
func (s *rollbackState) load() map[Key]*nameRecord {
	out := map[Key]*nameRecord{}
	if !s.ensureDir() {
		return out
	}
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		s.log.Warn("cannot list the rollback state; starting without it", "dir", s.dir, "err", err)
		return out
	}
	type old struct {
		path string
		rf   rollbackFile
	}
	var olds []old
	for _, e := range entries {
		p := filepath.Join(s.dir, e.Name())
		if strings.HasPrefix(e.Name(), ".") || !strings.HasSuffix(e.Name(), ".json") {
			s.removeFile(p)
			continue
		}
		rf, err := s.read(p)
		if err == nil && rf.fileName() != e.Name() {
			err = fmt.Errorf("it is named for another pod than %q of %s %q", rf.FullName, rf.Source, rf.Origin)
		}
		if err != nil {
			s.log.Warn("ignoring a rollback state file", "file", p, "err", err)
			s.removeFile(p)
			continue
		}
		if rf.Version == rollbackStateVersionByName {
			olds = append(olds, old{p, rf})
			continue
		}
		rec := rf.nameRecord
		out[rf.key()] = &rec
	}
	for _, o := range olds {
		k := o.rf.key()
		if out[k] != nil {
			s.removeFile(o.path)
			continue
		}
		if rb := o.rf.dropped; rb != nil {
			s.log.Warn("dropping a rollback from an older berth: the failed version came from another manifest than the last Ready version, which is no rollback target for it; the failed version gets a new trial",
				append(k.logKeys(), "uid", rb.Good, "failed_uid", rb.Bad, "failed_source", rb.BadSource, "failed_origin", rb.BadOrigin)...)
		}
		rec := o.rf.nameRecord
		out[k] = &rec
		if err := s.save(k, &rec); err != nil {
			s.log.Warn("cannot rewrite a rollback state file in the current layout; it is read again at the next start", append(k.logKeys(), "file", o.path, "err", err)...)
			continue
		}
		s.removeFile(o.path)
	}
	return out
}

// read opens and checks one file: a regular file of ours, writable by no
// one else, within the size limit.
func (s *rollbackState) read(p string) (rollbackFile, error) {
	data, err := statefile.ReadOwned(p, maxRollbackStateBytes)
	if err != nil {
		return rollbackFile{}, err
	}
	return decodeRollbackState(data, s.nodeName)
}

// decodeRollbackState parses a state file and checks it against this node:
// the kept pod must be a valid static pod of the file's full name, source
// and origin, and a rollback must name it as its good version and a failed
// version of the same source and origin. It trusts nothing in the file.
//
// A layout-1 file names no source or origin: its record is attributed to
// those its kept pod carries (kubernetes.io/config.source and
// berth.io/config.origin, which CheckKeptPod requires, so a file without
// them is refused and dropped), and its rollback is kept only if its failed
// version came from that same source and origin. Otherwise it is left out
// (in dropped): such a rollback ran one manifest's version in place of
// another's, the very thing Key forbids.
func decodeRollbackState(data []byte, nodeName string) (rollbackFile, error) {
	var rf rollbackFile
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rf); err != nil {
		return rf, fmt.Errorf("decode: %w", err)
	}
	if dec.More() {
		return rf, errors.New("trailing data after the state")
	}
	switch {
	case rf.Version != rollbackStateVersion && rf.Version != rollbackStateVersionByName:
		return rf, fmt.Errorf("version %d, want %d", rf.Version, rollbackStateVersion)
	case rf.NodeName != nodeName:
		return rf, fmt.Errorf("node %q, this node is %q", rf.NodeName, nodeName)
	case rf.LastReady == nil:
		return rf, errors.New("no last Ready version")
	}
	if err := podspec.CheckKeptPod(rf.LastReady, nodeName); err != nil {
		return rf, fmt.Errorf("last Ready version: %w", err)
	}
	if fn := podspec.FullName(rf.LastReady); fn != rf.FullName {
		return rf, fmt.Errorf("last Ready version is of %q, not %q", fn, rf.FullName)
	}
	k := KeyOf(rf.LastReady)
	if rf.Version == rollbackStateVersionByName {
		if rf.Source != "" || rf.Origin != "" {
			return rf, fmt.Errorf("version %d names a source or origin", rf.Version)
		}
		rf.Source, rf.Origin = k.Source, k.Origin
		if rb := rf.RolledBack; rb != nil && (rb.BadSource != k.Source || rb.BadOrigin != k.Origin) {
			rf.RolledBack, rf.dropped = nil, rb
		}
	}
	if rf.Source != k.Source || rf.Origin != k.Origin {
		return rf, fmt.Errorf("last Ready version was read from %s %q, not %s %q", k.Source, k.Origin, rf.Source, rf.Origin)
	}
	if rb := rf.RolledBack; rb != nil {
		switch {
		case rb.Good != rf.LastReady.UID:
			return rf, fmt.Errorf("rollback to %q, but the last Ready version is %q", rb.Good, rf.LastReady.UID)
		case rb.Bad == "" || rb.Bad == rb.Good:
			return rf, fmt.Errorf("rollback of version %q to itself", rb.Bad)
		case rb.BadSource != rf.Source || rb.BadOrigin != rf.Origin:
			return rf, fmt.Errorf("rollback of a version read from %s %q to one read from %s %q", rb.BadSource, rb.BadOrigin, rf.Source, rf.Origin)
		}
	}
	return rf, nil
}

// save persists the record of k, or removes its file when rec has nothing
// to keep. The error is the caller's to log.
func (s *rollbackState) save(k Key, rec *nameRecord) error {
	if !s.ensureDir() {
		return nil
	}
	name := rollbackStateName(k)
	fullName := k.FullName
	if rec == nil || rec.LastReady == nil {
		err := os.Remove(filepath.Join(s.dir, name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove rollback state of %s: %w", fullName, err)
		}
		if err := statefile.SyncDir(s.dir); err != nil {
			return fmt.Errorf("remove rollback state of %s: %w", fullName, err)
		}
		return nil
	}
	data, err := json.Marshal(rollbackFile{Version: rollbackStateVersion, NodeName: s.nodeName, Source: k.Source, Origin: k.Origin,
		FullName: fullName, nameRecord: *rec})
	if err != nil {
		return fmt.Errorf("encode rollback state of %s: %w", fullName, err)
	}
	if len(data) > maxRollbackStateBytes {
		return fmt.Errorf("rollback state of %s is %d bytes, over the limit of %d", fullName, len(data), maxRollbackStateBytes)
	}
	if err := statefile.WriteAtomic(s.dir, name, data, 0o600); err != nil {
		return fmt.Errorf("write rollback state of %s: %w", fullName, err)
	}
	return nil
}

// removeFile drops an unusable file, idempotently.
func (s *rollbackState) removeFile(p string) {
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("cannot remove a rollback state file", "file", p, "err", err)
	}
}

// ensureDir creates the directory (0700) and checks it is ours alone;
// otherwise persisting is off, logged once.
func (s *rollbackState) ensureDir() bool {
	if s.dir == "" || s.broken {
		return false
	}
	if err := statefile.MakePrivateDir(s.dir); err != nil {
		s.log.Warn("cannot use the rollback state directory; the last Ready versions are not kept across restarts", "dir", s.dir, "err", err)
		s.broken = true
		return false
	}
	return true
}
