package source

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/berth-agent/berth/internal/podsnapshot"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/source/laststate"
	"github.com/berth-agent/berth/internal/source/signature"
	"github.com/fsnotify/fsnotify"
	"k8s.io/utils/clock"
)

// ReasonUnreadable is a manifest file or directory berth cannot read.
const ReasonUnreadable = "Unreadable"

// Debounce of directory events: a burst (an editor's rename-write-rename, a
// ConfigMap's symlink swap) is read once it has been quiet for
// debounceQuiet, and never later than debounceMax after its first event.
// Reading mid-burst could see a file briefly missing and stop its pod.
const (
	debounceQuiet = 2 * time.Millisecond
	debounceMax   = 20 * time.Millisecond
)

// vanishGrace is how long a manifest path that was read and vanished must
// stay missing before its pods are removed. Replacing a directory takes
// two renames (the old one away, the new one in); a burst read between
// them would stop every pod and start it again a moment later. A path
// missing at start, or deleted for good, is an empty snapshot as for the
// kubelet, this much later.
const vanishGrace = time.Second

// fileSource turns a manifest directory, or a single manifest file, into
// snapshots: fsnotify for immediate reaction to the files that changed, and
// a full re-read every period as the safety net for what inotify misses
// (network filesystems, directory replacement, lost events).
//
// All fields below the configuration are owned by the goroutine in run.
type fileSource struct {
	path     string // cleaned --pod-manifest-path
	nodeName string
	maxBytes int64
	maxPods  int
	perms    Permissions
	period   time.Duration
	clock    clock.WithTicker
	store    Sink
	log      *slog.Logger
	// watch enables fsnotify; tests of the periodic rescan turn it off.
	watch bool

	files   map[string]*fileState // manifest path -> what it yielded
	failed  *podspec.Problem      // the path itself could not be read
	watcher *fsnotify.Watcher
	dirInfo os.FileInfo       // the directory being watched, to notice replacement
	state   *laststate.State  // files' last good pods across restarts
	signed  *signature.Origin // nil: manifests need no signature
	// uidKey is the node's UID key the pods' UIDs are derived with.
	uidKey []byte
	// resolver resolves the pods' references to the ConfigMaps and
	// Secrets of all the files, keeping the last good resolution.
	resolver *podsnapshot.Resolver
	// warned holds, per path and rule, the ownership or mode problem
	// last logged under --manifest-permissions=warn, to log each once.
	warned map[warnKey]string
	// watching is set once the first scan was sent: from then on a path
	// that vanishes gets vanishGrace before its pods are removed.
	watching bool
	// vanishedAt is when the path was first found missing while its
	// files still counted, zero while it is there; vanished fires when
	// its grace is over, for run to look again.
	vanishedAt time.Time
	vanished   *time.Timer
	metrics    *Metrics // nil counts nothing
	// serial is the highest serial accepted of any file, for metrics.
	serial uint64
}

// fileState is the last read of one manifest file.
type fileState struct {
	info os.FileInfo       // to skip unchanged files on event-driven rescans; nil after a failed read
	sum  [sha256.Size]byte // of the bytes read, to skip parsing them again
	res  podspec.Result    // after podsnapshot.KeepLastGood
	// serials are, when signatures are required, the serial of the body
	// each pod and object of res (by serialKey) came from; one restored
	// from the state has its file's last accepted serial, an upper
	// bound, or none.
	serials map[string]uint64
	// secret: the bytes read hold a Secret (Result.HoldsSecret), so their
	// mode is checked again when only the mode changed.
	secret bool
}

func newFileSource(cfg Config, store Sink) *fileSource {
	log := cfg.logger().With("source", podspec.SourceFile)
	return &fileSource{
		path:     filepath.Clean(cfg.ManifestPath),
		nodeName: cfg.NodeName,
		maxBytes: cfg.maxBytes(),
		maxPods:  cfg.MaxPods,
		perms:    cfg.permissions(),
		period:   cfg.fileCheckFrequency(),
		clock:    cfg.clock(),
		store:    store,
		log:      log,
		watch:    true,
		files:    map[string]*fileState{},
		warned:   map[warnKey]string{},
		state:    newLastGoodState(cfg, podspec.SourceFile, log),
		signed:   newSignedOrigin(cfg.FileSigners, cfg, podspec.SourceFile, log),
		uidKey:   cfg.uidKey,
		resolver: podsnapshot.NewResolver(cfg.uidKey),
		metrics:  cfg.Metrics,
	}
}

