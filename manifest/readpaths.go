package manifest

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// readManifest reads a manifest file and parses it. The error is for a
// file that cannot be read at all.
func readManifest(path string, maxBytes int64, nodeName string) (Result, error) {
	data, err := readLimited(path, maxBytes)
	if err != nil {
		return Result{}, err
	}
	if int64(len(data)) > maxBytes {
		return tooLarge(path, maxBytes), nil
	}
	return Parse(data, Origin{Source: SourceFile, Path: path}, nodeName), nil
}

// readLimited reads at most maxBytes+1 bytes of a file: enough to tell a
// file past the limit, which is refused whole rather than half-read,
// without reading all of it.
func readLimited(path string, maxBytes int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxBytes+1))
}

func tooLarge(path string, maxBytes int64) Result {
	return Result{Problems: []Problem{{Source: SourceFile, Origin: path, Reason: ReasonTooLarge,
		Message: fmt.Sprintf("manifest is larger than the limit of %d bytes", maxBytes)}}}
}

// ReadPaths reads manifest files and directories once, as the file source
// would (same ignore rules, size limit and duplicate rule, with the files
// taken in the order given and each directory in lexical order), for
// `berth validate`. A path that cannot be read is a Problem, not an error.
func ReadPaths(nodeName string, maxBytes int64, paths ...string) Snapshot {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	var results []merged
	var extra []Problem
	unreadable := func(path string, err error) {
		extra = append(extra, Problem{Source: SourceFile, Origin: path, Reason: ReasonUnreadable, Message: err.Error()})
	}
	var files []string
	for _, p := range paths {
		info, err := os.Stat(p)
		if err != nil {
			unreadable(p, err)
			continue
		}
		if !info.IsDir() {
			files = append(files, p)
			continue
		}
		entries, err := os.ReadDir(p)
		if err != nil {
			unreadable(p, err)
			continue
		}
		for _, e := range entries {
			full := filepath.Join(p, e.Name())
			if fi, err := os.Stat(full); isManifestName(e.Name()) && err == nil && !fi.IsDir() {
				files = append(files, full)
			}
		}
	}
	for _, f := range files {
		res, err := readManifest(f, maxBytes, nodeName)
		if err != nil {
			unreadable(f, err)
			continue
		}
		results = append(results, merged{origin: Origin{Source: SourceFile, Path: f}, res: res})
	}
	return assemble(SourceFile, results, false, extra)
}
