package source

import (
	"crypto/sha256"
	"os"
	"runtime"
	"sync"

	"github.com/berth-agent/berth/internal/podspec"
)

// preparsed is one manifest file parsed ahead of its read: the hash of the
// bytes that were parsed (not the bytes: a directory of large files would
// hold them all at once) and what they yield.
type preparsed struct {
	sum [sha256.Size]byte
	res podspec.Result
}

// preparse parses, on every core, the manifest files among paths that are
// new or changed since they were last read, so that a scan finding many at
// once (the first scan of a boot) does not parse them one after the other
// while every pod waits (on 2 cores, with 50 manifests at boot: 4 ms of
// the 39 from berth's exec to its first pod). It decides nothing: read
// still reads each file, checks it and keeps what it yields, and takes the
// result from here only for the very bytes it read (see parse).
//
// Files that need a signature are not parsed ahead: their bytes reach the
// parser only once the signature holds. Nor are files refused for who may
// write them, nor those read could not use.
func (s *fileSource) preparse(paths []string) map[string]*preparsed {
	if s.signed != nil {
		return nil
	}
	var todo []string
	for _, p := range paths {
		prev := s.files[p]
		if prev == nil || prev.info == nil {
			todo = append(todo, p)
			continue
		}
		if info, err := os.Stat(p); err == nil && !sameVersion(prev.info, info) {
			todo = append(todo, p)
		}
	}
	// One file alone gains nothing from another goroutine.
	if len(todo) < 2 {
		return nil
	}
	out := make([]*preparsed, len(todo))
	onAllCores(len(todo), func(i int) {
		m, err := readManifestFile(todo[i], s.maxBytes)
		if err != nil || m.perm != nil || int64(len(m.data)) > s.maxBytes {
			return
		}
		out[i] = &preparsed{sum: sha256.Sum256(m.data), res: podspec.ParseKeyed(m.data, podspec.Origin{Source: podspec.SourceFile, Path: todo[i]}, s.nodeName, s.maxPods, s.uidKey)}
	})
	byPath := make(map[string]*preparsed, len(todo))
	for i, p := range todo {
		if out[i] != nil {
			byPath[p] = out[i]
		}
	}
	return byPath
}

// parse is what the manifest file p holding data yields: ahead's result
// when preparse parsed these same bytes, else a parse now.
func (s *fileSource) parse(p string, data []byte, ahead *preparsed) podspec.Result {
	if ahead != nil && ahead.sum == sha256.Sum256(data) {
		return ahead.res
	}
	return podspec.ParseKeyed(data, podspec.Origin{Source: podspec.SourceFile, Path: p}, s.nodeName, s.maxPods, s.uidKey)
}

// onAllCores calls do(i) for every i in [0, n), on as many goroutines as
// the process has cores, and returns once every call has. The calls must
// be independent of each other (each writes only its own index's result).
func onAllCores(n int, do func(i int)) {
	workers := min(runtime.GOMAXPROCS(0), n)
	if workers <= 1 {
		for i := range n {
			do(i)
		}
		return
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for i := range next {
				do(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
