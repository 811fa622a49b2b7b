package podlogs

import (
	"bytes"
	"errors"
	"fmt"
	"time"
)

// Entry is one record of a CRI log file:
//
//	2016-10-06T00:17:09.669794202Z stdout F the message
//
// A runtime splits a long line into records tagged P (partial) and ends it
// with one tagged F (full).
type Entry struct {
	Time    time.Time
	Stream  string // "stdout" or "stderr"
	Partial bool
	Message []byte // without the newline; shares the parsed line's memory
}

// errFormat is wrapped by every parse error, so callers can tell a line in
// another format from an I/O problem.
var errFormat = errors.New("not a CRI log line")

// ParseLine parses one record, without its trailing newline. The tag field
// may carry more tags after a ':' (the format reserves them); only the first,
// P or F, matters here.
func ParseLine(line []byte) (Entry, error) {
	var e Entry
	ts, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return e, fmt.Errorf("%w: no timestamp", errFormat)
	}
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	if err != nil {
		return e, fmt.Errorf("%w: timestamp %q", errFormat, ts)
	}
	stream, rest, ok := bytes.Cut(rest, []byte{' '})
	if !ok || (string(stream) != "stdout" && string(stream) != "stderr") {
		return e, fmt.Errorf("%w: stream %q", errFormat, stream)
	}
	tags, msg, _ := bytes.Cut(rest, []byte{' '})
	first, _, _ := bytes.Cut(tags, []byte{':'})
	switch string(first) {
	case "P":
		e.Partial = true
	case "F":
	default:
		return e, fmt.Errorf("%w: tag %q", errFormat, tags)
	}
	e.Time, e.Stream, e.Message = t, string(stream), msg
	return e, nil
}
