package source

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/berth-agent/berth/internal/podsnapshot"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podspec/podspectest"
	"github.com/berth-agent/berth/internal/store"
	"github.com/fsnotify/fsnotify"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// watchedSource runs the sources of cfg against a fresh store until the test
// ends. Unless cfg has a clock, the file source rescans only when quiet
// hands it a tick.
func watchedSource(t *testing.T, cfg Config) *store.Store {
	t.Helper()
	if cfg.NodeName == "" {
		cfg.NodeName = podspectest.Node
	}
	if cfg.FileCheckFrequency == 0 {
		cfg.FileCheckFrequency = time.Hour
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	st := store.New(cfg.SourceNames()...)
	if cfg.Clock == nil {
		clk := &tickClock{signalClock: newClock(time.Now()), ticks: make(chan time.Time)}
		cfg.Clock = clk
		rescans[st] = clk
		t.Cleanup(func() { delete(rescans, st) })
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- Run(ctx, cfg, signalledStore{st}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return st
}

// next waits for the next update and renders it as "OP name image..." lines,
// sorted, one per pod.
func next(t *testing.T, s *store.Store) string {
	t.Helper()
	select {
	case u := <-s.Updates():
		var lines []string
		for _, p := range u.Pods {
			lines = append(lines, fmt.Sprintf("%s %s %s", u.Op, p.Name, p.Spec.Containers[0].Image))
		}
		sort.Strings(lines)
		return strings.Join(lines, "\n")
	case <-time.After(updateTimeout):
		t.Fatalf("no update within %s", updateTimeout)
		return ""
	}
}

// eventuallyEqual waits as eventually does until got returns want, and
// names both should it not.
func eventuallyEqual(t *testing.T, what, want string, got func() string) {
	t.Helper()
	var have string
	timeout := time.NewTimer(updateTimeout)
	defer timeout.Stop()
	for have = got(); have != want; have = got() {
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("%s: %s, want %s", what, have, want)
		}
	}
}

// updateTimeout bounds the wait for an update that must come. It only
// ends a failing test: a loaded 2-core machine running the suite with
// -race took over 5 s for a first scan that refuses a file of 100,000
// documents.
const updateTimeout = 30 * time.Second

// nextLines gathers updates until n pod lines have come, sorted. A burst of
// syscalls (RemoveAll's unlinks and rmdir) is one update only when the
// debounce sees no gap between them, which a loaded machine does not
// promise; what must hold is what the updates add up to.
func nextLines(t *testing.T, s *store.Store, n int) string {
	t.Helper()
	var lines []string
	for len(lines) < n {
		lines = append(lines, strings.Split(next(t, s), "\n")...)
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// tickClock is the fake clock of a watchedSource: its tickers tick only
// when the test sends on ticks, which is unbuffered, so a send returns once
// the source has taken the tick.
type tickClock struct {
	*signalClock
	ticks chan time.Time
}

func (c *tickClock) NewTicker(time.Duration) clock.Ticker { return handTicker(c.ticks) }

// handTicker is a ticker whose ticks the test hands over.
type handTicker chan time.Time

func (h handTicker) C() <-chan time.Time { return h }
func (handTicker) Stop()                 {}

// rescans holds the clock of each store watchedSource feeds; the tests do
// not run in parallel.
var rescans = map[*store.Store]*tickClock{}

// quiet checks nothing more is emitted: it makes the file source rescan
// everything, as its periodic safety net does, and checks the store got
// no update from that rescan or any burst of events read before it. The
// source takes the second tick only once it has sent the first rescan's
// snapshot, and Apply queues a snapshot's updates before it returns, so
// then there is nothing to wait for.
func quiet(t *testing.T, s *store.Store) {
	t.Helper()
	clk, ok := rescans[s]
	if !ok {
		t.Fatal("quiet needs a watchedSource on its own clock")
	}
	for range 2 {
		select {
		case clk.ticks <- time.Now():
		case <-time.After(updateTimeout):
			t.Fatalf("the file source took no rescan tick within %s", updateTimeout)
		}
	}
	noUpdate(t, s)
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// renameIn writes content beside dir and renames it in, atomically.
func renameIn(t *testing.T, path, content string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(filepath.Dir(path)), "."+filepath.Base(path)+".tmp")
	write(t, tmp, content)
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func problemsOf(s *store.Store) string {
	var out []string
	for _, p := range s.Problems() {
		out = append(out, p.Reason+" "+filepath.Base(p.Origin)+" "+p.Field)
	}
	return strings.Join(out, "\n")
}

// changed is signalled after every snapshot a test's source hands its
// store, every ticker a test's clock starts and every update drainUpdates
// takes: the events after which what a test waits for may hold. One slot:
// a signal sent while no test waits is kept for the next wait, so none is
// missed. The package's tests do not run in parallel, so one channel
// serves them all.
var changed = make(chan struct{}, 1)

func signal() {
	select {
	case changed <- struct{}{}:
	default:
	}
}

// signalledStore is the store a test's sources feed, signalling changed
// once each snapshot is merged.
type signalledStore struct{ *store.Store }

func (s signalledStore) Apply(ctx context.Context, snap podsnapshot.Snapshot) error {
	defer signal()
	return s.Store.Apply(ctx, snap)
}

// signalClock is a fake clock that signals changed whenever a source
// starts a ticker or arms a timer, so a test steps it only once the source
// waits on it.
type signalClock struct{ *clocktesting.FakeClock }

func newClock(t time.Time) *signalClock {
	return &signalClock{clocktesting.NewFakeClock(t)}
}

func (c *signalClock) NewTicker(d time.Duration) clock.Ticker {
	defer signal()
	return c.FakeClock.NewTicker(d)
}

func (c *signalClock) NewTimer(d time.Duration) clock.Timer {
	defer signal()
	return c.FakeClock.NewTimer(d)
}

func (c *signalClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	defer signal()
	return c.FakeClock.AfterFunc(d, f)
}

// eventually waits until cond holds, checking it again after each snapshot
// merged, each ticker or timer started and each update drained; it never
// polls.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	timeout := time.NewTimer(updateTimeout)
	defer timeout.Stop()
	for !cond() {
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("no %s within %s", what, updateTimeout)
		}
	}
}

func TestFileSourceChangePatterns(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "manifests")
	st := watchedSource(t, Config{ManifestPath: dir})

	// A directory that does not exist yet is an empty, valid source.
	eventually(t, "ready on a missing directory", st.SourcesReady)

	// The directory appears later, with a manifest in it.
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	web := filepath.Join(dir, "web.yaml")
	write(t, web, podspectest.Manifest("web", "nginx:1"))
	if got := next(t, st); got != "ADD web-node1 nginx:1" {
		t.Fatalf("after creating the directory: %q", got)
	}

	// Write in place: new content is a new UID.
	write(t, web, podspectest.Manifest("web", "nginx:2"))
	if got := next(t, st); got != "REMOVE web-node1 nginx:1" {
		t.Fatalf("write in place: %q", got)
	}
	if got := next(t, st); got != "ADD web-node1 nginx:2" {
		t.Fatalf("write in place: %q", got)
	}

	// Atomic rename of a new file into the directory.
	renameIn(t, filepath.Join(dir, "db.yaml"), podspectest.Manifest("db", "postgres:16"))
	if got := next(t, st); got != "ADD db-node1 postgres:16" {
		t.Fatalf("rename in: %q", got)
	}

	// Ignored names never count.
	for _, name := range []string{"web.yaml.backup", "web.yaml~", ".web.yaml.swp", "4913", "#web.yaml#", "notes.txt"} {
		write(t, filepath.Join(dir, name), podspectest.Manifest("web", "evil:1"))
	}
	quiet(t, st)

	// A broken edit keeps the running version and is reported.
	write(t, web, podspectest.Manifest("web", "nginx:3")+"    imagePullPolicy: Sometimes\n")
	eventually(t, "the invalid edit to be reported", func() bool { return problemsOf(st) == "Invalid web.yaml spec.containers[0].imagePullPolicy" })
	quiet(t, st)
	write(t, web, "{{ not yaml")
	eventually(t, "the syntax error to be reported", func() bool { return problemsOf(st) == "DecodeError web.yaml " })
	quiet(t, st)

	// Fixing it replaces the last good version.
	renameIn(t, web, podspectest.Manifest("web", "nginx:4"))
	if got := next(t, st); got != "REMOVE web-node1 nginx:2" {
		t.Fatalf("fix: %q", got)
	}
	if got := next(t, st); got != "ADD web-node1 nginx:4" {
		t.Fatalf("fix: %q", got)
	}
	if p := problemsOf(st); p != "" {
		t.Fatalf("problems after the fix: %q", p)
	}

	// The same full name in a later file is rejected; the first keeps running.
	write(t, filepath.Join(dir, "zz-web.yaml"), podspectest.Manifest("web", "other:1"))
	eventually(t, "the duplicate to be reported", func() bool { return problemsOf(st) == "DuplicateName zz-web.yaml metadata.name" })
	quiet(t, st)
	if err := os.Remove(filepath.Join(dir, "zz-web.yaml")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the duplicate to be cleared", func() bool { return problemsOf(st) == "" })

	// Deleting a file removes its pod.
	if err := os.Remove(filepath.Join(dir, "db.yaml")); err != nil {
		t.Fatal(err)
	}
	if got := next(t, st); got != "REMOVE db-node1 postgres:16" {
		t.Fatalf("delete: %q", got)
	}

	// Replacing the whole directory by two renames: same content, same
	// UIDs, and no pod stopped in between, however long the gap between
	// the renames (up to vanishGrace).
	other := filepath.Join(root, "manifests.new")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(other, "web.yaml"), podspectest.Manifest("web", "nginx:4"))
	write(t, filepath.Join(other, "cache.yaml"), podspectest.Manifest("cache", "redis:7"))
	if err := os.Rename(dir, filepath.Join(root, "manifests.old")); err != nil {
		t.Fatal(err)
	}
	quiet(t, st) // a rescan reads the path missing: its pods are held for the grace
	if err := os.Rename(other, dir); err != nil {
		t.Fatal(err)
	}
	if got := next(t, st); got != "ADD cache-node1 redis:7" {
		t.Fatalf("directory replaced: %q", got)
	}
	// The new directory is watched.
	write(t, filepath.Join(dir, "cache.yaml"), podspectest.Manifest("cache", "redis:8"))
	if got := next(t, st); got != "REMOVE cache-node1 redis:7" {
		t.Fatalf("edit in replaced directory: %q", got)
	}
	if got := next(t, st); got != "ADD cache-node1 redis:8" {
		t.Fatalf("edit in replaced directory: %q", got)
	}

	// Deleting the directory removes every pod; re-creating it brings them back.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if got := nextLines(t, st, 2); got != "REMOVE cache-node1 redis:8\nREMOVE web-node1 nginx:4" {
		t.Fatalf("directory deleted: %q", got)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write(t, web, podspectest.Manifest("web", "nginx:5"))
	if got := next(t, st); got != "ADD web-node1 nginx:5" {
		t.Fatalf("directory re-created: %q", got)
	}
	quiet(t, st)
}

// TestFileSourceRewatchesRecreatedDirectory deletes and re-creates the
// directory within one burst of events. ext4 gives the new directory the
// inode number of the old one, so comparing inodes says "same directory"
// while the watch followed the deleted one: a file written afterwards must
// still be seen. The test drives the source's steps itself, waiting on the
// watcher's events, so no debounce timing decides the outcome.
func TestFileSourceRewatchesRecreatedDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "manifests")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := Config{ManifestPath: dir, NodeName: podspectest.Node, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s := newFileSource(cfg, store.New(podspec.SourceFile))
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	s.watcher = w
	s.ensureWatches(false)
	s.rescan(true)
	before := s.dirInfo

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(dir); err != nil || !os.SameFile(before, info) {
		t.Logf("the filesystem gave the re-created directory a new inode; the reused-inode case is not exercised here")
	}
	b := newBurst()
	awaitEvent(t, w, s, b, dir, fsnotify.Create)
	s.settle(b)

	web := filepath.Join(dir, "web.yaml")
	write(t, web, podspectest.Manifest("web", "nginx:1"))
	awaitEvent(t, w, s, b, web, fsnotify.Write)
	s.settle(b)
	if f := s.files[web]; f == nil || len(f.res.Pods) != 1 {
		t.Fatalf("the file written in the re-created directory was not read: %+v", s.files)
	}
}

// awaitEvent feeds the watcher's events to classify until one of op on
// name has come.
func awaitEvent(t *testing.T, w *fsnotify.Watcher, s *fileSource, b *burst, name string, op fsnotify.Op) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev := <-w.Events:
			s.classify(ev, b)
			if ev.Name == name && ev.Has(op) {
				return
			}
		case err := <-w.Errors:
			t.Fatalf("watch error: %v", err)
		case <-timeout:
			t.Fatalf("no %v event on %s within 5s", op, name)
		}
	}
}

