// Package httpsource runs berth's HTTP manifest source: it polls
// --manifest-url with conditional requests (ETag, Last-Modified) on a
// jittered schedule with back-off that honours the server's cache hints and
// Retry-After, follows redirects only within the URL's origin, trusts the
// system's CAs or only --manifest-url-ca, limits the body's size, checks
// signed bodies and their serials (package signature), keeps the last good
// body's pods across restarts (package laststate), and sends each poll's
// result as a full Snapshot to the store. It also owns what the other
// requests to a fleet's server share with it: the client (NewHTTPClient),
// header checks (ValidateHeader) and URL placeholders (ExpandURL).
//
// It imports packages podspec, source/signature, source/sourcemetrics and
// source/laststate, and must never import package source (which starts it and owns the file
// source), the agent or the runtime; it hands snapshots to a Sink (the
// store) and needs no import of package store.
//
// A Source's state belongs to the goroutine in Run; its files under the
// state directory are those named after podspec.SourceHTTP.
package httpsource
