package imagearchive

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/klauspost/compress/zstd"
)

// Limits bound what Read accepts from one archive.
type Limits struct {
	// ArchiveBytes bounds the archive file as it is on disk.
	ArchiveBytes int64
	// EntryBytes bounds one entry of the (decompressed) tar.
	EntryBytes int64
	// TotalBytes bounds what the archive decompresses to: the
	// decompression-bomb bound.
	TotalBytes int64
	// JSONBytes bounds each JSON document (manifest.json, index.json, an
	// image manifest, index or config); JSONTotalBytes all of them.
	JSONBytes      int64
	JSONTotalBytes int64
	// Entries bounds the number of tar entries.
	Entries int
}

// DefaultLimits are generous for a device's images and still bound what
// a hostile archive can cost: 16 GiB on disk, 8 GiB per entry, 32 GiB
// decompressed, 4 MiB per JSON document and 64 MiB of them, 100000
// entries.
func DefaultLimits() Limits {
	return Limits{
		ArchiveBytes: 16 << 30, EntryBytes: 8 << 30, TotalBytes: 32 << 30,
		JSONBytes: 4 << 20, JSONTotalBytes: 64 << 20, Entries: 100000,
	}
}

// Format is the kind of an archive.
type Format string

const (
	FormatDocker Format = "docker-archive"
	FormatOCI    Format = "oci-layout"
)

// Media types of the documents Read understands or writes.
const (
	MediaTypeOCIIndex       = "application/vnd.oci.image.index.v1+json"
	MediaTypeOCIManifest    = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeDockerList     = "application/vnd.docker.distribution.manifest.list.v2+json"
	MediaTypeDockerManifest = "application/vnd.docker.distribution.manifest.v2+json"
	MediaTypeDockerConfig   = "application/vnd.docker.container.image.v1+json"
	MediaTypeDockerLayer    = "application/vnd.docker.image.rootfs.diff.tar"
	MediaTypeDockerLayerGz  = "application/vnd.docker.image.rootfs.diff.tar.gzip"
)

// Descriptor is an OCI content descriptor, as far as an import needs it.
type Descriptor struct {
	MediaType string `json:"mediaType"`
	Digest    string `json:"digest"`
	Size      int64  `json:"size"`
}

// Image is one named image of an archive: the names it is to be known by
// (as the archive writes them: the caller normalizes) and its manifest or
// index.
type Image struct {
	Names  []string
	Target Descriptor
}

// Blob is one piece of content an import writes, with the blobs it
// refers to (an index's manifests, a manifest's config and layers), which
// the runtime must keep while it keeps this one.
type Blob struct {
	Descriptor
	// Refs are the digests this blob refers to, config first, then the
	// layers or manifests in order.
	Refs []string
	// RefKinds name each of Refs: "config", "l.N" for layer N, "m.N" for
	// manifest N (containerd's gc.ref.content.* suffixes).
	RefKinds []string
	// Uncompressed is a layer's diff ID (the digest of its tar), "" for
	// anything but a layer.
	Uncompressed string
	// Data is the blob when Read holds it (every JSON document, and the
	// manifests it writes for a docker archive); nil for a layer, which
	// StreamLayers streams from the archive.
	Data []byte
	// entry is the archive entry holding a layer.
	entry string
}

// Archive is what Read found in one archive file.
type Archive struct {
	Path   string
	Format Format
	Images []Image
	// Blobs are every blob the images need, each once, in an order that
	// writes a blob after the blobs it refers to.
	Blobs []Blob
	// compressedSize and limits are Read's, for the second pass.
	size   int64
	limits Limits
}

// entry is one regular file (or a link resolved to one) of the tar.
type entry struct {
	name   string // the file's own name, a link's target
	size   int64
	digest string // sha256 of the entry
	// gunzipped is the sha256 of the entry decompressed, when it is gzip:
	// a docker archive's compressed layer is checked against its diff ID.
	gunzipped string
	data      []byte // JSON documents only
}

// errorf names the archive in every error Read returns.
func errorf(file, format string, args ...any) error {
	return fmt.Errorf("image archive %s: %s", file, fmt.Sprintf(format, args...))
}

// Read reads and checks the archive at file; see the package comment. It
// never follows a link at file, nor blocks opening a FIFO there.
func Read(file string, lim Limits) (*Archive, error) {
	f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("image archive %s: %w", file, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("image archive %s: %w", file, err)
	}
	if !st.Mode().IsRegular() {
		return nil, errorf(file, "not a regular file")
	}
	if st.Size() > lim.ArchiveBytes {
		return nil, errorf(file, "%d bytes, more than the limit of %d", st.Size(), lim.ArchiveBytes)
	}
	entries, err := scan(f, file, lim)
	if err != nil {
		return nil, err
	}
	a := &Archive{Path: file, size: st.Size(), limits: lim}
	if _, ok := entries["manifest.json"]; ok {
		a.Format = FormatDocker
		err = a.readDocker(entries)
	} else if _, ok := entries["index.json"]; ok {
		a.Format = FormatOCI
		err = a.readOCI(entries)
	} else {
		err = errors.New("neither a docker archive (manifest.json) nor an OCI image layout (index.json)")
	}
	if err != nil {
		return nil, errorf(file, "%v", err)
	}
	return a, nil
}

