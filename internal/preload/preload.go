package preload

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/types"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/berth-agent/berth/internal/criconfig"
	"github.com/berth-agent/berth/internal/imagearchive"
	"github.com/berth-agent/berth/internal/kuberuntime"
)

// Importer puts an archive's images into one runtime's image store; the
// CRI has no call for it. Containerd is the one there is: CRI-O's
// containers/storage would be another.
type Importer interface {
	// Import writes the archive's blobs and names each of a.Images[i]
	// names[i] (normalized), pinned where the runtime pins.
	Import(ctx context.Context, a *imagearchive.Archive, names [][]string) error
	// Pin pins the images named keep (normalized names) and removes the
	// pins berth set on any other image.
	Pin(ctx context.Context, keep []string) error
}

// Event reasons of the preloader, recorded on its own object (EventUID).
const (
	ReasonPreloaded     = "Preloaded"
	ReasonPreloadFailed = "PreloadFailed"
	ReasonPulled        = "Pulled"
	ReasonPullFailed    = "Failed"
)

// EventUID, EventName are the object the preloader's events are recorded
// on: `berth events` lists them beside the pods'.
const (
	EventUID  types.UID = "berth-image-preload"
	EventName string    = "image-preload"
)

// Options are a Preloader's settings.
type Options struct {
	// Dir is the directory watched for archives and lists.
	Dir string
	// Importer imports archives; nil when the runtime has none berth
	// supports (CRI-O): every archive is then refused with that reason,
	// and lists are still pulled.
	Importer Importer
	// RuntimeName names the runtime in that refusal.
	RuntimeName string
	// Images is the CRI image service: the lists' pulls, and the check
	// that the CRI lists what an import wrote.
	Images internalapi.ImageManagerService
	// Credentials are the node's credentials for an image, for the
	// lists' pulls (images.Puller.Credentials).
	Credentials func(image string) ([]*runtimeapi.AuthConfig, error)
	// Limits bound each archive; zero means imagearchive.DefaultLimits.
	Limits imagearchive.Limits
	// Recorder records the events; Logger logs; Metrics registers
	// berth_image_preload_total and berth_image_preload_pending.
	Recorder kuberuntime.Recorder
	Logger   *slog.Logger
	Metrics  prometheus.Registerer
}

// Preloader imports the archives and pulls the lists of one directory, at
// start and whenever a file is complete in it (see doc.go).
//
// The goroutine of Run owns done; mu guards queue, queued, idle and
// names, which pods waiting for an import and image GC read.
type Preloader struct {
	opts    Options
	log     *slog.Logger
	total   *prometheus.CounterVec
	pending prometheus.Gauge

	mu     sync.Mutex
	queue  []string        // file names to process, in order
	queued map[string]bool // the same, as a set
	busy   bool            // a file taken off the queue is being processed
	// idle is closed when queue drains and nothing is busy; nil while
	// nothing waits.
	idle chan struct{}
	wake chan struct{} // room for one signal: queue grew
	// names are the images each file put in the runtime, by file name.
	names map[string][]string

	done map[string]stamp // the version of each file last processed
	// inotify is the directory's watch, nil when it could not be set;
	// Run reads and closes it.
	inotify *os.File
}

// stamp tells whether a file changed since it was processed.
type stamp struct {
	size  int64
	mtime time.Time
	ino   uint64
}

// New is a preloader of opts.Dir, which it creates (0700) when missing;
// every file already there is pending from now on, so a pod that starts
// before Run got to it waits for it (Pending).
func New(opts Options) (*Preloader, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Limits == (imagearchive.Limits{}) {
		opts.Limits = imagearchive.DefaultLimits()
	}
	if opts.Metrics == nil {
		opts.Metrics = prometheus.NewRegistry()
	}
	p := &Preloader{
		opts: opts, log: opts.Logger.With("component", "preload"),
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "berth_image_preload_total",
			Help: "Files of the image preload directory processed, by result: imported (an archive), refused (an archive that is not a valid image archive, or a file berth must not trust), failed (an import or a list's pull the runtime failed), pulled and present (an image of a list).",
		}, []string{"result"}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "berth_image_preload_pending",
			Help: "Files of the image preload directory waiting to be imported or pulled.",
		}),
		queued: map[string]bool{}, wake: make(chan struct{}, 1),
		names: map[string][]string{}, done: map[string]stamp{},
	}
	for _, r := range []string{"imported", "refused", "failed", "pulled", "present"} {
		p.total.WithLabelValues(r)
	}
	opts.Metrics.MustRegister(p.total, p.pending)
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("image preload directory %s: %w", opts.Dir, err)
	}
	// The watch starts before the directory is read, so no file added
	// meanwhile is missed. Without it the files there are still read;
	// new ones wait for the next start.
	var err error
	if p.inotify, err = watchDir(opts.Dir); err != nil {
		p.log.Error("image preload directory not watched", "dir", opts.Dir, "err", err)
	}
	entries, err := os.ReadDir(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("image preload directory %s: %w", opts.Dir, err)
	}
	for _, e := range entries {
		if kindOf(e.Name()) != kindIgnored {
			p.enqueue(e.Name())
		}
	}
	return p, nil
}

