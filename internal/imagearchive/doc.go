// Package imagearchive reads image archives an operator drops on a device
// for berth to preload: `docker save` tarballs (manifest.json, legacy or
// Docker 25's layout) and OCI image layout tarballs (oci-layout,
// index.json, blobs/), each plain, gzip- or zstd-compressed. It treats
// every archive as hostile: Read bounds the archive's size, every entry's,
// the total it decompresses to (the decompression-bomb bound), the number
// of entries and every JSON document; refuses absolute paths, `..`, links
// that leave the archive and entries that are neither files, directories
// nor links; and checks every blob against its digest (the OCI layout's
// blob names and descriptors, a docker archive's config diff_ids), so
// what it returns is what the archive's manifests say, or an error that
// names the file and the entry.
//
// Read makes one pass and keeps only the JSON documents; Archive.Blobs
// streams the blobs in a second pass and checks each digest again, so a
// file changed between the passes is refused, not imported.
//
// It is a leaf: it must never import another berth package; what is done
// with an archive (the runtime's import, the events) is internal/preload's.
//
// It owns no mutable state: an Archive is read-only once Read returns.
package imagearchive
