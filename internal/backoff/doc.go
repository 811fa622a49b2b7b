// Package backoff is a per-key exponential back-off on a clock (image
// pulls per image, crash loops per container, GC removals per object), and
// Jittered, the wait of a loop that retries a remote server on its own
// schedule (the status report, the Node and its Lease, mirror pods).
//
// It is a leaf: it must never import another berth package.
//
// A Keyed owns its entries and guards them itself; it is safe for
// concurrent use.
package backoff