// run watches and reads until ctx is done. Losing fsnotify is not fatal: the
// periodic rescan still works, only slower.
func (s *fileSource) run(ctx context.Context) {
	var events <-chan fsnotify.Event
	var errs <-chan error
	if s.watch {
		w, err := fsnotify.NewWatcher()
		if err != nil {
			s.log.Warn("cannot watch the manifest path; relying on the periodic rescan", "path", s.path, "err", err)
		} else {
			s.watcher = w
			defer w.Close()
			events, errs = w.Events, w.Errors
		}
	}
	s.restoreLastGood()
	s.ensureWatches(false)
	s.rescan(true)
	if s.send(ctx) != nil {
		return
	}
	s.watching = true
	ticker := s.clock.NewTicker(s.period)
	defer ticker.Stop()

	b := newBurst()
	debounce := time.NewTimer(time.Hour)
	debounce.Stop()
	var first time.Time // of the burst being debounced
	for {
		var recheck <-chan time.Time // a vanished path's grace is over
		if s.vanished != nil {
			recheck = s.vanished.C
		}
		select {
		case <-ctx.Done():
			debounce.Stop()
			s.clearVanished()
			return
		case ev := <-events:
			if !s.classify(ev, b) {
				continue
			}
			now := time.Now()
			if first.IsZero() {
				first = now
			}
			wait := debounceQuiet
			if left := debounceMax - now.Sub(first); left < wait {
				wait = max(left, 0)
			}
			debounce.Reset(wait)
		case err := <-errs:
			// Lost events may include the directory's deletion, so its
			// watch is renewed too.
			s.log.Warn("manifest watch error; rescanning", "path", s.path, "err", err)
			b.scan, b.rewatch = true, true
			debounce.Reset(0)
		case <-debounce.C:
			first = time.Time{}
			s.settle(b)
			if s.send(ctx) != nil {
				return
			}
		case <-recheck:
			s.vanished = nil
			b.scan, b.rewatch = true, true
			s.settle(b)
			if s.send(ctx) != nil {
				return
			}
		case <-ticker.C():
			s.ensureWatches(false)
			s.rescan(true)
			if s.send(ctx) != nil {
				return
			}
		}
	}
}

// burst is what a run of events asks for, gathered until the debounce
// fires.
type burst struct {
	pending map[string]bool // manifest files to re-read
	scan    bool            // something other than a manifest changed
	// rewatch: the path itself changed, so the directory's watch may follow
	// a deleted inode whose number the re-created directory reuses (ext4
	// does), which the inode comparison alone cannot tell.
	rewatch bool
}

func newBurst() *burst { return &burst{pending: map[string]bool{}} }

// classify decides what an event means: a manifest file to re-read, or a
// change of the directory itself or of a non-manifest entry (a ..data
// symlink swap, a subdirectory) that needs a rescan. It reports whether the
// event matters at all. A chmod or chown counts: a manifest made writable by
// others must be refused at once, and one fixed must be read again.
func (s *fileSource) classify(ev fsnotify.Event, b *burst) bool {
	if ev.Name == s.path {
		// The path itself appeared, vanished or was replaced.
		b.scan, b.rewatch = true, true
		return true
	}
	if filepath.Dir(ev.Name) != s.path || s.dirInfo == nil {
		return false // an unrelated entry of the parent directory
	}
	if isManifestName(filepath.Base(ev.Name)) {
		b.pending[ev.Name] = true
	} else if m := signatureFileOf(ev.Name); m != "" && s.signed != nil {
		b.pending[m] = true
	} else {
		b.scan = true
	}
	return true
}

// settle acts on a debounced burst and empties it. The watches are renewed
// before the rescan, so a file created before the new watch is found by the
// listing and one created after by an event.
func (s *fileSource) settle(b *burst) {
	if b.scan {
		s.ensureWatches(b.rewatch)
		s.rescan(false)
	}
	// Read named files even after a rescan: mtimes are only as fine as the
	// kernel's tick, so a same-size rewrite within it looks unchanged to
	// stat.
	for p := range b.pending {
		s.readOne(p)
	}
	clear(b.pending)
	b.scan, b.rewatch = false, false
}

