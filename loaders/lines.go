package loaders

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/tune-ml/tune/internal/badinput"
)

// DefaultMaxRowBytes is the longest line LoadDataset and LineReader accept unless told otherwise: 1 MiB. A row
// is tokenized and truncated to max_length tokens, so a longer one is almost surely a broken file (a missing
// newline, a binary file); refusing it at its line keeps memory bounded by the limit, never by the file.
const DefaultMaxRowBytes = 1 << 20

// ErrRowTooLong is wrapped by the error for a line longer than the limit.
var ErrRowTooLong = errors.New("row too long")

// LineReader reads a text file line by line with a bound on each line's length, so that a file of one huge
// line costs at most the limit in memory. Every line must be valid UTF-8; a UTF-8 byte-order mark at the start
// is dropped. Errors name name:line.
type LineReader struct {
	r     *bufio.Reader
	name  string
	limit int
	line  int
	buf   []byte
}

// NewLineReader reads r (called name in errors) with lines of at most limit bytes (without the newline); a
// limit ≤ 0 means DefaultMaxRowBytes.
func NewLineReader(r io.Reader, name string, limit int) *LineReader {
	if limit <= 0 {
		limit = DefaultMaxRowBytes
	}
	return &LineReader{r: bufio.NewReaderSize(r, 64<<10), name: name, limit: limit}
}

// Next returns the next line without its "\n" or "\r\n" and its 1-based number; io.EOF after the last line. The
// returned bytes are valid until the next call.
func (l *LineReader) Next() ([]byte, int, error) {
	l.buf = l.buf[:0]
	for {
		chunk, err := l.r.ReadSlice('\n')
		if len(l.buf)+len(chunk) > l.limit+2 { // +2: the "\r\n" is not part of the line
			l.line++
			return nil, l.line, badinput.Errorf("loaders: %s:%d: %w: the line is longer than %d bytes, the most a row may hold "+
				"(a missing line break, or not a text file?); split or shorten the text: rows are truncated to "+
				"max_length tokens anyway", l.name, l.line, ErrRowTooLong, l.limit)
		}
		l.buf = append(l.buf, chunk...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, l.line, fmt.Errorf("loaders: %s: %w", l.name, err)
		}
		if len(l.buf) == 0 && err != nil {
			return nil, l.line, io.EOF
		}
		l.line++
		line := bytes.TrimSuffix(l.buf, []byte("\n"))
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > l.limit {
			return nil, l.line, badinput.Errorf("loaders: %s:%d: %w: the line is longer than %d bytes, the most a row may hold; "+
				"split or shorten the text", l.name, l.line, ErrRowTooLong, l.limit)
		}
		if l.line == 1 {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
		}
		if err := checkLineUTF8(l.name, l.line, line); err != nil {
			return nil, l.line, err
		}
		return line, l.line, nil
	}
}

// checkLineUTF8 returns an error naming file:line, the byte and its column (1-based, in bytes) at the first
// byte of line that is not valid UTF-8, so that text in another encoding (Latin-1, Windows-1252) is reported
// instead of being replaced by U+FFFD when tokenized.
func checkLineUTF8(path string, lineNo int, line []byte) error {
	if utf8.Valid(line) {
		return nil
	}
	for i := 0; i < len(line); {
		r, size := utf8.DecodeRune(line[i:])
		if r == utf8.RuneError && size <= 1 {
			return badinput.Errorf("loaders: %s:%d: invalid UTF-8 (byte 0x%02x at column %d); data files must be UTF-8 "+
				"(convert with iconv -f WINDOWS-1252 -t UTF-8, or the file's encoding)", path, lineNo, line[i], i+1)
		}
		i += size
	}
	return nil
}

// linesAsReader serves a LineReader's lines (each with "\n") as an io.Reader, for encoding/csv, and refuses a
// record that grows past the limit over several lines (a quoted field left open); the caller sets mark.
type linesAsReader struct {
	lr      *LineReader
	pending []byte
	total   int64 // bytes served
	mark    int64 // where the current record starts (encoding/csv's InputOffset after the last record)
	err     error
}

func (s *linesAsReader) Read(p []byte) (int, error) {
	for len(s.pending) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		line, n, err := s.lr.Next()
		if err != nil {
			s.err = err
			continue
		}
		s.pending = append(append(s.pending[:0], line...), '\n')
		// encoding/csv reads ahead up to its 4 KiB buffer, hence the slack.
		if s.total+int64(len(s.pending))-s.mark > int64(s.lr.limit)+8<<10 {
			s.err = fmt.Errorf("loaders: %s:%d: %w: the record is longer than %d bytes, the most a row may hold "+
				"(a quoted field that is never closed?)", s.lr.name, n, ErrRowTooLong, s.lr.limit)
			s.pending = s.pending[:0]
		}
	}
	k := copy(p, s.pending)
	s.pending = s.pending[k:]
	s.total += int64(k)
	return k, nil
}
