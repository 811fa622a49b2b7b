package source

import (
	"crypto/sha256"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"

	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podspec/podspectest"
	"github.com/berth-agent/berth/internal/source/signature"
	"github.com/berth-agent/berth/internal/store"
)

// TestPreparse covers which files a rescan parses ahead on every core and
// that what read keeps is always what the file holds when read reads it.
func TestPreparse(t *testing.T) {
	for _, tc := range []struct {
		name string
		// prepare changes the directory after a first rescan; the next
		// preparse then sees the files of want.
		prepare func(t *testing.T, dir string, s *fileSource)
		want    []string
	}{{
		name:    "a first scan parses every file ahead",
		prepare: func(t *testing.T, dir string, s *fileSource) { clear(s.files) },
		want:    []string{"a.yaml", "b.yaml", "c.yaml"},
	}, {
		name:    "files unchanged since their read are not parsed again",
		prepare: func(t *testing.T, dir string, s *fileSource) {},
	}, {
		name: "changed and new files are",
		prepare: func(t *testing.T, dir string, s *fileSource) {
			renameIn(t, filepath.Join(dir, "b.yaml"), podspectest.Manifest("b", "img:2"))
			write(t, filepath.Join(dir, "d.yaml"), podspectest.Manifest("d", "img:1"))
		},
		want: []string{"b.yaml", "d.yaml"},
	}, {
		name: "a file others may write is not",
		prepare: func(t *testing.T, dir string, s *fileSource) {
			clear(s.files)
			if err := os.Chmod(filepath.Join(dir, "a.yaml"), 0o666); err != nil {
				t.Fatal(err)
			}
		},
		want: []string{"b.yaml", "c.yaml"},
	}, {
		name: "a source that needs signatures parses nothing unchecked",
		prepare: func(t *testing.T, dir string, s *fileSource) {
			clear(s.files)
			s.signed = &signature.Origin{}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var paths []string
			for _, n := range []string{"a", "b", "c"} {
				p := filepath.Join(dir, n+".yaml")
				write(t, p, podspectest.Manifest(n, "img:1"))
				paths = append(paths, p)
			}
			s := newFileSource(Config{ManifestPath: dir, NodeName: podspectest.Node,
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, store.New(podspec.SourceFile))
			s.rescan(true)
			tc.prepare(t, dir, s)
			if _, err := os.Stat(filepath.Join(dir, "d.yaml")); err == nil {
				paths = append(paths, filepath.Join(dir, "d.yaml"))
			}
			got := s.preparse(paths)
			var names []string
			for p, pre := range got {
				names = append(names, filepath.Base(p))
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				parsed := podspec.ParseLimited(data, podspec.Origin{Source: podspec.SourceFile, Path: p}, podspectest.Node, s.maxPods)
				if pre.sum != sha256.Sum256(data) || len(pre.res.Pods) != 1 || pre.res.Pods[0].UID != parsed.Pods[0].UID {
					t.Errorf("%s: parsed ahead %+v, parsed now %+v", p, pre.res.Pods, parsed.Pods)
				}
			}
			slices.Sort(names)
			if !slices.Equal(names, tc.want) {
				t.Fatalf("parsed ahead %v, want %v", names, tc.want)
			}
		})
	}
}

// TestPreparseNotTakenForOtherBytes: a file replaced between its parse
// ahead and its read yields what read read, not what was parsed ahead.
func TestPreparseNotTakenForOtherBytes(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for _, n := range []string{"a", "b"} {
		p := filepath.Join(dir, n+".yaml")
		write(t, p, podspectest.Manifest(n, "img:1"))
		paths = append(paths, p)
	}
	s := newFileSource(Config{ManifestPath: dir, NodeName: podspectest.Node,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, store.New(podspec.SourceFile))
	ahead := s.preparse(paths)
	if len(ahead) != 2 {
		t.Fatalf("parsed ahead: %d files, want 2", len(ahead))
	}
	renameIn(t, paths[0], podspectest.Manifest("a", "img:2"))
	for _, p := range paths {
		s.read(p, true, ahead[p])
	}
	if got := s.files[paths[0]].res.Pods[0].Spec.Containers[0].Image; got != "img:2" {
		t.Fatalf("a.yaml replaced after its parse ahead yields image %q, want img:2", got)
	}
	if got := s.files[paths[1]].res.Pods[0].Spec.Containers[0].Image; got != "img:1" {
		t.Fatalf("b.yaml yields image %q, want img:1", got)
	}
}

// TestOnAllCores: every index exactly once, whatever n.
func TestOnAllCores(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 50} {
		calls := make([]atomic.Int32, n)
		onAllCores(n, func(i int) { calls[i].Add(1) })
		for i := range calls {
			if c := calls[i].Load(); c != 1 {
				t.Fatalf("n=%d: index %d called %d times", n, i, c)
			}
		}
	}
}
