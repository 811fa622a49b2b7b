package source

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/berth-agent/berth/internal/podsnapshot"
	"github.com/berth-agent/berth/internal/podspec"
)

// fileProblem turns a failure of readManifestFile into the Problem shown
// for the file.
func fileProblem(path string, err error) podspec.Problem {
	reason := ReasonUnreadable
	var nr *notRegularError
	switch {
	case errors.As(err, &nr):
		reason = ReasonNotRegular
	case isPermissionError(err):
		reason = ReasonPermissions
	}
	return podspec.Problem{Source: podspec.SourceFile, Origin: path, Reason: reason, Message: err.Error()}
}

func tooLarge(path string, maxBytes int64) podspec.Result {
	return podspec.Result{Problems: []podspec.Problem{{Source: podspec.SourceFile, Origin: path, Reason: podspec.ReasonTooLarge,
		Message: fmt.Sprintf("manifest is larger than the limit of %d bytes", maxBytes)}}}
}

// ReadOptions are the limits `berth validate` reads manifests with, those
// of the daemon.
type ReadOptions struct {
	NodeName string
	// MaxBytes limits one file (podspec.DefaultMaxBytes when 0).
	MaxBytes int64
	// MaxPods sets the document limit, see podspec.MaxDocuments.
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
func ReadPaths(opts ReadOptions, paths ...string) podsnapshot.Snapshot {
	maxBytes := opts.MaxBytes
	if maxBytes <= 0 {
		maxBytes = podspec.DefaultMaxBytes
	}
	strict := opts.Permissions == PermissionsStrict
	var results []podsnapshot.Merged
	var extra []podspec.Problem
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
			res = podspec.ParseLimited(m.data, podspec.Origin{Source: podspec.SourceFile, Path: f}, opts.NodeName, opts.MaxPods)
		}
		if err := checkSecretFile(f, m.info); strict && res.HoldsSecret() && err != nil {
			unreadable(f, err)
			continue
		}
		results = append(results, podsnapshot.Merged{Origin: podspec.Origin{Source: podspec.SourceFile, Path: f}, Result: res})
	}
	return podsnapshot.Assemble(podspec.SourceFile, results, false, extra, podsnapshot.NewResolver(nil))
}
