package podlogs

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"testing/synctest"
)

// TestCopyBoundsLongLines: lines longer than maxLine, in pieces (P records)
// or in one record the runtime did not split, come out whole when nothing
// interleaves, split but complete when the other stream comes in between,
// and never held entirely.
func TestCopyBoundsLongLines(t *testing.T) {
	x40, x80 := strings.Repeat("x", 40<<10), strings.Repeat("x", 80<<10)
	y10, z200 := strings.Repeat("y", 10<<10), strings.Repeat("z", 200<<10)
	tests := []struct {
		name    string
		content string
		opts    Options
		want    string
	}{
		{"pieces beyond maxLine stream through whole",
			"2024-05-01T10:00:00Z stdout P " + x40 + "\n2024-05-01T10:00:01Z stdout P " + x40 + "\n2024-05-01T10:00:02Z stdout F end\n",
			Options{TailLines: -1}, x80 + "end\n"},
		{"the other stream splits a streamed line, losing nothing",
			"2024-05-01T10:00:00Z stdout P " + x40 + "\n2024-05-01T10:00:01Z stdout P " + x40 + "\n2024-05-01T10:00:02Z stderr F err\n" +
				"2024-05-01T10:00:03Z stdout P " + y10 + "\n2024-05-01T10:00:04Z stdout F end\n",
			Options{TailLines: -1}, x80 + "\nerr\n" + y10 + "end\n"},
		{"timestamps of a streamed line: its first piece, then where it resumes",
			"2024-05-01T10:00:00Z stdout P " + x40 + "\n2024-05-01T10:00:01Z stdout P " + x40 + "\n2024-05-01T10:00:02Z stderr F err\n2024-05-01T10:00:04Z stdout F end\n",
			Options{TailLines: -1, Timestamps: true}, "2024-05-01T10:00:00Z " + x80 + "\n2024-05-01T10:00:02Z err\n2024-05-01T10:00:04Z end\n"},
		{"an unsplit record longer than the read buffer",
			"2024-05-01T10:00:00Z stdout F " + z200 + "\n2024-05-01T10:00:01Z stdout F next\n",
			Options{TailLines: -1}, z200 + "\nnext\n"},
		{"an unsplit partial record longer than the read buffer joins its line",
			"2024-05-01T10:00:00Z stdout P " + z200 + "\n2024-05-01T10:00:01Z stdout F next\n",
			Options{TailLines: -1}, z200 + "next\n"},
		{"a long line that is no record passes through raw",
			z200 + "\n2024-05-01T10:00:01Z stdout F next\n",
			Options{TailLines: -1}, z200 + "\nnext\n"},
		{"tail over a long unsplit record",
			"2024-05-01T10:00:00Z stdout F a\n2024-05-01T10:00:00Z stdout F " + z200 + "\n2024-05-01T10:00:01Z stdout F next\n",
			Options{TailLines: 2}, z200 + "\nnext\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := Copy(context.Background(), writeLog(t, tt.content), &out, tt.opts); err != nil {
				t.Fatal(err)
			}
			if got := out.String(); got != tt.want {
				t.Errorf("got %d bytes %.60q...%.40q, want %d bytes %.60q...", len(got), got, got[max(0, len(got)-40):], len(tt.want), tt.want)
			}
		})
	}
}

// TestCopyFollowStreamsAnEndlessPartialLine: a container writing without a
// newline gets P records only, forever; a follower must see them as they
// come instead of joining them in memory while waiting for an F record
// that never arrives.
func TestCopyFollowStreamsAnEndlessPartialLine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		piece := strings.Repeat("p", 16<<10)
		var b strings.Builder
		for range 64 { // 1 MiB in P records, no F
			b.WriteString("2024-05-01T10:00:00Z stdout P " + piece + "\n")
		}
		path := writeLog(t, b.String())
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		out := &syncBuffer{}
		errc := make(chan error, 1)
		go func() { errc <- Copy(ctx, path, out, Options{TailLines: -1, Follow: true, Poll: testPoll}) }()
		// Copy has read the whole file and waits for more.
		synctest.Wait()
		if out.len() < 64*len(piece)-maxLine {
			t.Fatalf("follower got %d bytes of a 1 MiB unfinished line: it holds the line instead of streaming it", out.len())
		}
		cancel()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	})
}

// TestTailOverHugeLine: a line beyond maxBackwardLine is not held whole to
// find its start; the tail shows its end.
func TestTailOverHugeLine(t *testing.T) {
	huge := strings.Repeat("h", maxBackwardLine+(1<<20))
	path := writeLog(t, "2024-05-01T10:00:00Z stdout F "+huge+"\n2024-05-01T10:00:01Z stdout F next\n")
	var out bytes.Buffer
	if err := Copy(context.Background(), path, &out, Options{TailLines: 2}); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if !strings.HasSuffix(got, "hh\nnext\n") || len(got) > maxBackwardLine+(64<<10) {
		t.Errorf("got %d bytes ending %q", len(got), got[max(0, len(got)-20):])
	}
	info, _ := os.Stat(path)
	if int64(len(got)) >= info.Size() {
		t.Errorf("the whole huge line was held")
	}
}

func (s *syncBuffer) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}
