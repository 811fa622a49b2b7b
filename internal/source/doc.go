// Package source runs berth's manifest sources. It owns the file source:
// the manifest directory or file, watched with fsnotify and rescanned,
// checked before it is parsed (file ownership and modes, regular files,
// sizes, SSH signatures and their serials against replay, checked by
// package signature), each file's last good result kept across restarts in
// the state directory (package laststate, with the node's UID key), each
// change sent as a full Snapshot to the store. Run starts the sources a
// Config enables, the manifest URL's through package httpsource, with one
// UID key for both, both recording into one sourcemetrics.Metrics (when
// each source last tried and last managed to read its manifests, and the
// signed serial it accepted); ReadPaths reads files (and standard input
// as "-") once, as berth validate does.
//
// It imports packages podspec, source/httpsource, source/signature,
// source/sourcemetrics and source/laststate, and must never import the
// agent or the runtime; it hands snapshots to a Sink (the store) and needs
// no import of package store. Package httpsource must never import it.
//
// Each source's state belongs to that source's goroutine; the files under
// the state directory belong to the source they are named after.
package source
