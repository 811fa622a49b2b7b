package podtest

import (
	"context"
	"log/slog"
)

// LogSignal is a slog handler that tells when one message is logged: a
// test waits on Seen instead of polling a log. It drops every other
// record, and a signal nobody has taken yet absorbs the next ones.
type LogSignal struct {
	msg  string
	Seen chan struct{}
}

// NewLogSignal returns a LogSignal for the message msg.
func NewLogSignal(msg string) *LogSignal {
	return &LogSignal{msg: msg, Seen: make(chan struct{}, 1)}
}

func (h *LogSignal) Enabled(context.Context, slog.Level) bool { return true }

func (h *LogSignal) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		select {
		case h.Seen <- struct{}{}:
		default:
		}
	}
	return nil
}

func (h *LogSignal) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *LogSignal) WithGroup(string) slog.Handler      { return h }
