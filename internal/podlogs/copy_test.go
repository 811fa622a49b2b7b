package podlogs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
)

// sample has partial records interleaved across streams, a malformed line
// and an empty message.
const sample = `2024-05-01T10:00:00.000000001Z stdout F one
2024-05-01T10:00:01.000000001Z stdout P tw
2024-05-01T10:00:01.500000001Z stderr F err1
2024-05-01T10:00:02.000000001Z stdout F o
garbage line
2024-05-01T10:00:03.000000001Z stdout F 
2024-05-01T10:00:04.000000001Z stderr P la
2024-05-01T10:00:05.000000001Z stderr P s
2024-05-01T10:00:06.000000001Z stderr F t
`

func writeLog(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "0.log")
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestCopy(t *testing.T) {
	all := "one\nerr1\ntwo\ngarbage line\n\nlast\n"
	tests := []struct {
		name    string
		content string
		opts    Options
		want    string
	}{
		{"all", sample, Options{TailLines: -1}, all},
		{"tail 0", sample, Options{TailLines: 0}, ""},
		{"tail 1 joins partials", sample, Options{TailLines: 1}, "last\n"},
		{"tail 2", sample, Options{TailLines: 2}, "\nlast\n"},
		{"tail 3 counts malformed lines", sample, Options{TailLines: 3}, "garbage line\n\nlast\n"},
		{"tail 4 landing inside an interleaved partial record shows its rest", sample, Options{TailLines: 4}, "o\ngarbage line\n\nlast\n"},
		{"tail beyond the file", sample, Options{TailLines: 100}, all},
		{"timestamps of a joined line are its first piece's", sample, Options{TailLines: 1, Timestamps: true}, "2024-05-01T10:00:04.000000001Z last\n"},
		{"trailing partial is flushed", "2024-05-01T10:00:00Z stdout F a\n2024-05-01T10:00:01Z stdout P b\n", Options{TailLines: -1}, "a\nb\n"},
		{"tail 1 with trailing partial", "2024-05-01T10:00:00Z stdout F a\n2024-05-01T10:00:01Z stdout P b\n", Options{TailLines: 1}, "b\n"},
		{"tail 2 with trailing partial", "2024-05-01T10:00:00Z stdout F a\n2024-05-01T10:00:01Z stdout P b\n", Options{TailLines: 2}, "a\nb\n"},
		{"unterminated last line", "2024-05-01T10:00:00Z stdout F a\n2024-05-01T10:00:01Z stdout F b", Options{TailLines: -1}, "a\nb\n"},
		{"tail ignores the unterminated line when counting", "2024-05-01T10:00:00Z stdout F a\n2024-05-01T10:00:01Z stdout F b\n2024-05-01T10:00:02Z stdout F c", Options{TailLines: 1}, "b\nc\n"},
		{"empty file", "", Options{TailLines: 5}, ""},
		{"no newline at all", "2024-05-01T10:00:00Z stdout F a", Options{TailLines: 5}, "a\n"},
		{"since leaves out earlier records (pieces too, as the kubelet does), not malformed lines", sample, Options{TailLines: -1, Since: time.Date(2024, 5, 1, 10, 0, 2, 0, time.UTC)}, "o\ngarbage line\n\nlast\n"},
		{"since after every record", sample, Options{TailLines: -1, Since: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}, "garbage line\n"},
		{"since and tail", sample, Options{TailLines: 4, Since: time.Date(2024, 5, 1, 10, 0, 4, 0, time.UTC)}, "garbage line\nlast\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			if err := Copy(context.Background(), writeLog(t, tt.content), &out, tt.opts); err != nil {
				t.Fatal(err)
			}
			if out.String() != tt.want {
				t.Errorf("got %q, want %q", out.String(), tt.want)
			}
		})
	}
}

// TestTailLargeFile crosses the backward reader's block boundary many times,
// with lines longer than a block.
func TestTailLargeFile(t *testing.T) {
	var b strings.Builder
	long := strings.Repeat("x", 100<<10)
	for i := range 2000 {
		if i%500 == 0 {
			fmt.Fprintf(&b, "2024-05-01T10:00:00Z stdout P %s\n", long)
		}
		fmt.Fprintf(&b, "2024-05-01T10:00:00Z stdout F line %d\n", i)
	}
	path := writeLog(t, b.String())
	for _, n := range []int{1, 7, 499, 500, 1500, 1999, 2000, 5000} {
		var out bytes.Buffer
		if err := Copy(context.Background(), path, &out, Options{TailLines: n}); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
		want := min(n, 2000)
		if len(lines) != want {
			t.Fatalf("tail %d: got %d lines", n, len(lines))
		}
		if last := lines[len(lines)-1]; last != "line 1999" {
			t.Errorf("tail %d: last line %q", n, last)
		}
		first := 2000 - want
		wantFirst := fmt.Sprintf("line %d", first)
		if first%500 == 0 {
			wantFirst = long + wantFirst
		}
		if lines[0] != wantFirst {
			t.Errorf("tail %d: first line %.20q..., want %.20q...", n, lines[0], wantFirst)
		}
	}
}

