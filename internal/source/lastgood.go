package source

import (
	"log/slog"
	"path/filepath"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/source/laststate"
	"github.com/berth-agent/berth/internal/source/signature"
)

// newLastGoodState returns the last good state of source under
// cfg.StateDir, or a disabled one when no state dir is configured.
func newLastGoodState(cfg Config, source string, log *slog.Logger) *laststate.State {
	return laststate.New(laststate.Config{StateDir: cfg.StateDir, Source: source, NodeName: cfg.NodeName,
		MaxBytes: cfg.maxBytes(), Clock: cfg.clock(), Log: log})
}

// restoreLastGood seeds the file source with the persisted entries, as if
// read just before the restart: a file still broken keeps its last good
// pods (podsnapshot.KeepLastGood), one fixed or changed while berth was down is read
// as usual, and one gone drops out with its state on the first rescan.
// Should the path be unreadable at start, the restored pods are what the
// source delivers (in a Failed snapshot, as the HTTP source does).
func (s *fileSource) restoreLastGood() {
	for origin, res := range s.state.Load() {
		// Files of another --pod-manifest-path are no longer wanted; the
		// first Save removes their state.
		if origin == s.path || filepath.Dir(origin) == s.path {
			s.files[origin] = &fileState{res: res, serials: s.restoredSerials(origin, res)}
		}
	}
}

// restoredSerials are the serials of a restored entry's pods and objects:
// none are kept with them, but none is newer than the last serial accepted
// from origin, an upper bound that is enough to know an older version
// when another manifest brings a newer one. An earlier berth's serial of
// origin is first given to them (adopt).
func (s *fileSource) restoredSerials(origin string, res podspec.Result) map[string]uint64 {
	if s.signed == nil {
		return nil
	}
	keys := signature.Keys(res)
	s.signed.Serials.Adopt(origin, keys)
	n, ok := s.signed.Serials.OriginSerial(origin)
	if !ok {
		return nil
	}
	out := make(map[string]uint64, len(keys))
	for _, k := range keys {
		out[k] = n
	}
	return out
}

// saveLastGood stages what each manifest file yields now (send syncs it
// once the store has it). The file source calls it only when the path
// could be listed: a failed read knows nothing about which files are gone.
func (s *fileSource) saveLastGood() {
	entries := make(map[string]podspec.Result, len(s.files))
	for p, f := range s.files {
		entries[p] = f.res
	}
	s.state.Stage(entries)
}