// ensureWatches watches the parent (to see the path appear, vanish or be
// replaced) and the directory itself when the path is one. With renew the
// directory's watch is replaced even if it looks current; a watch fsnotify
// dropped (the inode it followed was deleted) is replaced always. Failures
// are retried on the next rescan.
func (s *fileSource) ensureWatches(renew bool) {
	if s.watcher == nil {
		return
	}
	parent := filepath.Dir(s.path)
	watched := s.watcher.WatchList()
	if !slices.Contains(watched, parent) {
		if err := s.watcher.Add(parent); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("cannot watch the manifest path's parent", "path", parent, "err", err)
		}
	}
	info, err := os.Stat(s.path)
	isDir := err == nil && info.IsDir()
	stale := renew || !slices.Contains(watched, s.path)
	if s.dirInfo != nil && (stale || !isDir || !os.SameFile(s.dirInfo, info)) {
		// Gone or replaced: the old watch follows the old inode.
		_ = s.watcher.Remove(s.path)
		s.dirInfo = nil
	}
	if isDir && s.dirInfo == nil {
		if err := s.watcher.Add(s.path); err != nil {
			s.log.Warn("cannot watch the manifest directory", "path", s.path, "err", err)
			return
		}
		s.dirInfo = info
	}
}

// holdVanished reports whether the missing path's files still count: it
// was read, had pods, and has been missing for less than vanishGrace.
// The first miss starts the grace and the timer run rechecks on.
func (s *fileSource) holdVanished() bool {
	if !s.watching || len(s.files) == 0 {
		s.clearVanished()
		return false
	}
	now := time.Now()
	if s.vanishedAt.IsZero() {
		s.vanishedAt, s.vanished = now, time.NewTimer(vanishGrace)
		s.log.Debug("manifest path missing; its pods stay until it has been missing for the grace", "path", s.path, "grace", vanishGrace)
		return true
	}
	if left := vanishGrace - now.Sub(s.vanishedAt); left > 0 {
		if s.vanished == nil {
			s.vanished = time.NewTimer(left)
		}
		return true
	}
	s.clearVanished()
	return false
}

// clearVanished ends a vanished path's grace: the path is back, its grace
// is over, or the source stops.
func (s *fileSource) clearVanished() {
	if s.vanished != nil {
		s.vanished.Stop()
	}
	s.vanishedAt, s.vanished = time.Time{}, nil
}

// rescan lists the path and reads what changed; with force it re-reads
// every file, the safety net against changes that kept size and mtime.
func (s *fileSource) rescan(force bool) {
	info, err := os.Stat(s.path)
	if !errors.Is(err, fs.ErrNotExist) {
		s.clearVanished()
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if s.holdVanished() {
			return
		}
		// Not there (yet): an empty, valid snapshot, as for the kubelet;
		// otherwise a node without manifests never cleans up orphans.
		clear(s.files)
		s.failed = nil
		return
	case err != nil:
		s.fail(err)
		return
	case !info.IsDir():
		if err := s.checkDir(filepath.Dir(s.path)); err != nil {
			s.fail(err)
			return
		}
		for p := range s.files {
			if p != s.path {
				delete(s.files, p)
			}
		}
		s.failed = nil
		s.read(s.path, force, nil)
		return
	}
	if err := s.checkDir(s.path); err != nil {
		s.fail(err)
		return
	}
	entries, err := os.ReadDir(s.path)
	if err != nil {
		s.fail(err)
		return
	}
	s.failed = nil
	var paths []string
	for _, e := range entries {
		if isManifestName(e.Name()) {
			paths = append(paths, filepath.Join(s.path, e.Name()))
		}
	}
	ahead := s.preparse(paths)
	seen := map[string]bool{}
	for _, p := range paths {
		seen[p] = true
		s.read(p, force, ahead[p])
	}
	for p := range s.files {
		if !seen[p] {
			delete(s.files, p)
		}
	}
	for k := range s.warned {
		if !seen[k.path] && k.path != s.path {
			delete(s.warned, k)
		}
	}
}

// readOne re-reads one manifest after an event. The directory must still
// be the one listed, and trusted: in a directory others may write, a
// removal or rename is not the operator's, so nothing changes until the
// directory is fixed.
func (s *fileSource) readOne(p string) {
	if s.dirInfo == nil {
		return
	}
	if err := s.checkDir(s.path); err != nil {
		s.fail(err)
		return
	}
	s.read(p, true, nil)
}

// checkDir checks who may write the directory holding the manifests (see
// checkManifestDir); under --manifest-permissions=warn a refusal is only
// logged.
func (s *fileSource) checkDir(dir string) error {
	err := checkManifestDir(dir)
	if err != nil && isPermissionError(err) && !s.refuse(dir, ruleWrite, err) {
		return nil
	}
	return err
}

