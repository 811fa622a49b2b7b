// Package statefile owns how berth keeps files it must be able to trust:
// the state it keeps across restarts (last good manifests, accepted
// serials, the UID key, rollback records, a pod's user-namespace record,
// the pods' recent events), files it replaces while others may read them
// (a pod's hosts file), and the files it reads only when no other user
// could have written them (registry credentials, allowed signers).
//
// Reads are owner-checked and never follow a final symbolic link or block
// on a FIFO; writes replace a file through a rename so that a reader sees
// the old content or the new, never a mix; private directories are berth's
// alone. What a file says is its caller's to parse: this package parses
// nothing.
//
// It is a leaf: it must never import a package of berth. It keeps no
// mutable state; every function acts on the paths it is given.
package statefile
