package logging

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/coreos/go-systemd/v22/journal"
)

// SendFunc delivers one journal entry: its MESSAGE, PRIORITY and fields.
type SendFunc func(message string, priority journal.Priority, fields map[string]string) error

func journalSend(message string, priority journal.Priority, fields map[string]string) error {
	return journal.Send(message, priority, fields)
}

// StderrIsJournal reports whether stderr is the journal's stream, as
// systemd.exec(5) says to check: JOURNAL_STREAM names stderr's device and
// inode. A malformed variable counts as not.
func StderrIsJournal() bool {
	ok, err := journal.StderrIsJournalStream()
	return err == nil && ok
}

// journalHandler writes slog records as native journal entries. Each
// attribute becomes a field of its own (pod=web becomes POD=web) so
// `journalctl POD=web` finds a pod's lines, and is also kept in MESSAGE as
// key=value so `journalctl -u berth` shows what the text format shows.
// The level becomes the entry's PRIORITY, so `journalctl -p warning`
// filters.
type journalHandler struct {
	send     SendFunc
	level    slog.Leveler
	fallback slog.Handler
	// attrs are the WithAttrs attributes, already rendered, and prefix
	// the open groups; both are fixed when the handler is made.
	attrs  []field
	prefix string
}

// field is one attribute as the journal and the message show it.
type field struct {
	key   string // the slog key with its groups, dotted: "probe.url"
	value string
}

func newJournalHandler(send SendFunc, level slog.Leveler, fallback slog.Handler) *journalHandler {
	if level == nil {
		level = slog.LevelInfo
	}
	return &journalHandler{send: send, level: level, fallback: fallback}
}

func (h *journalHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.level.Level()
}

func (h *journalHandler) WithAttrs(as []slog.Attr) slog.Handler {
	if len(as) == 0 {
		return h
	}
	c := *h
	c.attrs = append([]field(nil), h.attrs...)
	for _, a := range as {
		c.attrs = appendAttr(c.attrs, h.prefix, a)
	}
	c.fallback = h.fallback.WithAttrs(as)
	return &c
}

func (h *journalHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix = h.prefix + name + "."
	c.fallback = h.fallback.WithGroup(name)
	return &c
}

func (h *journalHandler) Handle(ctx context.Context, r slog.Record) error {
	fields := append([]field(nil), h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		fields = appendAttr(fields, h.prefix, a)
		return true
	})
	var msg strings.Builder
	msg.WriteString(r.Message)
	vars := make(map[string]string, len(fields)+4)
	for _, f := range fields {
		fmt.Fprintf(&msg, " %s=%s", f.key, quote(f.value))
		vars[fieldName(f.key)] = f.value
	}
	vars["SYSLOG_IDENTIFIER"] = "berth"
	if r.PC != 0 {
		fr, _ := runtime.CallersFrames([]uintptr{r.PC}).Next()
		vars["CODE_FILE"] = fr.File
		vars["CODE_LINE"] = strconv.Itoa(fr.Line)
		vars["CODE_FUNC"] = fr.Function
	}
	if err := h.send(msg.String(), priority(r.Level), vars); err != nil {
		// The journal went away (restarted, or its socket is full): the
		// record still reaches stderr, which systemd also collects.
		return h.fallback.Handle(ctx, r)
	}
	return nil
}

// appendAttr flattens a into fields, groups joined with dots. Empty
// attributes and empty groups are dropped, as slog's handlers do.
func appendAttr(fs []field, prefix string, a slog.Attr) []field {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return fs
	}
	if a.Value.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p += a.Key + "."
		}
		for _, g := range a.Value.Group() {
			fs = appendAttr(fs, p, g)
		}
		return fs
	}
	var v string
	switch a.Value.Kind() {
	case slog.KindTime:
		v = a.Value.Time().Format(time.RFC3339Nano)
	default:
		v = a.Value.String()
	}
	return append(fs, field{key: prefix + a.Key, value: v})
}

// fieldName maps an slog key onto a journal field name: upper case
// letters, digits and underscores, not starting with an underscore or a
// digit, at most 64 characters (journald drops entries with other names).
// Names journald or syslog give a meaning to are prefixed with BERTH_ so an
// attribute can't forge them.
func fieldName(key string) string {
	var b strings.Builder
	for _, c := range strings.ToUpper(key) {
		switch {
		case c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
			b.WriteRune(c)
		default:
			b.WriteByte('_')
		}
	}
	n := b.String()
	if n == "" || n[0] == '_' || (n[0] >= '0' && n[0] <= '9') || reserved[n] {
		n = "BERTH_" + n
	}
	if len(n) > 64 {
		n = n[:64]
	}
	return n
}

// reserved are the fields journald, syslog and journalctl interpret.
var reserved = map[string]bool{
	"MESSAGE": true, "MESSAGE_ID": true, "PRIORITY": true, "CODE_FILE": true,
	"CODE_LINE": true, "CODE_FUNC": true, "ERRNO": true, "INVOCATION_ID": true,
	"USER_INVOCATION_ID": true, "SYSLOG_FACILITY": true, "SYSLOG_IDENTIFIER": true,
	"SYSLOG_PID": true, "SYSLOG_TIMESTAMP": true, "SYSLOG_RAW": true,
	"DOCUMENTATION": true, "TID": true, "UNIT": true, "USER_UNIT": true,
	"COREDUMP_UNIT": true, "COREDUMP_USER_UNIT": true, "OBJECT_PID": true,
}

// priority maps slog levels onto syslog priorities: debug 7, info 6,
// warn 4, error 3; levels between take the lower one's.
func priority(l slog.Level) journal.Priority {
	switch {
	case l >= slog.LevelError:
		return journal.PriErr
	case l >= slog.LevelWarn:
		return journal.PriWarning
	case l >= slog.LevelInfo:
		return journal.PriInfo
	default:
		return journal.PriDebug
	}
}

// quote renders a value in MESSAGE the way slog's text handler does:
// bare when it is a plain word, quoted otherwise.
func quote(s string) string {
	if s == "" || strings.ContainsAny(s, " \"=\\") || !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	for _, c := range s {
		if c < 0x21 || c == 0x7f {
			return strconv.Quote(s)
		}
	}
	return s
}