// TestFileSourceDataSymlinkSwap drives the layout of a mounted ConfigMap:
// manifests are symlinks through ..data, which is swapped atomically.
func TestFileSourceDataSymlinkSwap(t *testing.T) {
	dir := t.TempDir()
	version := func(ts, image string) {
		t.Helper()
		d := filepath.Join(dir, "..2026_"+ts)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(d, "web.yaml"), podspectest.Manifest("web", image))
		if err := os.Symlink("..2026_"+ts, filepath.Join(dir, "..data_tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	version("a", "nginx:1")
	if err := os.Symlink("..data/web.yaml", filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	st := watchedSource(t, Config{ManifestPath: dir})
	if got := next(t, st); got != "ADD web-node1 nginx:1" {
		t.Fatalf("initial: %q", got)
	}
	version("b", "nginx:2")
	if err := os.RemoveAll(filepath.Join(dir, "..2026_a")); err != nil {
		t.Fatal(err)
	}
	if got := next(t, st); got != "REMOVE web-node1 nginx:1" {
		t.Fatalf("swap: %q", got)
	}
	if got := next(t, st); got != "ADD web-node1 nginx:2" {
		t.Fatalf("swap: %q", got)
	}
	quiet(t, st)
}

func TestFileSourceSingleFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "pod.conf") // an explicit file needs no manifest extension
	write(t, path, podspectest.Manifest("solo", "busybox:1"))
	write(t, filepath.Join(dir, "other.yaml"), podspectest.Manifest("other", "busybox:1"))
	st := watchedSource(t, Config{ManifestPath: path})
	if got := next(t, st); got != "ADD solo-node1 busybox:1" {
		t.Fatalf("initial: %q", got)
	}
	renameIn(t, path, podspectest.Manifest("solo", "busybox:2"))
	if got := next(t, st); got != "REMOVE solo-node1 busybox:1" {
		t.Fatalf("rename over: %q", got)
	}
	if got := next(t, st); got != "ADD solo-node1 busybox:2" {
		t.Fatalf("rename over: %q", got)
	}
	write(t, filepath.Join(dir, "other.yaml"), podspectest.Manifest("other", "busybox:2"))
	quiet(t, st)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if got := next(t, st); got != "REMOVE solo-node1 busybox:2" {
		t.Fatalf("delete: %q", got)
	}
}

// TestFileSourcePeriodicRescan checks the safety net alone: with no
// watcher, changes are found on the next tick of the check frequency.
func TestFileSourcePeriodicRescan(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "web.yaml"), podspectest.Manifest("web", "nginx:1"))
	clk := newClock(time.Now())
	st := store.New(podspec.SourceFile)
	src := newFileSource(Config{NodeName: podspectest.Node, ManifestPath: dir, FileCheckFrequency: time.Minute, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, signalledStore{st})
	src.watch = false
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { src.run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	if got := next(t, st); got != "ADD web-node1 nginx:1" {
		t.Fatalf("initial: %q", got)
	}
	tick := func() {
		t.Helper()
		eventually(t, "the rescan ticker", clk.HasWaiters)
		clk.Step(time.Minute)
	}
	write(t, filepath.Join(dir, "db.yaml"), podspectest.Manifest("db", "postgres:16"))
	tick()
	if got := next(t, st); got != "ADD db-node1 postgres:16" {
		t.Fatalf("after a tick: %q", got)
	}
	if err := os.Chmod(dir, 0o000); err != nil {
		t.Fatal(err)
	}
	defer os.Chmod(dir, 0o755)
	if os.Geteuid() != 0 { // root reads anything
		tick()
		eventually(t, "the unreadable directory to be reported", func() bool { return strings.HasPrefix(problemsOf(st), "Unreadable") })
		if n := len(st.Pods()); n != 2 {
			t.Fatalf("an unreadable directory must keep its pods, have %d", n)
		}
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "db.yaml")); err != nil {
		t.Fatal(err)
	}
	tick()
	if got := next(t, st); got != "REMOVE db-node1 postgres:16" {
		t.Fatalf("after a tick: %q", got)
	}
}

