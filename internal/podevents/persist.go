package podevents

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"time"

	"github.com/berth-agent/berth/internal/statefile"
)

// The events file and its bounds. At most maxPersisted events are kept on
// disk, the newest: enough for `berth events` to show what led up to a
// restart on a node of a hundred pods, while the file (each message at
// most maxMessage) stays under maxFileBytes, which is what a read accepts.
const (
	eventsFile     = "events.json"
	eventsVersion  = 1
	maxPersisted   = 1000
	maxFileBytes   = 2 << 20
	persistBackoff = 2 * time.Second
)

// persisted is the events file.
type persisted struct {
	Version int      `json:"version"`
	Events  []Record `json:"events"`
}

// load reads the events an earlier berth kept. A missing file is no
// events; an unusable one is ignored with a warning, and marked dirty so
// Run replaces it.
func (l *Log) load() {
	data, err := statefile.ReadOwned(filepath.Join(l.dir, eventsFile), maxFileBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return
	}
	var st persisted
	if err == nil {
		err = decode(data, &st)
	}
	if err != nil {
		l.log.Warn("ignoring the pod events kept by an earlier run: they are replaced at the next write", "path", filepath.Join(l.dir, eventsFile), "err", err)
		l.dirty <- struct{}{}
		return
	}
	for _, rec := range st.Events {
		r := l.pods[rec.UID]
		if r == nil {
			r = &ring{name: rec.Name, namespace: rec.Namespace}
			l.pods[rec.UID] = r
		}
		l.seq++
		rec.Message = truncate(rec.Message)
		r.events = append(r.events, rec.Event)
		r.seqs = append(r.seqs, l.seq)
	}
	for _, r := range l.pods {
		if len(r.events) > l.limit {
			r.events = r.events[len(r.events)-l.limit:]
			r.seqs = r.seqs[len(r.seqs)-l.limit:]
		}
	}
}

// decode parses and checks an events file.
func decode(data []byte, st *persisted) error {
	if err := json.Unmarshal(data, st); err != nil {
		return fmt.Errorf("decode: %w", err)
	}
	if st.Version != eventsVersion {
		return fmt.Errorf("version %d, want %d", st.Version, eventsVersion)
	}
	if len(st.Events) > maxPersisted {
		return fmt.Errorf("%d events, more than the %d kept", len(st.Events), maxPersisted)
	}
	for i, e := range st.Events {
		if e.UID == "" || e.Name == "" || e.Count < 1 || e.FirstSeen.IsZero() {
			return fmt.Errorf("event %d: uid, name, count and firstTimestamp are required", i)
		}
	}
	// Oldest first, so each pod's ring is rebuilt in order.
	sort.SliceStable(st.Events, func(i, j int) bool { return st.Events[i].LastSeen.Before(st.Events[j].LastSeen) })
	return nil
}

// Run keeps the events on disk until ctx ends, then writes them a last
// time. It is the file's one writer: a change marks the log dirty without
// waiting (Event stays off the disk), and Run writes the whole log at
// most once per persistBackoff, however many events came in between.
// Without a state directory it returns at once. A write that fails is
// logged and retried at the next change.
func (l *Log) Run(ctx context.Context) {
	if l.dir == "" {
		return
	}
	if err := statefile.MakePrivateDir(l.dir); err != nil {
		l.log.Warn("pod events are kept in memory only: their state directory is unusable", "dir", l.dir, "err", err)
		return
	}
	for {
		select {
		case <-ctx.Done():
			l.save()
			return
		case <-l.dirty:
		}
		l.save()
		// Bound the writes: changes in the next persistBackoff are
		// written together.
		select {
		case <-ctx.Done():
			l.save()
			return
		case <-time.After(persistBackoff):
		}
	}
}

// save writes the newest maxPersisted events.
func (l *Log) save() {
	all := l.All()
	sort.SliceStable(all, func(i, j int) bool { return all[i].LastSeen.Before(all[j].LastSeen) })
	if len(all) > maxPersisted {
		all = all[len(all)-maxPersisted:]
	}
	data, err := json.Marshal(persisted{Version: eventsVersion, Events: all})
	if err == nil {
		err = statefile.WriteAtomic(l.dir, eventsFile, data, 0o600)
	}
	if err != nil {
		l.log.Warn("keeping pod events on disk", "dir", l.dir, "err", err)
	}
}
