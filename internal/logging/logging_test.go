package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/coreos/go-systemd/v22/journal"
)

// entry is one journal entry a fake journal received.
type entry struct {
	msg    string
	pri    journal.Priority
	fields map[string]string
}

// fakeJournal records entries, or refuses them all when err is set.
type fakeJournal struct {
	entries []entry
	err     error
}

func (j *fakeJournal) send(msg string, pri journal.Priority, fields map[string]string) error {
	if j.err != nil {
		return j.err
	}
	j.entries = append(j.entries, entry{msg, pri, fields})
	return nil
}

func TestNewPicksOutput(t *testing.T) {
	for _, tc := range []struct {
		name       string
		format     Format
		journal    bool
		wantStderr func(string) bool
		wantEntry  bool
	}{
		{"auto off systemd is text with a time", FormatAuto, false,
			func(s string) bool { return strings.HasPrefix(s, "time=") && strings.Contains(s, "msg=hello") }, false},
		{"auto under journald is the journal", FormatAuto, true,
			func(s string) bool { return s == "" }, true},
		{"text under journald has no second time", FormatText, true,
			func(s string) bool { return strings.HasPrefix(s, "level=INFO msg=hello") }, false},
		{"json off systemd has a time", FormatJSON, false,
			func(s string) bool { return strings.HasPrefix(s, `{"time":`) }, false},
		{"json under journald has no time", FormatJSON, true,
			func(s string) bool { return strings.HasPrefix(s, `{"level":"INFO","msg":"hello"`) }, false},
		{"journald asked for off systemd", FormatJournald, false,
			func(s string) bool { return s == "" }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stderr bytes.Buffer
			j := &fakeJournal{}
			log := New(Options{
				Format:          tc.format,
				Stderr:          &stderr,
				OnJournalStream: func() bool { return tc.journal },
				Send:            j.send,
			})
			log.Info("hello", "pod", "web")
			if !tc.wantStderr(stderr.String()) {
				t.Errorf("stderr = %q", stderr.String())
			}
			if got := len(j.entries) == 1; got != tc.wantEntry {
				t.Errorf("journal entries = %d, want an entry: %v", len(j.entries), tc.wantEntry)
			}
		})
	}
}

func TestJournalEntries(t *testing.T) {
	for _, tc := range []struct {
		name       string
		log        func(*slog.Logger)
		wantMsg    string
		wantPri    journal.Priority
		wantFields map[string]string
	}{
		{
			name:       "warning with pod fields",
			log:        func(l *slog.Logger) { l.Warn("probe failed", "pod", "web", "namespace", "default") },
			wantMsg:    "probe failed pod=web namespace=default",
			wantPri:    journal.PriWarning,
			wantFields: map[string]string{"POD": "web", "NAMESPACE": "default", "SYSLOG_IDENTIFIER": "berth"},
		},
		{
			name:       "error priority",
			log:        func(l *slog.Logger) { l.Error("sync failed", "err", errors.New("boom")) },
			wantMsg:    "sync failed err=boom",
			wantPri:    journal.PriErr,
			wantFields: map[string]string{"ERR": "boom"},
		},
		{
			name:    "debug is filtered below the level",
			log:     func(l *slog.Logger) { l.Debug("noise") },
			wantMsg: "",
		},
		{
			name:       "groups and WithAttrs",
			log:        func(l *slog.Logger) { l.With("source", "file").WithGroup("probe").Info("ok", "url", "http://x/") },
			wantMsg:    "ok source=file probe.url=http://x/",
			wantPri:    journal.PriInfo,
			wantFields: map[string]string{"SOURCE": "file", "PROBE_URL": "http://x/"},
		},
		{
			name:       "values needing quotes and newlines",
			log:        func(l *slog.Logger) { l.Info("bad manifest", "error", "a.yaml:3: spec: bad\nsecond line") },
			wantMsg:    `bad manifest error="a.yaml:3: spec: bad\nsecond line"`,
			wantPri:    journal.PriInfo,
			wantFields: map[string]string{"ERROR": "a.yaml:3: spec: bad\nsecond line"},
		},
		{
			name:       "an attribute cannot forge the journal's own fields",
			log:        func(l *slog.Logger) { l.Info("x", "priority", "0", "message", "forged", "_pid", "1", "9x", "y") },
			wantMsg:    "x priority=0 message=forged _pid=1 9x=y",
			wantPri:    journal.PriInfo,
			wantFields: map[string]string{"BERTH_PRIORITY": "0", "BERTH_MESSAGE": "forged", "BERTH__PID": "1", "BERTH_9X": "y"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &fakeJournal{}
			tc.log(New(Options{Format: FormatJournald, Level: slog.LevelInfo, Stderr: &bytes.Buffer{}, Send: j.send}))
			if tc.wantMsg == "" {
				if len(j.entries) != 0 {
					t.Fatalf("entries = %+v, want none", j.entries)
				}
				return
			}
			if len(j.entries) != 1 {
				t.Fatalf("entries = %+v, want one", j.entries)
			}
			e := j.entries[0]
			if e.msg != tc.wantMsg || e.pri != tc.wantPri {
				t.Errorf("entry = %q priority %d, want %q priority %d", e.msg, e.pri, tc.wantMsg, tc.wantPri)
			}
			for k, v := range tc.wantFields {
				if e.fields[k] != v {
					t.Errorf("field %s = %q, want %q (fields %v)", k, e.fields[k], v, e.fields)
				}
			}
			for k := range e.fields {
				if _, isReserved := reserved[k]; isReserved && k != "SYSLOG_IDENTIFIER" && !strings.HasPrefix(k, "CODE_") {
					t.Errorf("attribute wrote the reserved field %s", k)
				}
			}
		})
	}
}

func TestJournalRefusedFallsBackToStderr(t *testing.T) {
	var stderr bytes.Buffer
	j := &fakeJournal{err: errors.New("connection refused")}
	log := New(Options{Format: FormatJournald, Stderr: &stderr, Send: j.send})
	log.With("pod", "web").Warn("kept anyway", "container", "app")
	if got, want := stderr.String(), "level=WARN msg=\"kept anyway\" pod=web container=app\n"; got != want {
		t.Errorf("stderr = %q, want %q", got, want)
	}
}

func TestJSONIsOneObjectPerRecord(t *testing.T) {
	var stderr bytes.Buffer
	log := New(Options{Format: FormatJSON, Stderr: &stderr})
	log.Info("a", "pod", "web")
	log.Warn("b", "uid", "123")
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("lines = %q", lines)
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("line %q: %v", l, err)
		}
	}
}

func TestFieldName(t *testing.T) {
	for key, want := range map[string]string{
		"pod":                   "POD",
		"probe.url":             "PROBE_URL",
		"container-name":        "CONTAINER_NAME",
		"":                      "BERTH_",
		"message":               "BERTH_MESSAGE",
		"Ünïcode":               "BERTH__N_CODE",
		strings.Repeat("a", 80): strings.Repeat("A", 64),
	} {
		if got := fieldName(key); got != want {
			t.Errorf("fieldName(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestParseFormat(t *testing.T) {
	for in, want := range map[string]Format{"": FormatAuto, "auto": FormatAuto, "TEXT": FormatText, "json": FormatJSON, "journald": FormatJournald} {
		if got, err := ParseFormat(in); err != nil || got != want {
			t.Errorf("ParseFormat(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseFormat("xml"); err == nil || !strings.Contains(err.Error(), "text, json, journald") {
		t.Errorf("ParseFormat(xml) error = %v", err)
	}
}