// TestFileSourceSymlinkedDirectorySwap points the manifest path at another
// directory by swapping a symlink, as release tools do.
func TestFileSourceSymlinkedDirectorySwap(t *testing.T) {
	root := t.TempDir()
	for _, v := range []string{"v1", "v2"} {
		if err := os.Mkdir(filepath.Join(root, v), 0o755); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(root, v, "web.yaml"), podspectest.Manifest("web", "nginx:1"))
	}
	write(t, filepath.Join(root, "v2", "db.yaml"), podspectest.Manifest("db", "postgres:16"))
	link := filepath.Join(root, "manifests")
	if err := os.Symlink("v1", link); err != nil {
		t.Fatal(err)
	}
	st := watchedSource(t, Config{ManifestPath: link})
	if got := next(t, st); got != "ADD web-node1 nginx:1" {
		t.Fatalf("initial: %q", got)
	}
	if err := os.Symlink("v2", link+".tmp"); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(link+".tmp", link); err != nil {
		t.Fatal(err)
	}
	if got := next(t, st); got != "ADD db-node1 postgres:16" {
		t.Fatalf("swap: %q", got)
	}
	// The new target is the one watched now.
	write(t, filepath.Join(root, "v2", "db.yaml"), podspectest.Manifest("db", "postgres:17"))
	if got := next(t, st); got != "REMOVE db-node1 postgres:16" {
		t.Fatalf("edit after swap: %q", got)
	}
	if got := next(t, st); got != "ADD db-node1 postgres:17" {
		t.Fatalf("edit after swap: %q", got)
	}
	write(t, filepath.Join(root, "v1", "web.yaml"), podspectest.Manifest("web", "nginx:9"))
	quiet(t, st)
}
