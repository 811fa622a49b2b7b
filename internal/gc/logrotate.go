package gc

import (
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
)

// Rotated log naming, the kubelet container log manager's: the current file
// <n>.log is renamed <n>.log.<timestamp>, compressed later into
// <n>.log.<timestamp>.gz; a compression in progress writes .gz.tmp.
const (
	rotateTimestampFormat = "20060102-150405"
	compressSuffix        = ".gz"
	tmpSuffix             = ".tmp"
)

// LogRotationPolicy is --container-log-max-size, --container-log-max-files
// and --container-log-max-workers.
type LogRotationPolicy struct {
	// MaxSize is the size at which a container's current log file is
	// rotated.
	MaxSize int64
	// MaxFiles counts the current file and the rotated ones, compressed or
	// not; at least 2.
	MaxFiles int
	// Workers bounds how many containers' logs are worked on at once.
	Workers int
}

// LogRotationResult is what one RotateLogs pass did.
type LogRotationResult struct {
	// Rotated are the log files that were rotated (their current path).
	Rotated []string
	// Compressed counts rotated files compressed.
	Compressed int
	// Removed counts rotated files removed beyond MaxFiles.
	Removed int
	Errors  []error
}

// logRotator keeps what RotateLogs remembers between passes. Its mutex
// guards pending, which workers of one pass share.
type logRotator struct {
	mu sync.Mutex
	// pending are files rotated in an earlier pass and not yet compressed:
	// the runtime may still write to a file until ReopenContainerLog has
	// returned and its in-flight writes landed, so a file is compressed
	// one pass after its rotation, never in the same one.
	// pending maps each such rotated file to its current file.
	pending map[string]string
}

// RotateLogs checks the current log file of each given running container
// and rotates those over the size limit, like the kubelet's container log
// manager: remove leftovers of an interrupted pass, remove the oldest
// rotated files beyond MaxFiles, compress the uncompressed ones, rename the
// current file to <file>.<timestamp> and have the runtime reopen it
// (ReopenContainerLog). A container under the limit costs one stat and no
// runtime call; its path comes from the status cache the relist keeps. At
// most policy.Workers containers are worked on at once.
func (c *Collector) RotateLogs(ctx context.Context, containerIDs []string, policy LogRotationPolicy) LogRotationResult {
	var (
		mu  sync.Mutex // guards res
		res LogRotationResult
		wg  sync.WaitGroup
	)
	current := map[string]bool{}
	var work [][2]string
	for _, id := range containerIDs {
		if path, _, known := c.manager.ContainerFiles(id); known && path != "" {
			current[path] = true
			work = append(work, [2]string{id, path})
		}
	}
	// Files rotated before their container stopped are written no more.
	for _, f := range c.logs.takeOrphaned(current) {
		if err := compressLog(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			res.Errors = append(res.Errors, err)
		} else if err == nil {
			res.Compressed++
		}
	}
	sem := make(chan struct{}, max(policy.Workers, 1))
	for _, w := range work {
		id, path := w[0], w[1]
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return res
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			r := c.rotateOne(ctx, id, path, policy)
			mu.Lock()
			defer mu.Unlock()
			res.Rotated = append(res.Rotated, r.Rotated...)
			res.Compressed += r.Compressed
			res.Removed += r.Removed
			res.Errors = append(res.Errors, r.Errors...)
		}()
	}
	wg.Wait()
	slices.Sort(res.Rotated)
	return res
}