// retryFailed is how soon an import the runtime failed is tried again.
const retryFailed = time.Minute

// fileKind is what a file of the directory is to the preloader.
type fileKind int

const (
	kindIgnored fileKind = iota
	kindArchive
	kindList
)

// kindOf tells archives and lists apart by name; dotfiles are ignored, so
// a file written as .NAME and renamed into place is only read complete.
func kindOf(name string) fileKind {
	switch {
	case strings.HasPrefix(name, "."):
		return kindIgnored
	case strings.HasSuffix(name, ".txt"):
		return kindList
	}
	for _, ext := range []string{".tar", ".tar.gz", ".tgz", ".tar.zst", ".tar.zstd"} {
		if strings.HasSuffix(name, ext) {
			return kindArchive
		}
	}
	return kindIgnored
}

func (p *Preloader) enqueue(name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.queued[name] {
		return
	}
	p.queued[name] = true
	p.queue = append(p.queue, name)
	if p.idle == nil {
		p.idle = make(chan struct{})
	}
	p.pending.Set(float64(len(p.queue)))
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// take takes the first queued file off the queue, "" when none: it is
// being processed until finish, and may be queued again meanwhile (its
// writer changed it again).
func (p *Preloader) take() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.queue) == 0 {
		return ""
	}
	name := p.queue[0]
	p.queue = p.queue[1:]
	delete(p.queued, name)
	p.busy = true
	p.pending.Set(float64(len(p.queue) + 1))
	return name
}

// finish ends the processing of a file; when none waits, idle closes.
func (p *Preloader) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.busy = false
	p.pending.Set(float64(len(p.queue)))
	if len(p.queue) == 0 && p.idle != nil {
		close(p.idle)
		p.idle = nil
	}
}

// Pending returns a channel closed when no file is waiting any more, nil
// when none is: a pod whose image is missing waits on it before it pulls
// (kuberuntime.Options.PendingImport).
func (p *Preloader) Pending() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idle == nil {
		return nil
	}
	return p.idle
}

// Images are the normalized names of every image the directory's files
// put in the runtime: image GC keeps them.
func (p *Preloader) Images() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, ns := range p.names {
		out = append(out, ns...)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Pin pins the preloaded images and keep, and unpins what berth pinned
// before and neither names any more; without an importer it does
// nothing.
func (p *Preloader) Pin(ctx context.Context, keep []string) error {
	if p.opts.Importer == nil {
		return nil
	}
	return p.opts.Importer.Pin(ctx, slices.Concat(keep, p.Images()))
}

// Run watches the directory (inotify: a file closed after writing, or
// moved into it) and processes every file queued, one at a time, until
// ctx ends.
func (p *Preloader) Run(ctx context.Context) error {
	var events <-chan string
	if p.inotify != nil {
		events = p.watch(ctx)
	}
	for {
		for name := p.take(); name != ""; name = p.take() {
			p.process(ctx, name)
			p.finish()
			if ctx.Err() != nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-p.wake:
		case name, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			p.enqueue(name)
		}
	}
}

// watchDir starts an inotify watch of dir for the files closed after
// writing, moved in or out, or removed.
func watchDir(dir string) (*os.File, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CLOSE_WRITE|unix.IN_MOVED_TO|unix.IN_DELETE|unix.IN_MOVED_FROM); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("inotify %s: %w", dir, err)
	}
	return os.NewFile(uintptr(fd), "inotify"), nil
}

