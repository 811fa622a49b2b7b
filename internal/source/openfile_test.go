package source

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/berth-agent/berth/internal/podsnapshot"
	"github.com/berth-agent/berth/internal/podspec"
	"github.com/berth-agent/berth/internal/podspec/podspectest"
)

// specialFiles makes, in dir, one of each kind of file that is not a
// regular file, under manifest names.
func specialFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sock.yaml")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	dev := filepath.Join(dir, "dev.yaml")
	if err := os.Symlink("/dev/zero", dev); err != nil {
		t.Fatal(err)
	}
	return map[string]string{fifo: "named pipe", sock: "socket", dev: "character device"}
}

// TestReadManifestFileRefusesSpecialFiles checks a FIFO, a socket or a
// device named like a manifest is refused at once, never read or waited on.
func TestReadManifestFileRefusesSpecialFiles(t *testing.T) {
	for path, kind := range specialFiles(t, t.TempDir()) {
		done := make(chan error, 1)
		go func() {
			_, err := readManifestFile(path, podspec.DefaultMaxBytes)
			done <- err
		}()
		select {
		case err := <-done:
			var nr *notRegularError
			if !errors.As(err, &nr) || !strings.Contains(err.Error(), kind) {
				t.Errorf("%s: err %v, want a %s refused as not a regular file", filepath.Base(path), err, kind)
			}
		case <-time.After(5 * time.Second):
			// Unblock the reader so the test ends.
			if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
				f.Close()
			}
			t.Fatalf("%s: reading blocked", filepath.Base(path))
		}
	}
}

// TestFileSourceSpecialFiles checks the file source never blocks on a FIFO
// present at start or added later: the other manifests start and stop, and
// the source is ready.
func TestFileSourceSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "a.yaml"), podspectest.Manifest("a", "img:1"))
	specialFiles(t, dir)
	st := watchedSource(t, Config{ManifestPath: dir})
	if got := next(t, st); got != "ADD a-node1 img:1" {
		t.Fatalf("initial: %q", got)
	}
	if !st.SourcesReady() {
		t.Error("not ready with a FIFO in the directory")
	}
	if got, want := problemsOf(st), "NotRegularFile dev.yaml \nNotRegularFile fifo.yaml \nNotRegularFile sock.yaml "; got != want {
		t.Errorf("problems:\n%s\nwant:\n%s", got, want)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "late.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, "b.yaml"), podspectest.Manifest("b", "img:1"))
	if got := next(t, st); got != "ADD b-node1 img:1" {
		t.Fatalf("after a FIFO was added: %q", got)
	}
	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	if got := next(t, st); got != "REMOVE a-node1 img:1" {
		t.Fatalf("remove: %q", got)
	}
	eventually(t, "the late FIFO's problem", func() bool { return strings.Contains(problemsOf(st), "late.yaml") })
}

// TestReadPathsSpecialFiles checks `berth validate` refuses them too.
func TestReadPathsSpecialFiles(t *testing.T) {
	dir := t.TempDir()
	specialFiles(t, dir)
	done := make(chan podsnapshot.Snapshot, 1)
	go func() {
		done <- ReadPaths(ReadOptions{NodeName: podspectest.Node}, dir, filepath.Join(dir, "fifo.yaml"))
	}()
	select {
	case snap := <-done:
		var got []string
		for _, p := range snap.Problems {
			got = append(got, p.Reason+" "+filepath.Base(p.Origin))
		}
		want := "NotRegularFile dev.yaml, NotRegularFile fifo.yaml, NotRegularFile sock.yaml, NotRegularFile fifo.yaml"
		if strings.Join(got, ", ") != want {
			t.Errorf("problems %q, want %q", strings.Join(got, ", "), want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ReadPaths blocked on a FIFO")
	}
}
