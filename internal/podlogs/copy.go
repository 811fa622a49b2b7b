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
	// Since, when set, leaves out the records written before it, by the
	// time the runtime stamped on each record (the kubelet's sinceSeconds
	// and sinceTime, which also filter a line's partial pieces one by
	// one), in the file and in those it is rotated to while followed. Lines that are not CRI records have no time and are
	// written as they are.
	Since time.Time
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

// maxLine bounds what Copy holds of one line: a partial record's pieces
// are joined up to it (per stream), and a line in the file is read in
// slices of it. Beyond it, a line's pieces are written as they come
// instead, so a container writing megabytes without a newline costs a
// follower no more than this.
const maxLine = 64 << 10

// Copy writes the log file at path to w as plain lines: partial records
// joined (up to maxLine; longer lines are streamed through, see
// lineWriter), malformed lines passed through unchanged so nothing is
// lost. After each batch it flushes w when w can (an http.ResponseWriter),
// so a follower sees lines as they come.
func Copy(ctx context.Context, path string, w io.Writer, opts Options) error {
	f, err := openTail(path, opts.TailLines)
	if err != nil {
		return err
	}
	c := newCopier(f, path, w, opts)
	defer func() { c.f.Close() }()
	timer := time.NewTimer(c.poll)
	defer timer.Stop()
	for {
		chunk, rerr := c.br.ReadSlice('\n')
		if err := c.handOn(chunk, rerr); err != nil {
			return err
		}
		if rerr == nil || errors.Is(rerr, bufio.ErrBufferFull) {
			continue
		}
		if !errors.Is(rerr, io.EOF) {
			return fmt.Errorf("read %s: %w", path, rerr)
		}
		if !opts.Follow || c.draining {
			return c.finish()
		}
		if err := c.out.flush(); err != nil {
			return err
		}
		if opts.Done != nil && opts.Done() {
			c.draining = true
			continue
		}
		reopened, err := c.followRotation()
		if err != nil {
			return err
		}
		if reopened {
			continue
		}
		timer.Reset(c.poll)
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		}
	}
}

// openTail opens the log file at path at the start of its last tail
// lines; a negative tail opens it at its start.
func openTail(path string, tail int) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	if tail < 0 {
		return f, nil
	}
	if err := seekTail(f, path, tail); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// seekTail moves f to the start of its last tail lines.
func seekTail(f *os.File, path string, tail int) error {
	info, err := f.Stat()
	if err != nil {
		return err
	}
	start, err := tailStart(f, info.Size(), tail)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	_, err = f.Seek(start, io.SeekStart)
	return err
}

// copier is one Copy's reading state.
type copier struct {
	f    *os.File // the file being read; replaced after a rotation
	path string
	br   *bufio.Reader
	out  *lineWriter
	poll time.Duration
	// pending is the start of a line whose newline is not in the file yet
	// (the runtime is writing it), at most maxLine bytes.
	pending []byte
	// A line longer than maxLine is read in slices, each handed on as it
	// comes: as pieces of its record when it starts like one (cont), else
	// raw.
	overlong  bool
	cont      *Entry
	draining  bool // Done said so: read to the end once more, then stop
	switching bool // the file was rotated: read the old one once more
}

func newCopier(f *os.File, path string, w io.Writer, opts Options) *copier {
	poll := opts.Poll
	if poll <= 0 {
		poll = 100 * time.Millisecond
	}
	return &copier{
		f: f, path: path, poll: poll,
		br:      bufio.NewReaderSize(f, maxLine),
		out:     &lineWriter{dst: w, w: bufio.NewWriter(w), timestamps: opts.Timestamps, since: opts.Since},
		pending: make([]byte, 0, 512),
	}
}

// handOn hands on what one read returned (chunk, with the read's error
// rerr): a whole line, a slice of an over-long one, or the start of a
// line still being written, which it keeps for the next read.
func (c *copier) handOn(chunk []byte, rerr error) error {
	data := chunk
	if len(c.pending) > 0 {
		// Bounded: pending holds at most maxLine, chunk too.
		c.pending = append(c.pending, chunk...)
		data = c.pending
	}
	var err error
	switch {
	case rerr == nil && c.overlong:
		c.overlong = false
		err = c.piece(data[:len(data)-1], true)
	case rerr == nil:
		err = c.out.record(data[:len(data)-1])
	case c.overlong:
		err = c.piece(data, false)
	case errors.Is(rerr, bufio.ErrBufferFull) || len(data) > maxLine:
		err = c.beginOverlong(data)
	default:
		// The end of the file, inside a line the runtime is still
		// writing: keep it for the next read.
		if len(c.pending) == 0 {
			c.pending = append(c.pending, data...)
		}
		return nil
	}
	c.pending = c.pending[:0]
	return err
}

// beginOverlong writes the first slice of a line longer than maxLine: as
// the first piece of its record when it starts like one, else raw.
func (c *copier) beginOverlong(data []byte) error {
	c.overlong, c.cont = true, nil
	e, err := ParseLine(data)
	if err != nil {
		return c.out.raw(data, false)
	}
	c.cont = &Entry{Time: e.Time, Stream: e.Stream, Partial: e.Partial}
	e.Partial = true
	return c.out.entry(e)
}

