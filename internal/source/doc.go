// Package source runs berth's manifest sources: the manifest directory or
// file, watched with fsnotify and rescanned, and the manifest URL, polled
// with conditional requests and the server's cache hints. It checks what it
// reads before parsing it (file ownership and modes, regular files, sizes,
// SSH signatures and their serials against replay, checked by package
// signature), keeps every manifest's last good result across restarts in
// the state directory (package laststate, with the node's UID key), and
// sends each change as a full Snapshot to the store. Run starts the sources a Config enables; ReadPaths reads files
// once, as berth validate does.
//
// It imports packages podspec, podrules and store, and must never import the
// agent or the runtime.
//
// Each source's state belongs to that source's goroutine; the files under
// the state directory belong to the source they are named after.
package source
