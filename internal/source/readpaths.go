package source

import (
	"errors"
	"fmt"
	"io"
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
	// Stdin is what the path "-" reads, shown as StdinName, within
	// MaxBytes; nil: "-" is a file name like any other.
	Stdin io.Reader
}

// StdinName is how problems name the manifest read from standard input.
const StdinName = "<stdin>"

// ReadPaths reads manifest files and directories once, as the file source
// would (same ignore rules, limits and duplicate rule, only regular files,
// never blocking, with the files taken in the order given and each
// directory in lexical order), for `berth validate`. A path that cannot be
// read is a Problem, not an error.
func ReadPaths(opts ReadOptions, paths ...string) podsnapshot.Snapshot {
	snap, _ := ReadManifests(opts, paths...)
	return snap
}

// ReadManifests is ReadPaths that also returns the manifests it read
// (files, and StdinName for "-"), in order, for berth validate's summary.
func ReadManifests(opts ReadOptions, paths ...string) (podsnapshot.Snapshot, []string) {
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
		if p == "-" && opts.Stdin != nil {
			files = append(files, p)
			continue
		}
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
		if f == "-" && opts.Stdin != nil {
			results = append(results, readStdin(opts, maxBytes))
			continue
		}
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
	read := make([]string, 0, len(results))
	for _, m := range results {
		read = append(read, m.Origin.Path)
	}
	return podsnapshot.Assemble(podspec.SourceFile, results, false, extra, podsnapshot.NewResolver(nil)), read
}

// readStdin reads the manifest on standard input as ReadPaths reads a
// file: at most maxBytes, else refused as too large. No permissions apply.
func readStdin(opts ReadOptions, maxBytes int64) podsnapshot.Merged {
	origin := podspec.Origin{Source: podspec.SourceFile, Path: StdinName}
	data, err := io.ReadAll(io.LimitReader(opts.Stdin, maxBytes+1))
	switch {
	case err != nil:
		return podsnapshot.Merged{Origin: origin, Result: podspec.Result{Problems: []podspec.Problem{fileProblem(StdinName, fmt.Errorf("reading standard input: %w", err))}}}
	case int64(len(data)) > maxBytes:
		return podsnapshot.Merged{Origin: origin, Result: tooLarge(StdinName, maxBytes)}
	}
	return podsnapshot.Merged{Origin: origin, Result: podspec.ParseLimited(data, origin, opts.NodeName, opts.MaxPods)}
}
