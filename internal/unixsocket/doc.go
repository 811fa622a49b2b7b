// Package unixsocket creates the unix sockets of berth's local APIs (the
// HTTP API's --socket, the kubelet's pods API under --root-dir) so that
// only root, or root and one admin group, can connect: the socket gets its
// mode and group before it has its name, in a directory that must be
// berth's own, and a stale socket of a crashed run, or whatever someone
// planted at its path, is replaced without being followed or changed.
//
// It is a leaf: it must never import a package of berth. It keeps no
// mutable state; every call acts on the path it is given.
package unixsocket