// decompress returns the tar stream of an archive, gzip- or
// zstd-compressed or plain, by its first bytes.
func decompress(r io.Reader) (io.Reader, func(), error) {
	br := bufio.NewReader(r)
	magic, _ := br.Peek(4)
	switch {
	case bytes.HasPrefix(magic, []byte{0x1f, 0x8b}):
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, fmt.Errorf("gzip: %w", err)
		}
		return zr, func() { zr.Close() }, nil
	case bytes.Equal(magic, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		// The window bound keeps a hostile frame from asking for
		// gigabytes of memory.
		zr, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(64<<20))
		if err != nil {
			return nil, nil, fmt.Errorf("zstd: %w", err)
		}
		return zr, zr.Close, nil
	default:
		return br, func() {}, nil
	}
}

// boundedReader fails once more than n bytes were read from it.
type boundedReader struct {
	r   io.Reader
	n   int64
	err error
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.n < 0 {
		return 0, b.err
	}
	n, err := b.r.Read(p)
	b.n -= int64(n)
	if b.n < 0 {
		return n, b.err
	}
	return n, err
}

// cleanName checks a tar entry's name: relative, no `..`, and returns it
// cleaned ("./blobs/x" is "blobs/x").
func cleanName(name string) (string, error) {
	if name == "" || strings.HasPrefix(name, "/") {
		return "", fmt.Errorf("entry %q: absolute or empty path", name)
	}
	for _, part := range strings.Split(name, "/") {
		if part == ".." {
			return "", fmt.Errorf("entry %q: path with a .. element", name)
		}
	}
	if strings.ContainsRune(name, 0) || strings.Contains(name, `\`) {
		return "", fmt.Errorf("entry %q: path with a NUL or a backslash", name)
	}
	return path.Clean(name), nil
}

// linkTarget is the archive path a link entry points at, refused when it
// leaves the archive.
func linkTarget(name string, hdr *tar.Header) (string, error) {
	target := hdr.Linkname
	if hdr.Typeflag == tar.TypeSymlink {
		if strings.HasPrefix(target, "/") {
			return "", fmt.Errorf("entry %q: link to the absolute path %q", name, target)
		}
		target = path.Join(path.Dir(name), target)
	} else {
		target = path.Clean(target)
	}
	if target == ".." || strings.HasPrefix(target, "../") || strings.HasPrefix(target, "/") {
		return "", fmt.Errorf("entry %q: link %q out of the archive", name, hdr.Linkname)
	}
	return target, nil
}

// scan is Read's pass over the tar: the limits, the names, the digest of
// every file, the JSON documents.
func scan(r io.Reader, file string, lim Limits) (map[string]*entry, error) {
	tr, closeFn, err := openTar(r, lim)
	if err != nil {
		return nil, errorf(file, "%v", err)
	}
	defer closeFn()
	entries := map[string]*entry{}
	links := map[string]string{}
	var jsonTotal int64
	for n := 0; ; n++ {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, errorf(file, "not a readable tar: %v", err)
		}
		if n >= lim.Entries {
			return nil, errorf(file, "more than %d entries", lim.Entries)
		}
		name, err := cleanName(hdr.Name)
		if err != nil {
			return nil, errorf(file, "%v", err)
		}
		if _, dup := entries[name]; dup {
			return nil, errorf(file, "entry %q twice", name)
		}
		switch hdr.Typeflag {
		case tar.TypeDir, tar.TypeXGlobalHeader:
			continue
		case tar.TypeSymlink, tar.TypeLink:
			target, err := linkTarget(name, hdr)
			if err != nil {
				return nil, errorf(file, "%v", err)
			}
			links[name] = target
			continue
		case tar.TypeReg:
		default:
			return nil, errorf(file, "entry %q: type %q is neither a file, a directory nor a link", name, hdr.Typeflag)
		}
		if hdr.Size > lim.EntryBytes {
			return nil, errorf(file, "entry %q: %d bytes, more than the limit of %d", name, hdr.Size, lim.EntryBytes)
		}
		e, err := hashEntry(tr, hdr.Size, lim)
		if err != nil {
			return nil, errorf(file, "entry %q: %v", name, err)
		}
		if e.data != nil {
			jsonTotal += e.size
			if jsonTotal > lim.JSONTotalBytes {
				return nil, errorf(file, "more than %d bytes of JSON documents", lim.JSONTotalBytes)
			}
		}
		e.name = name
		entries[name] = e
	}
	for name, target := range links {
		// A chain of links is followed a few hops only.
		for range 8 {
			next, ok := links[target]
			if !ok {
				break
			}
			target = next
		}
		e, ok := entries[target]
		if !ok {
			return nil, errorf(file, "entry %q: link to %q, which is no file of the archive", name, target)
		}
		entries[name] = e
	}
	return entries, nil
}

// openTar is the tar reader over an archive file's stream, decompressed
// and bounded by TotalBytes.
func openTar(r io.Reader, lim Limits) (*tar.Reader, func(), error) {
	dr, closeFn, err := decompress(r)
	if err != nil {
		return nil, nil, err
	}
	bounded := &boundedReader{r: dr, n: lim.TotalBytes,
		err: fmt.Errorf("decompresses to more than the limit of %d bytes", lim.TotalBytes)}
	return tar.NewReader(bounded), closeFn, nil
}

// hashEntry reads one file of the tar: its sha256, the sha256 of its
// content decompressed when it is gzip, and the data of a JSON document
// (a file of at most JSONBytes that starts with '{' or '[').
func hashEntry(r io.Reader, size int64, lim Limits) (*entry, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	head, _ := br.Peek(2)
	e := &entry{size: size}
	h := sha256.New()
	var sink io.Writer = h
	var buf *bytes.Buffer
	if size <= lim.JSONBytes && len(head) > 0 && (head[0] == '{' || head[0] == '[') {
		buf = &bytes.Buffer{}
		sink = io.MultiWriter(h, buf)
	}
	var gunzip *io.PipeWriter
	var gunzipped chan string
	if bytes.Equal(head, []byte{0x1f, 0x8b}) {
		pr, pw := io.Pipe()
		gunzip, gunzipped = pw, make(chan string, 1)
		go func() {
			gh := sha256.New()
			zr, err := gzip.NewReader(pr)
			if err == nil {
				_, err = io.Copy(gh, &boundedReader{r: zr, n: lim.TotalBytes, err: errors.New("gzip layer decompresses beyond the limit")})
			}
			pr.CloseWithError(err)
			if err != nil {
				gunzipped <- ""
				return
			}
			gunzipped <- "sha256:" + hex.EncodeToString(gh.Sum(nil))
		}()
		sink = io.MultiWriter(sink, gunzip)
	}
	n, err := io.Copy(sink, br)
	if gunzip != nil {
		gunzip.Close()
		e.gunzipped = <-gunzipped
	}
	if err != nil {
		return nil, err
	}
	if n != size {
		return nil, fmt.Errorf("truncated: %d of %d bytes", n, size)
	}
	e.digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
	if buf != nil {
		e.data = buf.Bytes()
	}
	return e, nil
}

// StreamLayers streams the archive's layers, each to fn with a reader of its
// bytes, in archive order; it checks each layer's digest and size again
// after fn read it, and fails, naming the file, when the archive changed
// since Read. A layer fn has no use for (skip returns true) is not read.
func (a *Archive) StreamLayers(skip func(Blob) bool, fn func(Blob, io.Reader) error) error {
	wanted := map[string][]Blob{}
	for _, b := range a.Blobs {
		if b.entry != "" && !skip(b) {
			wanted[b.entry] = append(wanted[b.entry], b)
		}
	}
	if len(wanted) == 0 {
		return nil
	}
	f, err := os.OpenFile(a.Path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("image archive %s: %w", a.Path, err)
	}
	defer f.Close()
	tr, closeFn, err := openTar(io.LimitReader(f, a.size), a.limits)
	if err != nil {
		return errorf(a.Path, "%v", err)
	}
	defer closeFn()
	for len(wanted) > 0 {
		hdr, err := tr.Next()
		if err != nil {
			return errorf(a.Path, "changed while it was imported: %v", err)
		}
		name, err := cleanName(hdr.Name)
		if err != nil || hdr.Typeflag != tar.TypeReg {
			continue
		}
		blobs := wanted[name]
		delete(wanted, name)
		for i, b := range blobs {
			if i > 0 {
				// The same entry twice (two layers with one content) is
				// written once.
				break
			}
			h := sha256.New()
			if hdr.Size != b.Size {
				return errorf(a.Path, "entry %q changed while it was imported", name)
			}
			lr := io.TeeReader(io.LimitReader(tr, b.Size), h)
			if err := fn(b, lr); err != nil {
				return err
			}
			if _, err := io.Copy(io.Discard, lr); err != nil || "sha256:"+hex.EncodeToString(h.Sum(nil)) != b.Digest {
				return errorf(a.Path, "entry %q changed while it was imported", name)
			}
		}
	}
	return nil
}
