package manifest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// fileProblem turns a failure of readManifestFile into the Problem shown
// for the file.
func fileProblem(path string, err error) Problem {
	reason := ReasonUnreadable
	var nr *notRegularError
	switch {
	case errors.As(err, &nr):
		reason = ReasonNotRegular
	case isPermissionError(err):
		reason = ReasonPermissions
	}
	return Problem{Source: SourceFile, Origin: path, Reason: reason, Message: err.Error()}
}

func tooLarge(path string, maxBytes int64) Result {
	return Result{Problems: []Problem{{Source: SourceFile, Origin: path, Reason: ReasonTooLarge,
		Message: fmt.Sprintf("manifest is larger than the limit of %d bytes", maxBytes)}}}
}

// ReadOptions are the limits `berth validate` reads manifests with, those
// of the daemon.
type ReadOptions struct {
	NodeName string
	// MaxBytes limits one file (DefaultMaxBytes when 0).
	MaxBytes int64
	// MaxPods sets the document limit, see MaxDocuments.
	MaxPods int
	// Permissions, when strict, refuses manifests others may write, and
	// those holding a Secret others may read, as the daemon does; "" and
	// warn do not check.
	Permissions Permissions
}

// ReadPaths reads manifest files and directories once, as the file source
// would (same ignore rules, limits and duplicate rule, only regular files,
// never blocking, with the files taken in the order given and each
// directory in lexical order), for `berth validate`. A path that cannot be
// read is a Problem, not an error.
func ReadPaths(opts ReadOptions, paths ...string) Snapshot {
	maxBytes := opts.MaxBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBytes
	}
	strict := opts.Permissions == PermissionsStrict
	var results []merged
	var extra []Problem
	unreadable := func(path string, err error) {
		extra = append(extra, fileProblem(path, err))
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
		if err := checkManifestDir(p); strict && err != nil {
			unreadable(p, err)
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
		m, err := readManifestFile(f, maxBytes)
		if err == nil && strict && m.perm != nil {
			err = m.perm
		}
		if err != nil {
			unreadable(f, err)
			continue
		}
		res := tooLarge(f, maxBytes)
		if int64(len(m.data)) <= maxBytes {
			res = ParseLimited(m.data, Origin{Source: SourceFile, Path: f}, opts.NodeName, opts.MaxPods)
		}
		if err := checkSecretFile(f, m.info); strict && res.secret && err != nil {
			unreadable(f, err)
			continue
		}
		results = append(results, merged{origin: Origin{Source: SourceFile, Path: f}, res: res})
	}
	return assemble(SourceFile, results, false, extra, &resolver{})
}