// watch reads the watch's events until ctx ends, when it closes the
// watch: the names of the files it reports, those of interest only.
func (p *Preloader) watch(ctx context.Context) <-chan string {
	f := p.inotify
	out := make(chan string)
	go func() {
		<-ctx.Done()
		f.Close() // ends the read below
	}()
	go func() {
		defer close(out)
		buf := make([]byte, 64<<10)
		for {
			n, err := f.Read(buf)
			if err != nil {
				return
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				nameBytes := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
				off += unix.SizeofInotifyEvent + int(ev.Len)
				name := strings.TrimRight(string(nameBytes), "\x00")
				if name == "" || kindOf(name) == kindIgnored {
					continue
				}
				select {
				case out <- name:
				case <-ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

// process imports or pulls one file once per version of it, or forgets
// it when it is gone.
func (p *Preloader) process(ctx context.Context, name string) {
	path := filepath.Join(p.opts.Dir, name)
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		p.mu.Lock()
		delete(p.names, name)
		p.mu.Unlock()
		delete(p.done, name)
		return
	}
	if err != nil {
		p.failed(name, "refused", err)
		return
	}
	st := stamp{size: fi.Size(), mtime: fi.ModTime()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.ino = sys.Ino
	}
	if p.done[name] == st {
		return
	}
	p.done[name] = st
	if err := trusted(path, fi); err != nil {
		p.failed(name, "refused", err)
		return
	}
	switch kindOf(name) {
	case kindArchive:
		p.importArchive(ctx, name, path)
	case kindList:
		p.pullList(ctx, name, path)
	}
}

// trusted refuses a file another user could have written, or replace
// while berth reads it: whoever writes to the directory chooses what
// every pod of the image runs.
func trusted(path string, fi os.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("image preload file %s: not a regular file", path)
	}
	dir, err := os.Stat(filepath.Dir(path))
	if err != nil {
		return fmt.Errorf("image preload file %s: %w", path, err)
	}
	if sys, ok := dir.Sys().(*syscall.Stat_t); ok && sys.Uid != 0 && int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("image preload file %s: its directory is owned by uid %d, not by root", path, sys.Uid)
	}
	if dir.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("image preload file %s: its directory is writable by group or others (mode %04o)", path, dir.Mode().Perm())
	}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok && sys.Uid != 0 && int(sys.Uid) != os.Geteuid() {
		return fmt.Errorf("image preload file %s: owned by uid %d, not by root", path, sys.Uid)
	}
	if fi.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("image preload file %s: writable by group or others (mode %04o)", path, fi.Mode().Perm())
	}
	return nil
}

// failed records a file that was refused or whose import or pull failed.
func (p *Preloader) failed(name, result string, err error) {
	p.total.WithLabelValues(result).Inc()
	p.event(kuberuntime.EventWarning, ReasonPreloadFailed, err.Error())
	p.mu.Lock()
	delete(p.names, name)
	p.mu.Unlock()
}

func (p *Preloader) event(typ kuberuntime.EventType, reason, msg string) {
	if p.opts.Recorder != nil {
		p.opts.Recorder.Event(EventUID, EventName, "", typ, reason, msg)
	} else {
		p.log.Info(msg, "reason", reason)
	}
}

// importArchive reads, checks and imports one archive.
func (p *Preloader) importArchive(ctx context.Context, name, path string) {
	start := time.Now()
	a, err := imagearchive.Read(path, p.opts.Limits)
	if err != nil {
		p.failed(name, "refused", err)
		return
	}
	names := make([][]string, len(a.Images))
	var all []string
	for i, img := range a.Images {
		for _, n := range img.Names {
			norm, err := criconfig.NormalizedName(n)
			if err != nil {
				p.failed(name, "refused", fmt.Errorf("image archive %s: image name %q: %w", path, n, err))
				return
			}
			names[i] = append(names[i], norm)
			all = append(all, norm)
		}
	}
	if p.opts.Importer == nil {
		p.failed(name, "failed", fmt.Errorf("image archive %s: berth imports archives into containerd only, not into %s", path, p.opts.RuntimeName))
		return
	}
	if err := p.opts.Importer.Import(ctx, a, names); err != nil {
		if ctx.Err() != nil {
			return
		}
		p.failed(name, "failed", fmt.Errorf("image archive %s: import: %w (retried in %v)", path, err, retryFailed))
		// The runtime may be restarting: the file is read again later.
		delete(p.done, name)
		time.AfterFunc(retryFailed, func() { p.enqueue(name) })
		return
	}
	p.confirm(ctx, all)
	p.mu.Lock()
	p.names[name] = all
	p.mu.Unlock()
	p.total.WithLabelValues("imported").Inc()
	p.event(kuberuntime.EventNormal, ReasonPreloaded, fmt.Sprintf("Imported %s (%s) from %s in %v",
		strings.Join(all, ", "), a.Format, path, time.Since(start).Round(time.Millisecond)))
}

// confirm waits until the CRI lists each image an import named: the CRI
// plugin learns of them from containerd's image events, a moment after
// the import. It gives up after about ten seconds with a warning; the
// pods that wait for the import then retry their pull with back-off.
func (p *Preloader) confirm(ctx context.Context, names []string) {
	if p.opts.Images == nil {
		return
	}
	delay := 5 * time.Millisecond
	for _, n := range names {
		for waited := time.Duration(0); ; waited += delay {
			resp, err := p.opts.Images.ImageStatus(ctx, &runtimeapi.ImageSpec{Image: n}, false)
			if err == nil && resp.GetImage() != nil {
				break
			}
			if waited > 10*time.Second || ctx.Err() != nil {
				p.log.Warn("the runtime does not list an image it imported", "image", n, "err", err)
				break
			}
			select {
			case <-ctx.Done():
			case <-time.After(delay):
			}
			delay = min(2*delay, time.Second)
		}
	}
}