// rotateOne handles one container's log: compress what an earlier pass
// rotated, then rotate the current file if it is over the limit.
func (c *Collector) rotateOne(ctx context.Context, id, path string, policy LogRotationPolicy) LogRotationResult {
	var res LogRotationResult
	fail := func(err error) LogRotationResult {
		res.Errors = append(res.Errors, fmt.Errorf("rotate log of container %q: %w", id, err))
		return res
	}
	for _, f := range c.logs.takePending(path) {
		if err := compressLog(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fail(err)
		}
		res.Compressed++
	}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return res
	}
	if err != nil {
		return fail(err)
	}
	if fi.Size() < policy.MaxSize {
		return res
	}
	rotated, err := filepath.Glob(globEscape(path) + ".*")
	if err != nil {
		return fail(err)
	}
	rotated, err = cleanupUnusedLogs(rotated)
	if err != nil {
		return fail(err)
	}
	rotated, removed, err := removeExcessLogs(rotated, policy.MaxFiles)
	res.Removed += removed
	if err != nil {
		return fail(err)
	}
	for _, f := range rotated {
		if strings.HasSuffix(f, compressSuffix) {
			continue
		}
		if err := compressLog(f); err != nil {
			return fail(err)
		}
		res.Compressed++
	}
	target := path + "." + c.clock.Now().Format(rotateTimestampFormat)
	if _, err := os.Lstat(target); err == nil {
		// Rotated twice within a second: the next pass does it.
		return res
	}
	if err := os.Rename(path, target); err != nil {
		return fail(err)
	}
	if err := c.runtime.ReopenContainerLog(ctx, id); err != nil {
		// Put the file back so nothing is lost and the next pass retries.
		if rerr := os.Rename(target, path); rerr != nil {
			return fail(fmt.Errorf("reopen: %w; and the rotated file %s could not be renamed back: %v", err, target, rerr))
		}
		return fail(fmt.Errorf("reopen: %w", err))
	}
	c.logs.addPending(path, target)
	res.Rotated = append(res.Rotated, path)
	return res
}

func (r *logRotator) addPending(current, rotated string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.pending == nil {
		r.pending = map[string]string{}
	}
	r.pending[rotated] = current
}

// takePending returns and forgets the files of current that wait to be
// compressed.
func (r *logRotator) takePending(current string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for f, cur := range r.pending {
		if cur == current {
			out = append(out, f)
			delete(r.pending, f)
		}
	}
	slices.Sort(out)
	return out
}

// takeOrphaned returns and forgets the pending files whose current log is
// not in current: their container is no longer running.
func (r *logRotator) takeOrphaned(current map[string]bool) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for f, cur := range r.pending {
		if !current[cur] {
			out = append(out, f)
			delete(r.pending, f)
		}
	}
	slices.Sort(out)
	return out
}

// cleanupUnusedLogs removes what an interrupted compression left: temporary
// files, and uncompressed files whose compressed copy is complete. It
// returns the rotated files that remain.
func cleanupUnusedLogs(logs []string) ([]string, error) {
	var keep []string
	for _, l := range logs {
		switch {
		case strings.HasSuffix(l, tmpSuffix):
			if err := os.Remove(l); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
		case !strings.HasSuffix(l, compressSuffix) && slices.Contains(logs, l+compressSuffix):
			if err := os.Remove(l); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
		default:
			keep = append(keep, l)
		}
	}
	return keep, nil
}

// removeExcessLogs removes the oldest rotated files so that, with the
// current file and the one about to be rotated, at most maxFiles remain.
// Timestamps sort as strings, oldest first.
func removeExcessLogs(logs []string, maxFiles int) ([]string, int, error) {
	slices.Sort(logs)
	keep := max(maxFiles-2, 0)
	n := 0
	for ; n < len(logs)-keep; n++ {
		if err := os.Remove(logs[n]); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, n, err
		}
	}
	return logs[n:], n, nil
}

// compressLog gzips a rotated file into <file>.gz, through a temporary
// file so a crash never leaves a truncated .gz that looks complete, then
// removes the original.
func compressLog(path string) (err error) {
	in, err := os.Open(path)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := path + compressSuffix + tmpSuffix
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o640)
	if err != nil {
		return fmt.Errorf("compress %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			out.Close()
			os.Remove(tmp)
		}
	}()
	zw := gzip.NewWriter(out)
	if _, err := io.Copy(zw, in); err != nil {
		return fmt.Errorf("compress %s: %w", path, err)
	}
	if err := zw.Close(); err != nil {
		return fmt.Errorf("compress %s: %w", path, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("compress %s: %w", path, err)
	}
	if err := os.Rename(tmp, path+compressSuffix); err != nil {
		return fmt.Errorf("compress %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("compress %s: remove the original: %w", path, err)
	}
	return nil
}
