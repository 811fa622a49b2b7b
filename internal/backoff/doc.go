// Package backoff is a per-key exponential back-off on a clock: image
// pulls per image, crash loops per container, GC removals per object.
//
// It is a leaf: it must never import another berth package.
//
// A Keyed owns its entries and guards them itself; it is safe for
// concurrent use.
package backoff
