package podlogs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Options say what part of a log to write and how.
type Options struct {
	// TailLines is how many of the last lines to write; negative means
	// all. Lines are counted after partial records are joined.
	TailLines int
	// Timestamps prefixes each line with its RFC 3339 time, as kubectl
	// logs --timestamps does.
	Timestamps bool
	// Follow keeps writing what is appended until Done reports that the
	// container writes no more (or the context ends).
	Follow bool
	// Done is asked at the end of the file while following; once it
	// returns true the rest of the file is written and Copy returns. nil
	// follows until the context ends.
	Done func() bool
	// Poll is how often a followed file is checked for growth; 0 means
	// 100ms, well below what a person watching notices.
	Poll time.Duration
}

// Copy writes the log file at path to w as plain lines: partial records
// joined, malformed lines passed through unchanged so nothing is lost.
// After each batch it flushes w when w can (an http.ResponseWriter), so a
// follower sees lines as they come.
func Copy(ctx context.Context, path string, w io.Writer, opts Options) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { f.Close() }()
	if opts.TailLines >= 0 {
		info, err := f.Stat()
		if err != nil {
			return err
		}
		start, err := tailStart(f, info.Size(), opts.TailLines)
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		if _, err := f.Seek(start, io.SeekStart); err != nil {
			return err
		}
	}
	poll := opts.Poll
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	out := &lineWriter{dst: w, w: bufio.NewWriter(w), timestamps: opts.Timestamps}
	br := bufio.NewReaderSize(f, 64<<10)
	var pending []byte // the start of a line whose newline is not written yet
	draining := false  // Done said so: read to the end once more, then stop
	switching := false // the file was rotated: read the old one once more
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 && line[len(line)-1] == '\n' {
			if len(pending) > 0 {
				line = append(pending, line...)
				pending = nil
			}
			if err := out.record(line[:len(line)-1]); err != nil {
				return err
			}
			continue
		}
		pending = append(pending, line...)
		if err != nil && !errors.Is(err, io.EOF) {
			return fmt.Errorf("read %s: %w", path, err)
		}
		if !opts.Follow || draining {
			if len(pending) > 0 {
				if err := out.record(pending); err != nil {
					return err
				}
			}
			return out.finish()
		}
		if err := out.flush(); err != nil {
			return err
		}
		if opts.Done != nil && opts.Done() {
			draining = true
			continue
		}
		// Rotation renames the file and has the runtime reopen a new one
		// at path. The old one gets one more pass a poll later (the
		// runtime may write to it until it has reopened), then the new
		// one is read from its start.
		if rotated(f, path) {
			if switching {
				switching = false
				next, err := os.Open(path)
				if err != nil {
					return err
				}
				f.Close()
				f = next
				br.Reset(f)
				continue
			}
			switching = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(poll):
		}
	}
}

// rotated reports whether path now names another file than f, as after a
// log rotation.
func rotated(f *os.File, path string) bool {
	cur, err := f.Stat()
	if err != nil {
		return false
	}
	now, err := os.Stat(path)
	return err == nil && !os.SameFile(cur, now)
}

// lineWriter turns records into output lines, joining each stream's partial
// records until its full one arrives.
type lineWriter struct {
	dst        io.Writer
	w          *bufio.Writer
	timestamps bool
	// partial holds, per stream, the joined messages waiting for their F
	// record and the time of the first piece.
	partial map[string]*partialLine
}

type partialLine struct {
	t   time.Time
	msg []byte
}

func (l *lineWriter) record(line []byte) error {
	e, err := ParseLine(line)
	if err != nil {
		l.w.Write(line)
		return l.w.WriteByte('\n')
	}
	if p := l.partial[e.Stream]; p != nil {
		p.msg = append(p.msg, e.Message...)
		if e.Partial {
			return nil
		}
		delete(l.partial, e.Stream)
		return l.write(p.t, p.msg)
	}
	if e.Partial {
		if l.partial == nil {
			l.partial = map[string]*partialLine{}
		}
		l.partial[e.Stream] = &partialLine{t: e.Time, msg: append([]byte(nil), e.Message...)}
		return nil
	}
	return l.write(e.Time, e.Message)
}

func (l *lineWriter) write(t time.Time, msg []byte) error {
	if l.timestamps {
		l.w.WriteString(t.Format(time.RFC3339Nano))
		l.w.WriteByte(' ')
	}
	l.w.Write(msg)
	return l.w.WriteByte('\n')
}

// flush pushes what is buffered to the client, and further when the
// destination is an HTTP response.
func (l *lineWriter) flush() error {
	if err := l.w.Flush(); err != nil {
		return err
	}
	if f, ok := l.dst.(interface{ Flush() }); ok {
		f.Flush()
	}
	return nil
}

// finish writes the partial lines the log ends with (a container that died
// mid-line) and flushes.
func (l *lineWriter) finish() error {
	for _, stream := range []string{"stdout", "stderr"} {
		if p := l.partial[stream]; p != nil {
			if err := l.write(p.t, p.msg); err != nil {
				return err
			}
		}
	}
	l.partial = nil
	return l.flush()
}

// tailStart is the offset from which a forward read yields the last n lines
// of the file (partial records joined). It reads backwards from the end, so
// a large log costs only its tail. An unfinished last line (no newline yet)
// is left to the forward read.
func tailStart(r io.ReaderAt, size int64, n int) (int64, error) {
	if n == 0 {
		return size, nil
	}
	start := int64(0)
	need, found := 0, 0
	err := eachLineBackward(r, size, func(line []byte, end int64) bool {
		e, err := ParseLine(line)
		terminates := err != nil || !e.Partial
		if need == 0 {
			// The last n lines end at the file's end when its last
			// record is full; a trailing partial record is itself the
			// last line, ended by no terminator yet.
			need = n
			if terminates {
				need = n + 1
			}
		}
		if terminates {
			found++
			if found == need {
				start = end
				return false
			}
		}
		return true
	})
	return start, err
}

// eachLineBackward calls fn with each newline-terminated line of r[0:size)
// (without its newline) and the offset just past that newline, last line
// first, until fn returns false.
func eachLineBackward(r io.ReaderAt, size int64, fn func(line []byte, end int64) bool) error {
	const block = 64 << 10
	var data []byte // r[dataStart:dataStart+len(data)), read but not handed out
	dataStart := size
	end := int64(-1) // offset past the newline of the next line to hand out
	for {
		// The line ending at end starts after the newline before it.
		if end >= 0 {
			upto := int(end - 1 - dataStart) // index of end's newline in data
			if i := bytes.LastIndexByte(data[:upto], '\n'); i >= 0 {
				if !fn(data[i+1:upto], end) {
					return nil
				}
				end = dataStart + int64(i) + 1
				data = data[:i+1]
				continue
			}
			if dataStart == 0 {
				fn(data[:upto], end)
				return nil
			}
		} else if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
			end = dataStart + int64(i) + 1
			data = data[:i+1]
			continue
		} else if dataStart == 0 {
			return nil
		}
		from := max(dataStart-block, 0)
		chunk := make([]byte, dataStart-from, int(dataStart-from)+len(data))
		if _, err := r.ReadAt(chunk, from); err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		data = append(chunk, data...)
		dataStart = from
	}
}