// Rules a manifest's owner and mode are checked against: who may write it
// (checkManifestFile, checkManifestDir), and who may read the Secret it
// holds (checkSecretFile).
const (
	ruleWrite = "write"
	ruleRead  = "read"
)

// warnKey is what a warning under --manifest-permissions=warn is about.
type warnKey struct{ path, rule string }

// refuse decides what an ownership or mode problem of path under rule
// does: true (refuse it) when strict; logged once and false under warn.
func (s *fileSource) refuse(path, rule string, err error) bool {
	if s.perms != PermissionsWarn {
		return true
	}
	k := warnKey{path, rule}
	if s.warned[k] != err.Error() {
		s.warned[k] = err.Error()
		what := "manifest writable by others read anyway (--manifest-permissions=warn)"
		if rule == ruleRead {
			what = "manifest holding a Secret others may read used anyway (--manifest-permissions=warn)"
		}
		s.log.Warn(what, "path", path, "err", err)
	}
	return false
}

// refuseSecret decides whether a manifest holding a Secret (secret) is
// refused for who may read it; info is the fstat of the file read.
func (s *fileSource) refuseSecret(path string, info fs.FileInfo, secret bool) bool {
	if !secret {
		return false
	}
	err := checkSecretFile(path, info)
	return err != nil && s.refuse(path, ruleRead, err)
}

// fail records that the path could not be read, or is refused for who may
// write it. The pods read before stay: a source that fails never removes
// pods.
func (s *fileSource) fail(err error) {
	reason, what := ReasonUnreadable, "cannot read the manifest path"
	if isPermissionError(err) {
		reason, what = ReasonPermissions, "refusing the manifest path"
	}
	if s.failed == nil || s.failed.Reason != reason {
		s.log.Warn(what+"; keeping its pods", "path", s.path, "err", err)
	}
	s.failed = &podspec.Problem{Source: podspec.SourceFile, Origin: s.path, Reason: reason,
		Message: fmt.Sprintf("%s, keeping its pods as they were: %v", what, err)}
}

// read reads one manifest file unless it is unchanged since the last read
// (and force is off), and records what it yields. ahead is the file as
// preparse parsed it, nil if it did not.
func (s *fileSource) read(p string, force bool, ahead *preparsed) {
	prev := s.files[p]
	if prev == nil {
		prev = &fileState{}
	}
	f, ok := s.open(p, force, prev)
	if !ok {
		return
	}
	v, same := s.judge(p, f, prev, ahead)
	if same {
		// Same bytes as last time (a touch, the periodic re-read): the
		// same pods, without parsing again.
		prev.info = v.info
		return
	}
	s.record(p, v, prev)
}

// openedFile is a manifest file as read, with its signature when
// signatures are required; err is why it could not be read or is refused.
type openedFile struct {
	m      openedManifest
	sig    []byte
	sigErr error
	err    error
}

// open reads p and its signature. ok is false when there is nothing to
// record: p is gone or a directory (it is forgotten; subdirectories are
// not read, as with the kubelet), or unchanged since prev unless force.
func (s *fileSource) open(p string, force bool, prev *fileState) (openedFile, bool) {
	info, err := os.Stat(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		delete(s.files, p)
		return openedFile{}, false
	case err != nil:
		return openedFile{err: err}, true
	case info.IsDir():
		delete(s.files, p)
		return openedFile{}, false
	case !force && prev.info != nil && sameVersion(prev.info, info):
		return openedFile{}, false
	}
	m, err := readManifestFile(p, s.maxBytes)
	if errors.Is(err, fs.ErrNotExist) {
		delete(s.files, p)
		return openedFile{}, false
	}
	if err != nil {
		return openedFile{m: m, err: err}, true
	}
	f := openedFile{m: m}
	if s.signed != nil {
		f.sig, f.sigErr = readSignatureFile(p)
	}
	if m.perm != nil && s.refuse(p, ruleWrite, m.perm) {
		f.err = m.perm
	}
	return f, true
}

// verdict is what a file read yields: res its result (before
// keepLastGood), fresh what its bytes parsed to, body the signed body
// accepted (nil unless one is), sum of its bytes, info its fstat (nil
// after a failed read), secret whether its bytes hold a Secret.
type verdict struct {
	res, fresh podspec.Result
	body       *signature.Verified
	sum        [sha256.Size]byte
	info       os.FileInfo
	secret     bool
}

