package preload

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"go.uber.org/goleak"
	"k8s.io/apimachinery/pkg/types"

	"github.com/berth-agent/berth/internal/imagearchive"
	"github.com/berth-agent/berth/internal/kuberuntime"
)

func digest(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ociArchive is an OCI layout tarball of a one-layer image named name;
// extra entries are appended.
func ociArchive(t *testing.T, name string, extra ...string) []byte {
	t.Helper()
	var lbuf bytes.Buffer
	lw := tar.NewWriter(&lbuf)
	if err := lw.WriteHeader(&tar.Header{Name: "f", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg}); err != nil {
		t.Fatal(err)
	}
	if _, err := lw.Write([]byte(name[:1])); err != nil {
		t.Fatal(err)
	}
	lw.Close()
	layer := lbuf.Bytes()
	cfg, _ := json.Marshal(map[string]any{"rootfs": map[string]any{"type": "layers", "diff_ids": []string{digest(layer)}}})
	man, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": imagearchive.MediaTypeOCIManifest,
		"config": map[string]any{"mediaType": "application/vnd.oci.image.config.v1+json", "digest": digest(cfg), "size": len(cfg)},
		"layers": []any{map[string]any{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": digest(layer), "size": len(layer)}}})
	idx, _ := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []any{map[string]any{
		"mediaType": imagearchive.MediaTypeOCIManifest, "digest": digest(man), "size": len(man),
		"annotations": map[string]string{"io.containerd.image.name": name}}}})
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	files := [][2]string{{"oci-layout", `{"imageLayoutVersion":"1.0.0"}`}, {"index.json", string(idx)}}
	for _, b := range [][]byte{layer, cfg, man} {
		files = append(files, [2]string{"blobs/sha256/" + strings.TrimPrefix(digest(b), "sha256:"), string(b)})
	}
	for _, e := range extra {
		files = append(files, [2]string{e, "x"})
	}
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f[0], Mode: 0o644, Size: int64(len(f[1])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	return buf.Bytes()
}

// fakeImporter records imports and pins.
type fakeImporter struct {
	mu      sync.Mutex // guards the fields below
	err     error
	names   [][]string
	pinned  []string
	written int // layer bytes read from archives
}

func (f *fakeImporter) Import(_ context.Context, a *imagearchive.Archive, names [][]string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	err := a.StreamLayers(func(imagearchive.Blob) bool { return false }, func(_ imagearchive.Blob, r io.Reader) error {
		n, err := io.Copy(io.Discard, r)
		f.written += int(n)
		return err
	})
	f.names = append(f.names, names...)
	return err
}

func (f *fakeImporter) Pin(_ context.Context, keep []string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pinned = slices.Clone(keep)
	return nil
}

// eventRecorder hands each event to the test.
type eventRecorder chan string

func (r eventRecorder) Event(uid types.UID, name, _ string, typ kuberuntime.EventType, reason, msg string) {
	r <- fmt.Sprintf("%s %s %s: %s", name, typ, reason, msg)
}

func TestPreloaderFiles(t *testing.T) {
	tests := []struct {
		name      string
		file      string
		data      func(t *testing.T) []byte
		mode      os.FileMode
		dirMode   os.FileMode
		importErr error
		noImport  bool
		wantEvent string // substring of the first event
		wantNames []string
		result    string
	}{
		{name: "OCI archive", file: "app.tar", data: func(t *testing.T) []byte { return ociArchive(t, "app:1") },
			wantEvent: "Normal Preloaded: Imported docker.io/library/app:1 (oci-layout)", wantNames: []string{"docker.io/library/app:1"}, result: "imported"},
		{name: "path traversal", file: "evil.tar", data: func(t *testing.T) []byte { return ociArchive(t, "app:1", "../../etc/x") },
			wantEvent: "Warning PreloadFailed: image archive DIR/evil.tar: entry \"../../etc/x\": path with a .. element", result: "refused"},
		{name: "not an archive", file: "junk.tar.gz", data: func(*testing.T) []byte { return []byte("junk") },
			wantEvent: "Warning PreloadFailed: image archive DIR/junk.tar.gz: not a readable tar", result: "refused"},
		{name: "writable by others", file: "app.tar", mode: 0o666, data: func(t *testing.T) []byte { return ociArchive(t, "app:1") },
			wantEvent: "Warning PreloadFailed: image preload file DIR/app.tar: writable by group or others", result: "refused"},
		{name: "directory writable by others", file: "app.tar", dirMode: 0o777, data: func(t *testing.T) []byte { return ociArchive(t, "app:1") },
			wantEvent: "Warning PreloadFailed: image preload file DIR/app.tar: its directory is writable by group or others", result: "refused"},
		{name: "runtime fails", file: "app.tar", importErr: errors.New("disk full"), data: func(t *testing.T) []byte { return ociArchive(t, "app:1") },
			wantEvent: "Warning PreloadFailed: image archive DIR/app.tar: import: disk full", result: "failed"},
		{name: "no importer", file: "app.tar", noImport: true, data: func(t *testing.T) []byte { return ociArchive(t, "app:1") },
			wantEvent: "berth imports archives into containerd only, not into cri-o", result: "failed"},
		{name: "bad list", file: "images.txt", data: func(*testing.T) []byte { return []byte("# comment\n\nbusybox:1.36\nNot An Image\n") },
			wantEvent: "Warning PreloadFailed: image list DIR/images.txt:4: \"Not An Image\"", result: "refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
			dir := t.TempDir()
			imp := &fakeImporter{err: tt.importErr}
			events := make(eventRecorder, 10)
			reg := prometheus.NewRegistry()
			// No image service: confirming an import against the CRI is
			// the e2e tests' (it waits on the real runtime's events).
			opts := Options{Dir: dir, Importer: imp, RuntimeName: "cri-o",
				Recorder: events, Logger: slog.New(slog.DiscardHandler), Metrics: reg}
			if tt.noImport {
				opts.Importer = nil
			}
			p, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error)
			go func() { done <- p.Run(ctx) }()
			defer func() { cancel(); <-done }()

			if tt.dirMode != 0 {
				if err := os.Chmod(dir, tt.dirMode); err != nil {
					t.Fatal(err)
				}
			}
			// A dotfile is never read: renamed into place, the file is.
			mode := tt.mode
			if mode == 0 {
				mode = 0o600
			}
			tmp := filepath.Join(dir, "."+tt.file)
			if err := os.WriteFile(tmp, tt.data(t), mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(tmp, mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, filepath.Join(dir, tt.file)); err != nil {
				t.Fatal(err)
			}
			got := <-events
			if want := strings.ReplaceAll(tt.wantEvent, "DIR", dir); !strings.Contains(got, want) || !strings.HasPrefix(got, EventName+" ") {
				t.Fatalf("event %q, want %q", got, want)
			}
			if v := testutil.ToFloat64(p.total.WithLabelValues(tt.result)); v != 1 {
				t.Errorf("berth_image_preload_total{result=%q} = %v, want 1", tt.result, v)
			}
			if got := p.Images(); !slices.Equal(got, tt.wantNames) {
				t.Errorf("Images() = %v, want %v", got, tt.wantNames)
			}
			if err := p.Pin(ctx, []string{"docker.io/library/kept:1"}); err != nil {
				t.Fatal(err)
			}
			if !tt.noImport {
				imp.mu.Lock()
				pinned := imp.pinned
				imp.mu.Unlock()
				if want := append([]string{"docker.io/library/kept:1"}, tt.wantNames...); !slices.Equal(pinned, want) {
					t.Errorf("pinned %v, want %v", pinned, want)
				}
			}
			// Removing the file forgets its images.
			if err := os.Remove(filepath.Join(dir, tt.file)); err != nil {
				t.Fatal(err)
			}
			// As the watch reports it (it may have already: then this
			// finds nothing more to do).
			p.enqueue(tt.file)
			for pending := p.Pending(); pending != nil; pending = p.Pending() {
				<-pending
			}
			if got := p.Images(); len(got) != 0 {
				t.Errorf("Images() after the file's removal = %v", got)
			}
		})
	}
}

// TestPreloaderPendingAtStart: a file there before the start is pending
// from New on, until Run imported it.
func TestPreloaderPendingAtStart(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "app.tar"), ociArchive(t, "example.com/app:1"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README"), []byte("ignored"), 0o600); err != nil {
		t.Fatal(err)
	}
	imp := &fakeImporter{}
	p, err := New(Options{Dir: dir, Importer: imp, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	pending := p.Pending()
	if pending == nil {
		t.Fatal("nothing pending before Run")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	<-pending
	if got := p.Images(); !slices.Equal(got, []string{"example.com/app:1"}) {
		t.Errorf("Images() = %v after the start", got)
	}
	if p.Pending() != nil {
		t.Error("still pending after the import")
	}
	if imp.written == 0 {
		t.Error("no layer was streamed to the importer")
	}
}

func TestReadList(t *testing.T) {
	tests := []struct {
		name, text string
		want       []string
		wantErr    string
	}{
		{name: "refs, comments, blanks", text: "# images\nbusybox:1.36\n\n  example.com/app@sha256:" + strings.Repeat("a", 64) + "  \n",
			want: []string{"busybox:1.36", "example.com/app@sha256:" + strings.Repeat("a", 64)}},
		{name: "invalid", text: "busybox:1.36\nhttp://x/y\n", wantErr: "list.txt:2: \"http://x/y\""},
		{name: "too long", text: strings.Repeat("#"+strings.Repeat("x", 1000)+"\n", 1100), wantErr: "more than 1048576 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := readList("list.txt", strings.NewReader(tt.text))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("readList = %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}
