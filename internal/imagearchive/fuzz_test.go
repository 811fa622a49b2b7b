package imagearchive

import (
	"io"
	"os"
	"path/filepath"
	"testing"
)

// FuzzRead: no archive makes Read or StreamLayers panic or run past its
// limits, and whatever Read accepts streams only blobs of the digest it
// announced.
func FuzzRead(f *testing.F) {
	layer := makeTar(f, []tarEntry{{name: "hello", data: []byte("hi")}})
	img := newTestImage(f, layer, "")
	f.Add(makeTar(f, ociEntries(f, img, "example.com/app:1")))
	f.Add(gz(f, makeTar(f, dockerEntries(f, img, "app:1"))))
	f.Add(zst(f, makeTar(f, ociEntries(f, img, "example.com/app:1"))))
	dir := f.TempDir()
	lim := Limits{ArchiveBytes: 1 << 20, EntryBytes: 1 << 20, TotalBytes: 4 << 20, JSONBytes: 64 << 10, JSONTotalBytes: 256 << 10, Entries: 256}
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(dir, "a.tar")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		a, err := Read(p, lim)
		if err != nil {
			return
		}
		err = a.StreamLayers(func(Blob) bool { return false }, func(b Blob, r io.Reader) error {
			data, err := io.ReadAll(r)
			if err == nil && digestOf(data) != b.Digest {
				t.Fatalf("layer %s streamed with digest %s", b.Digest, digestOf(data))
			}
			return err
		})
		if err != nil {
			t.Fatalf("StreamLayers of an archive Read accepted: %v", err)
		}
	})
}