// judge parses, and when signatures are required verifies and admits, the
// file read; same reports bytes and signature unchanged since prev.
func (s *fileSource) judge(p string, f openedFile, prev *fileState, ahead *preparsed) (v verdict, same bool) {
	if f.err != nil {
		// Refused like a broken edit: the pods this file defined before
		// keep running (keepLastGood), a new file starts nothing.
		return verdict{res: podspec.Result{Problems: []podspec.Problem{fileProblem(p, f.err)}}}, false
	}
	data := f.m.data
	v.info = f.m.info
	if int64(len(data)) > s.maxBytes {
		v.res = tooLarge(p, s.maxBytes)
		return v, false
	}
	v.sum = signedSum(data, f.sig)
	if prev.info != nil && v.sum == prev.sum && f.sigErr == nil && !s.refuseSecret(p, v.info, prev.secret) {
		// Not when only the mode changed and now exposes the Secret the
		// bytes hold.
		return v, true
	}
	if s.signed == nil {
		v.res = s.parse(p, data, ahead)
	} else {
		b, refused := s.verifySignedFile(p, data, f.sig, f.sigErr)
		if refused == nil {
			v.fresh = s.parse(p, data, ahead)
			refused = s.admitSignedFile(p, b, v.fresh, prev.res)
		}
		if refused != nil {
			v.res = *refused
			return v, false
		}
		v.res, v.body = v.fresh, &b
	}
	v.secret = v.res.HoldsSecret()
	if s.refuseSecret(p, v.info, v.secret) {
		// Refused like a file others may write: what the file defined
		// before keeps running, and a signed body is not accepted.
		v.res = podspec.Result{Problems: []podspec.Problem{fileProblem(p, checkSecretFile(p, v.info))}}
		v.info, v.body = nil, nil
	}
	return v, false
}

// record keeps what the file now defines (its last good pods where it
// fails), accepts its signed body, and logs its problems when they
// changed.
func (s *fileSource) record(p string, v verdict, prev *fileState) {
	res := podsnapshot.KeepLastGood(prev.res, v.res)
	serials := prev.serials
	if v.body != nil {
		s.signed.Accept(p, *v.body, signature.RaisedKeys(v.fresh, prev.res, res))
		serials = signature.ItemSerials(v.fresh, res, v.body.Serial, prev.serials)
		n, _ := s.signed.Serials.OriginSerial(p)
		s.serial = max(s.serial, n)
		s.metrics.Accepted(podspec.SourceFile, s.path, s.serial)
	}
	if !slices.Equal(prev.res.Problems, res.Problems) {
		for _, pr := range res.Problems {
			s.log.Warn("manifest rejected", "origin", pr.Origin, "line", pr.Line, "field", pr.Field,
				"reason", pr.Reason, "pod", pr.Name, "namespace", pr.Namespace, "err", pr.Message)
		}
	}
	s.files[p] = &fileState{info: v.info, sum: v.sum, res: res, serials: serials, secret: v.secret}
}

// send hands the current state to the store as one snapshot.
func (s *fileSource) send(ctx context.Context) error {
	if s.signed != nil {
		s.dropSuperseded()
		// Durable before the store has the pods of the bodies accepted.
		s.signed.Serials.Flush(s.liveSerials)
	}
	paths := make([]string, 0, len(s.files))
	for p := range s.files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	results := make([]podsnapshot.Merged, 0, len(paths))
	for _, p := range paths {
		results = append(results, podsnapshot.Merged{Origin: podspec.Origin{Source: podspec.SourceFile, Path: p}, Result: s.files[p].res})
	}
	// Every send follows a read of the path: its success is the path's.
	s.metrics.Read(podspec.SourceFile, s.path, s.clock.Now(), s.failed == nil)
	var extra []podspec.Problem
	if s.failed != nil {
		extra = []podspec.Problem{*s.failed}
	} else {
		s.saveLastGood()
	}
	err := s.store.Apply(ctx, podsnapshot.Assemble(podspec.SourceFile, results, s.failed != nil, extra, s.resolver))
	// Durable while the agent starts the pods, not before (Stage).
	s.state.Sync()
	return err
}

// sameVersion reports whether a file is unchanged since it was read: same
// inode (a rename or symlink swap gives a new one), size, mtime, mode and
// owner (who may write it decides whether it is read at all).
func sameVersion(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime()) &&
		a.Mode() == b.Mode() && ownerOf(a) == ownerOf(b)
}
