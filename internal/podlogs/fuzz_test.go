package podlogs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzParseLine parses arbitrary records, as a container (or whatever
// writes into /var/log/pods) may make them. An accepted record names a
// known stream, its message is the tail of the line, and written back in
// the CRI format it parses to the same entry.
func FuzzParseLine(f *testing.F) {
	for _, line := range strings.Split(sample, "\n") {
		f.Add([]byte(line))
	}
	for _, s := range []string{"", " ", "2024-05-01T10:00:00Z stdout F", "2024-05-01T10:00:00Z stdout P:x y", "2024-05-01T10:00:00+02:00 stderr F a b", "x stdout F a"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := ParseLine(line)
		if err != nil {
			return
		}
		if e.Stream != "stdout" && e.Stream != "stderr" {
			t.Fatalf("stream %q", e.Stream)
		}
		if len(e.Message) >= len(line) || !bytes.HasSuffix(line, e.Message) {
			t.Fatalf("message %q is not the tail of %q", e.Message, line)
		}
		tag := "F"
		if e.Partial {
			tag = "P"
		}
		again := fmt.Appendf(nil, "%s %s %s %s", e.Time.Format(time.RFC3339Nano), e.Stream, tag, e.Message)
		e2, err := ParseLine(again)
		if err != nil {
			t.Fatalf("%q written back as %q: %v", line, again, err)
		}
		if !e2.Time.Equal(e.Time) || e2.Stream != e.Stream || e2.Partial != e.Partial || !bytes.Equal(e2.Message, e.Message) {
			t.Fatalf("%q written back as %q parses to %+v, first %+v", line, again, e2, e)
		}
	})
}

// FuzzEachLineBackward checks the backward reader against a forward split:
// it hands out every newline-terminated line, last first, with the offset
// just past its newline, and never the unterminated rest.
func FuzzEachLineBackward(f *testing.F) {
	for _, s := range []string{"", "\n", "a", "a\n", "a\nb", "a\n\nb\n", sample} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want []string
		end := 0
		for i, c := range data {
			if c == '\n' {
				want = append(want, fmt.Sprintf("%d:%q", i+1, data[end:i]))
				end = i + 1
			}
		}
		var got []string
		err := eachLineBackward(bytes.NewReader(data), int64(len(data)), func(line []byte, end int64) bool {
			got = append([]string{fmt.Sprintf("%d:%q", end, line)}, got...)
			return true
		})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("backward lines %v, want %v", got, want)
		}
	})
}

// FuzzCopy writes arbitrary log files out whole and tailed. It never
// fails on a readable file; without timestamps it never writes more than
// it read (plus the newline of an unterminated last line); a tail starts
// on a line boundary, writes no more lines than the whole log has, and
// its lines after the first are the whole log's last ones (the first may
// be the rest of a partial record the tail landed in).
func FuzzCopy(f *testing.F) {
	f.Add([]byte(sample), 2, false)
	f.Add([]byte(sample), 4, true)
	f.Add([]byte("2024-05-01T10:00:00Z stdout F a\n2024-05-01T10:00:01Z stdout P b\n"), 1, false)
	f.Add([]byte("2024-05-01T10:00:00Z stdout F a\n2024-05-01T10:00:01Z stdout F b"), 0, false)
	f.Add([]byte("no\nformat\nat all"), -1, false)
	f.Fuzz(func(t *testing.T, data []byte, tail int, timestamps bool) {
		tail = tail % 64
		path := filepath.Join(t.TempDir(), "0.log")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		copyOut := func(n int) string {
			var out bytes.Buffer
			if err := Copy(context.Background(), path, &out, Options{TailLines: n, Timestamps: timestamps}); err != nil {
				t.Fatalf("Copy tail %d: %v", n, err)
			}
			return out.String()
		}
		all, got := copyOut(-1), copyOut(tail)
		if !timestamps && len(all) > len(data)+1 {
			t.Fatalf("wrote %d bytes out of %d", len(all), len(data))
		}
		if tail < 0 {
			if got != all {
				t.Fatalf("negative tail %q, all %q", got, all)
			}
			return
		}
		start, err := tailStart(bytes.NewReader(data), int64(len(data)), tail)
		if err != nil {
			t.Fatal(err)
		}
		if start < 0 || start > int64(len(data)) || (start > 0 && data[start-1] != '\n' && start != int64(len(data))) {
			t.Fatalf("tail %d starts at %d, not on a line boundary", tail, start)
		}
		allLines, gotLines := strings.SplitAfter(all, "\n"), strings.SplitAfter(got, "\n")
		if len(gotLines) > len(allLines) {
			t.Fatalf("tail %d wrote %d lines, the whole log %d", tail, len(gotLines), len(allLines))
		}
		// A joined partial record is written when its full record comes,
		// after the lines of other streams (or malformed ones) in between:
		// with partial records the order of the lines is the writer's,
		// not the file's, and a tail need not end like the whole log.
		if len(gotLines) > 1 && !hasPartial(data) {
			if want := allLines[len(allLines)-len(gotLines)+1:]; strings.Join(gotLines[1:], "") != strings.Join(want, "") {
				t.Fatalf("tail %d: %q is not the end of %q", tail, got, all)
			}
		}
	})
}

// hasPartial reports whether any line of data is a partial CRI record.
func hasPartial(data []byte) bool {
	for _, line := range bytes.Split(data, []byte("\n")) {
		if e, err := ParseLine(line); err == nil && e.Partial {
			return true
		}
	}
	return false
}
