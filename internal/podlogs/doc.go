// Package podlogs reads container logs written in the CRI log format, the
// files a CRI runtime keeps under /var/log/pods, for `berth logs`: it parses
// records, joins partial lines, serves the last N lines, and follows a file
// while its container runs.
//
// It owns nothing but the reading of one log file per call. It is a leaf:
// it must never import another berth package. It keeps no mutable state
// between calls; each Copy owns its own reader.
package podlogs