// syncBuffer is written by Copy and read by the test at once.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	flushes int
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Flush() {
	s.mu.Lock()
	s.flushes++
	s.mu.Unlock()
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The follow tests run in a synctest bubble: Copy's poll timer runs on the
// bubble's fake clock, so poll advances it by exactly one poll and waits
// until Copy has read, written and gone back to waiting for the next one.

func TestCopyFollow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := writeLog(t, "2024-05-01T10:00:00Z stdout F old\n2024-05-01T10:00:01Z stdout F first\n")
		var done atomic.Bool
		out := &syncBuffer{}
		errc := make(chan error, 1)
		go func() {
			errc <- Copy(t.Context(), path, out, Options{TailLines: 1, Follow: true, Done: done.Load, Poll: testPoll})
		}()
		synctest.Wait()
		expect(t, out, "first\n")

		f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		// A record written in two pieces, the second one a poll later, as
		// a runtime may flush it: the first piece is held until its line
		// ends.
		f.WriteString("2024-05-01T10:00:02Z stdout P sec")
		poll()
		expect(t, out, "first\n")
		f.WriteString("ond-a\n2024-05-01T10:00:03Z stdout F -b\n")
		poll()
		expect(t, out, "first\nsecond-a-b\n")

		// The container ends after one last line: Copy writes it and returns.
		f.WriteString("2024-05-01T10:00:04Z stderr F bye\n")
		done.Store(true)
		poll()
		select {
		case err := <-errc:
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatal("Copy did not return once Done said so")
		}
		if got := out.String(); got != "first\nsecond-a-b\nbye\n" {
			t.Errorf("got %q", got)
		}
		out.mu.Lock()
		defer out.mu.Unlock()
		if out.flushes == 0 {
			t.Error("the destination was never flushed")
		}
	})
}

func TestCopyFollowStopsWithContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		path := writeLog(t, "2024-05-01T10:00:00Z stdout F a\n")
		ctx, cancel := context.WithCancel(context.Background())
		out := &syncBuffer{}
		errc := make(chan error, 1)
		go func() { errc <- Copy(ctx, path, out, Options{TailLines: -1, Follow: true, Poll: testPoll}) }()
		synctest.Wait()
		expect(t, out, "a\n")
		cancel()
		synctest.Wait()
		select {
		case err := <-errc:
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatal("Copy did not return when the context ended")
		}
	})
}

func TestCopyMissingFile(t *testing.T) {
	err := Copy(context.Background(), filepath.Join(t.TempDir(), "nope.log"), &bytes.Buffer{}, Options{TailLines: -1})
	if !os.IsNotExist(err) {
		t.Fatalf("err = %v, want a not-exist error", err)
	}
}

// testPoll is the follow tests' poll interval, on the bubble's fake clock.
const testPoll = 5 * time.Millisecond

// poll moves the bubble's fake clock by one poll interval and waits until
// Copy has done that poll's work and blocks again. Only inside a synctest
// bubble, where the sleep takes no real time.
func poll() {
	time.Sleep(testPoll)
	synctest.Wait()
}

// expect checks Copy's output after the bubble has settled.
func expect(t *testing.T, out *syncBuffer, want string) {
	t.Helper()
	if got := out.String(); got != want {
		t.Fatalf("output %q, want %q", got, want)
	}
}

// TestCopyFollowAcrossRotation follows a log while it is rotated the way
// the kubelet and berth rotate: the file is renamed, the runtime writes a
// last line to it, then reopens a new file at the same path.
// With Since, the records before it are left out of both files.
func TestCopyFollowAcrossRotation(t *testing.T) {
	t.Run("all", func(t *testing.T) { followAcrossRotation(t, time.Time{}, "before\n") })
	t.Run("since", func(t *testing.T) { followAcrossRotation(t, time.Date(2024, 5, 1, 10, 0, 1, 0, time.UTC), "") })
}

// followAcrossRotation rotates a followed log; first is what Copy writes
// of the first line.
func followAcrossRotation(t *testing.T, since time.Time, first string) {
	synctest.Test(t, func(t *testing.T) {
		path := writeLog(t, "2024-05-01T10:00:00Z stdout F before\n")
		var done atomic.Bool
		out := &syncBuffer{}
		errc := make(chan error, 1)
		go func() {
			errc <- Copy(t.Context(), path, out, Options{TailLines: -1, Follow: true, Done: done.Load, Poll: testPoll, Since: since})
		}()
		synctest.Wait()
		expect(t, out, first)
		old, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path, path+".20240501-100001"); err != nil {
			t.Fatal(err)
		}
		old.WriteString("2024-05-01T10:00:01Z stdout F late write to the old file\n")
		old.Close()
		if err := os.WriteFile(path, []byte("2024-05-01T10:00:02Z stdout F after\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		// The poll that sees the rotation reads the old file to its end;
		// the next one reads it once more, then the new file.
		poll()
		expect(t, out, first+"late write to the old file\n")
		poll()
		expect(t, out, first+"late write to the old file\nafter\n")
		done.Store(true)
		poll()
		select {
		case err := <-errc:
			if err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatal("Copy did not return once Done said so")
		}
	})
}
