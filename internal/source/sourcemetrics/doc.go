// Package sourcemetrics holds the manifest sources' Prometheus series:
// when each configured source last tried and last managed to read its
// manifests, the signed serial it runs, and the signed bodies refused. The
// file source (internal/source) and the HTTP source
// (internal/source/httpsource) both record into one Metrics.
//
// It must never import the sources themselves, the store or any agent or
// runtime package; it imports only internal/source/signature, whose
// refusal counter it carries. Its gauges are safe for concurrent use and
// each series is written only by its own source's goroutine.
package sourcemetrics
