package logging

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Format is how log records are written.
type Format string

const (
	// FormatAuto writes to the journal when stderr is its stream, and text
	// otherwise. It is the default.
	FormatAuto Format = ""
	// FormatText writes logfmt lines (key=value) to stderr.
	FormatText Format = "text"
	// FormatJSON writes one JSON object per record to stderr.
	FormatJSON Format = "json"
	// FormatJournald sends each record to the journal as a native entry.
	FormatJournald Format = "journald"
)

// Formats lists the values --log-format accepts, for its help text.
var Formats = []Format{FormatText, FormatJSON, FormatJournald}

// ParseFormat checks a --log-format value; "" and "auto" are FormatAuto.
func ParseFormat(s string) (Format, error) {
	switch f := Format(strings.ToLower(s)); f {
	case FormatAuto, "auto":
		return FormatAuto, nil
	case FormatText, FormatJSON, FormatJournald:
		return f, nil
	}
	return "", fmt.Errorf("log format %q: must be one of text, json, journald", s)
}

// Options say where and how records go. Stderr is required.
type Options struct {
	Format Format
	Level  slog.Leveler
	// Stderr receives text and JSON records, and journal records that the
	// journal refused.
	Stderr io.Writer
	// OnJournalStream reports whether stderr is connected to the journal
	// (the JOURNAL_STREAM check of systemd.exec(5)); nil means it is not.
	OnJournalStream func() bool
	// Send delivers one journal entry; nil is the journal's own socket.
	Send SendFunc
}

// New builds the logger Options ask for.
//
// Under journald a record's time is the journal's own, so no handler that
// writes to the journal, directly or through stderr, prints a timestamp.
func New(opts Options) *slog.Logger {
	return slog.New(NewHandler(opts))
}

// NewHandler is New's handler, for callers that wrap it.
func NewHandler(opts Options) slog.Handler {
	journal := opts.OnJournalStream != nil && opts.OnJournalStream()
	format := opts.Format
	if format == FormatAuto {
		format = FormatText
		if journal {
			format = FormatJournald
		}
	}
	ho := &slog.HandlerOptions{Level: opts.Level}
	if journal {
		ho.ReplaceAttr = dropTime
	}
	switch format {
	case FormatJSON:
		return slog.NewJSONHandler(opts.Stderr, ho)
	case FormatJournald:
		send := opts.Send
		if send == nil {
			send = journalSend
		}
		// A refused entry is written to stderr without a time: under
		// systemd stderr is the journal's stream, which stamps it.
		fallback := slog.NewTextHandler(opts.Stderr, &slog.HandlerOptions{Level: opts.Level, ReplaceAttr: dropTime})
		return newJournalHandler(send, opts.Level, fallback)
	default:
		return slog.NewTextHandler(opts.Stderr, ho)
	}
}

// dropTime removes the record's time from text and JSON output.
func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