// piece writes a further slice of an over-long line; end says it is the
// last.
func (c *copier) piece(b []byte, end bool) error {
	if c.cont == nil {
		return c.out.raw(b, end)
	}
	e := *c.cont
	e.Message, e.Partial = b, !end || c.cont.Partial
	return c.out.entry(e)
}

// finish writes the line left without its newline, and what the line
// writer still holds.
func (c *copier) finish() error {
	if len(c.pending) > 0 {
		if err := c.out.record(c.pending); err != nil {
			return err
		}
	}
	return c.out.finish()
}

// followRotation follows a rotation, which renames the file and has the
// runtime reopen a new one at path. The old one gets one more pass a poll
// later (the runtime may write to it until it has reopened), then the new
// one is read from its start: reopened says it now is.
func (c *copier) followRotation() (reopened bool, err error) {
	if !rotated(c.f, c.path) {
		return false, nil
	}
	if !c.switching {
		c.switching = true
		return false, nil
	}
	c.switching = false
	next, err := os.Open(c.path)
	if err != nil {
		return false, err
	}
	c.f.Close()
	c.f = next
	c.br.Reset(next)
	return true, nil
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
// records until its full one arrives. A stream's pieces beyond maxLine are
// not held: what was joined is written, and the rest of that line follows
// as it comes. Should the other stream (or a malformed line) come in
// between, the streamed line is ended there and its rest starts a new
// output line: the output is split, nothing is lost, memory stays bounded.
type lineWriter struct {
	dst        io.Writer
	w          *bufio.Writer
	timestamps bool
	since      time.Time // records before it are left out
	// partial holds, per stream, the joined messages waiting for their F
	// record and the time of the first piece.
	partial map[string]*partialLine
	// open is the stream whose line is started but not ended in the
	// output ("raw" for an over-long malformed line), or "".
	open string
}

type partialLine struct {
	t   time.Time
	msg []byte
	// streaming: the line outgrew maxLine and its pieces are written
	// as they come.
	streaming bool
}

func (l *lineWriter) record(line []byte) error {
	e, err := ParseLine(line)
	if err != nil {
		return l.raw(line, true)
	}
	return l.entry(e)
}

// entry writes or holds one record (or piece of an over-long one).
func (l *lineWriter) entry(e Entry) error {
	if e.Time.Before(l.since) {
		return nil
	}
	p := l.partial[e.Stream]
	if p == nil {
		if !e.Partial {
			l.closeOpen()
			return l.write(e.Time, e.Message)
		}
		if l.partial == nil {
			l.partial = map[string]*partialLine{}
		}
		p = &partialLine{}
		l.partial[e.Stream] = p
	}
	switch {
	case p.streaming:
		if l.open != e.Stream {
			l.closeOpen()
			l.begin(e.Time)
			l.open = e.Stream
		}
		l.w.Write(e.Message)
	case len(p.msg)+len(e.Message) <= maxLine:
		if len(p.msg) == 0 {
			p.t = e.Time
		}
		p.msg = append(p.msg, e.Message...)
		if e.Partial {
			return nil
		}
		l.closeOpen()
		err := l.write(p.t, p.msg)
		p.msg = p.msg[:0]
		return err
	default:
		l.closeOpen()
		l.begin(p.t)
		l.w.Write(p.msg)
		l.w.Write(e.Message)
		p.msg, p.streaming = nil, true
		l.open = e.Stream
	}
	if e.Partial {
		return nil
	}
	p.streaming = false
	l.open = ""
	return l.w.WriteByte('\n')
}

// raw writes bytes that are not a CRI record as they are; end says they
// end their line.
func (l *lineWriter) raw(b []byte, end bool) error {
	if l.open != "raw" {
		l.closeOpen()
	}
	l.w.Write(b)
	if !end {
		l.open = "raw"
		return nil
	}
	l.open = ""
	return l.w.WriteByte('\n')
}

// begin starts an output line.
func (l *lineWriter) begin(t time.Time) {
	if l.timestamps {
		l.w.WriteString(t.Format(time.RFC3339Nano))
		l.w.WriteByte(' ')
	}
}

// closeOpen ends the line left open by a streamed or raw piece.
func (l *lineWriter) closeOpen() {
	if l.open != "" {
		l.w.WriteByte('\n')
		l.open = ""
	}
}

func (l *lineWriter) write(t time.Time, msg []byte) error {
	l.begin(t)
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
	l.closeOpen()
	for _, stream := range []string{"stdout", "stderr"} {
		if p := l.partial[stream]; p != nil && len(p.msg) > 0 {
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
	var long *longLineError
	if errors.As(err, &long) {
		// Show the end of the line rather than hold all of it.
		return long.from, nil
	}
	return start, err
}

// maxBackwardLine bounds the bytes eachLineBackward holds while looking for
// the start of one line: a file the runtime wrote without splitting lines
// (containerd's max_container_log_line_size = -1) may hold huge ones.
const maxBackwardLine = 4 << 20

// longLineError stops a backward scan inside a line longer than
// maxBackwardLine; from is where the bytes it holds start.
type longLineError struct{ from int64 }

func (e *longLineError) Error() string {
	return fmt.Sprintf("a line longer than %d bytes ends past offset %d", maxBackwardLine, e.from)
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
		if len(data) > maxBackwardLine {
			return &longLineError{from: dataStart}
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
