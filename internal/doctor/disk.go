package doctor

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// Free-space thresholds, in percent of the filesystem, for both blocks and
// inodes. Under warnFreePercent is a WARN: it is the kubelet's default hard
// eviction threshold for its node filesystem (nodefs.available<10%), the
// point where a kubelet would be evicting pods, and image GC (which frees
// the image filesystem down to 80% used from 85%) should have kept it well
// above; berth evicts nothing, so the operator has to know. Under
// failFreePercent is a FAIL: the reserved blocks of ext4 are already
// excluded from what is available, and an image pull needs its compressed
// layers and their unpacked copy side by side, so the next pull or log
// rotation is likely to hit ENOSPC (2% of a 32 GiB disk is 650 MiB).
const (
	warnFreePercent = 10
	failFreePercent = 2
)

// fsFree is the free share of one filesystem.
type fsFree struct {
	path                  string
	availBytes, sizeBytes uint64
	freeInodes, allInodes uint64 // allInodes 0: the filesystem has no fixed count (btrfs)
	bytesPct, inodesPct   float64
}

func (e *env) measure(path string) (fsFree, error) {
	var st unix.Statfs_t
	if err := e.statfs(path, &st); err != nil {
		return fsFree{}, fmt.Errorf("statfs %s: %w", path, err)
	}
	f := fsFree{path: path, availBytes: st.Bavail * uint64(st.Bsize), sizeBytes: st.Blocks * uint64(st.Bsize),
		freeInodes: st.Ffree, allInodes: st.Files, bytesPct: 100, inodesPct: 100}
	if st.Blocks > 0 {
		f.bytesPct = 100 * float64(st.Bavail) / float64(st.Blocks)
	}
	if st.Files > 0 {
		f.inodesPct = 100 * float64(st.Ffree) / float64(st.Files)
	}
	return f, nil
}

// status rates the worse of the blocks and the inodes.
func (f fsFree) status() Status {
	low := min(f.bytesPct, f.inodesPct)
	switch {
	case low < failFreePercent:
		return Fail
	case low < warnFreePercent:
		return Warn
	}
	return OK
}

func (f fsFree) String() string {
	s := fmt.Sprintf("%s: %s free of %s (%.0f%%)", f.path, bytesString(f.availBytes), bytesString(f.sizeBytes), f.bytesPct)
	if f.allInodes > 0 && f.inodesPct < warnFreePercent {
		s += fmt.Sprintf(", %d of %d inodes free (%.0f%%)", f.freeInodes, f.allInodes, f.inodesPct)
	}
	return s
}

// bytesString is n in binary units with one decimal.
func bytesString(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// rate turns measured filesystems into a line: the worst one decides.
// what is what runs out of space there; free says how to make room.
func rate(check, what, free string, fss []fsFree) Result {
	r := Result{Check: check, Status: OK}
	var parts []string
	for _, f := range fss {
		if f.status().rank() > r.Status.rank() {
			r.Status = f.status()
		}
		parts = append(parts, f.String())
	}
	r.Message = strings.Join(parts, "; ")
	switch r.Status {
	case Fail:
		r.Message += fmt.Sprintf(": under %d%% free, %s will soon fail for want of space", failFreePercent, what)
		r.Fix = free + ", or grow the filesystem"
	case Warn:
		r.Message += fmt.Sprintf(": under %d%% free, where a kubelet would evict pods; berth evicts none", warnFreePercent)
		r.Fix = free + ", or grow the filesystem"
	}
	return r
}

// checkImageFs: free space on the filesystems the runtime keeps images
// (and container layers) on, as its ImageFsInfo names them, measured
// with statfs as the image GC does.
func (e *env) checkImageFs(ctx context.Context, ri *runtimeInfo) Result {
	const check = "image-fs"
	if ri.err != nil {
		return notChecked(check)
	}
	resp, err := e.is.ImageFsInfo(ctx)
	if err != nil {
		return Result{Check: check, Status: Warn, Message: "the runtime's image filesystem: " + err.Error(), Fix: "see the runtime's log (journalctl -u containerd)"}
	}
	seen := map[string]bool{}
	var fss []fsFree
	var errs []error
	for _, fs := range append(resp.GetImageFilesystems(), resp.GetContainerFilesystems()...) {
		mp := fs.GetFsId().GetMountpoint()
		if mp == "" || seen[mp] {
			continue
		}
		seen[mp] = true
		f, err := e.measure(mp)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fss = append(fss, f)
	}
	if err := errors.Join(errs...); err != nil {
		return Result{Check: check, Status: Warn, Message: "the runtime's image filesystem: " + err.Error(), Fix: "run berth doctor as root, on the runtime's host"}
	}
	if len(fss) == 0 {
		return Result{Check: check, Status: Warn, Message: ri.name() + " names no image filesystem, so its free space was not checked",
			Fix: "check the free space where the runtime keeps its images (crictl imagefsinfo names it)"}
	}
	return rate(check, "image pulls", "remove unused images (crictl rmi --prune)", fss)
}

// checkFreeSpace: free space on the filesystem of one of berth's
// directories. A directory not created yet (before berth's first start)
// is measured on its nearest existing parent, where it will be created.
func (e *env) checkFreeSpace(check, flag, dir string) Result {
	if dir == "" {
		return Result{Check: check, Status: OK, Message: "no " + flag + " to check"}
	}
	path := filepath.Clean(dir)
	for !exists(path) && path != filepath.Dir(path) {
		path = filepath.Dir(path)
	}
	f, err := e.measure(path)
	if err != nil {
		return Result{Check: check, Status: Warn, Message: flag + " " + dir + ": " + err.Error(), Fix: "run berth doctor as root, with the settings berth runs with"}
	}
	what, free := "container logs", "lower --container-log-max-size or --container-log-max-files, or free space on that filesystem (journalctl --vacuum-size=500M for the journal)"
	if flag == "--root-dir" {
		what, free = "emptyDir volumes and berth's state", "free space on that filesystem (du -sh "+dir+"/pods/* shows the pods' volumes)"
	}
	if path != dir {
		f.path = fmt.Sprintf("%s (for %s, not created yet)", path, dir)
	}
	return rate(check, what, free, []fsFree{f})
}
