package loaders

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/bits"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nlpodyssey/safetensors"

	"github.com/tune-ml/tune/tensor"
)

// MaxSafetensorsHeader is the largest header (the JSON after the 8-byte length) tune accepts: 100,000,000 bytes,
// the limit of the reference implementation (safetensors/src/tensor.rs MAX_HEADER_SIZE).
const MaxSafetensorsHeader = 100_000_000

// Errors a corrupt safetensors file gives, named after the reference implementation's SafeTensorError variants.
// Every error wraps one of them (errors.Is), prefixed with "loaders: " and the file name.
var (
	// ErrHeaderTooSmall: the file is shorter than the 8-byte header length.
	ErrHeaderTooSmall = errors.New("header too small")
	// ErrHeaderTooLarge: the declared header length exceeds MaxSafetensorsHeader.
	ErrHeaderTooLarge = errors.New("header too large")
	// ErrInvalidHeaderLength: the declared header length runs past the end of the file.
	ErrInvalidHeaderLength = errors.New("invalid header length")
	// ErrInvalidHeader: the header is not valid UTF-8 JSON of the safetensors shape (a JSON syntax error, or a
	// tensor entry with an unknown dtype, a repeated or missing field, ...: the message says which).
	ErrInvalidHeader = errors.New("invalid header")
	// ErrInvalidOffset: tensors' data_offsets overlap, leave a hole, or do not start at 0.
	ErrInvalidOffset = errors.New("invalid data offsets")
	// ErrTensorInvalidInfo: a tensor's dtype and shape do not match the size of its byte range.
	ErrTensorInvalidInfo = errors.New("tensor info does not match its data")
	// ErrIncompleteMetadata: header plus data does not cover the file exactly (truncated file or trailing bytes).
	ErrIncompleteMetadata = errors.New("incomplete metadata, file not fully covered")
	// ErrUnsupportedDType: a tensor's dtype is valid safetensors but not one tune computes with.
	ErrUnsupportedDType = errors.New("unsupported dtype")
)

// stDType describes one safetensors dtype string: its width in bits, the tune DType it loads as (Invalid when tune
// cannot use it) and the nlpodyssey/safetensors DType (libOK false when that library cannot represent it).
type stDType struct {
	bits  uint64
	tune  tensor.DType
	lib   safetensors.DType
	libOK bool
}

// dtypeNames returns the safetensors dtype names, sorted; usable: only those tune loads as a tensor.DType.
func dtypeNames(usable bool) []string {
	var out []string
	for name, d := range safetensorsDTypes {
		if !usable || d.tune != tensor.Invalid {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out
}

// safetensorsDTypes is every dtype of the reference format (safetensors/src/tensor.rs enum Dtype) with its width.
var safetensorsDTypes = map[string]stDType{
	"BOOL":        {8, tensor.Invalid, safetensors.BOOL, true},
	"U8":          {8, tensor.Invalid, safetensors.U8, true},
	"I8":          {8, tensor.Invalid, safetensors.I8, true},
	"I16":         {16, tensor.Invalid, safetensors.I16, true},
	"U16":         {16, tensor.Invalid, safetensors.U16, true},
	"F16":         {16, tensor.F16, safetensors.F16, true},
	"BF16":        {16, tensor.BF16, safetensors.BF16, true},
	"I32":         {32, tensor.I32, safetensors.I32, true},
	"U32":         {32, tensor.Invalid, safetensors.U32, true},
	"F32":         {32, tensor.F32, safetensors.F32, true},
	"F64":         {64, tensor.Invalid, safetensors.F64, true},
	"I64":         {64, tensor.I64, safetensors.I64, true},
	"U64":         {64, tensor.Invalid, safetensors.U64, true},
	"C64":         {64, tensor.Invalid, 0, false},
	"F8_E4M3":     {8, tensor.Invalid, 0, false},
	"F8_E5M2":     {8, tensor.Invalid, 0, false},
	"F8_E8M0":     {8, tensor.Invalid, 0, false},
	"F8_E4M3FNUZ": {8, tensor.Invalid, 0, false},
	"F8_E5M2FNUZ": {8, tensor.Invalid, 0, false},
	"F6_E2M3":     {6, tensor.Invalid, 0, false},
	"F6_E3M2":     {6, tensor.Invalid, 0, false},
	"F4":          {4, tensor.Invalid, 0, false},
}

// stEntry is one tensor of a parsed header; begin and end are offsets into the data section (end exclusive).
type stEntry struct {
	name       string
	dtype      string
	shape      []int
	begin, end uint64
}

// stHeader is a parsed and validated safetensors header.
type stHeader struct {
	n        uint64    // header length in bytes (after the 8-byte prefix)
	entries  []stEntry // in data-offset order
	byName   map[string]int
	metadata map[string]string // __metadata__; nil when absent
	libOK    bool              // every dtype is one nlpodyssey/safetensors can parse
}

// dataStart returns the file offset of the data section.
func (h *stHeader) dataStart() uint64 { return 8 + h.n }

// parseSafetensorsHeader reads and validates the header of the safetensors file whose complete contents are buf.
// It checks, in the reference implementation's order: the length prefix, the JSON (UTF-8, one object, only
// whitespace after it, no duplicate keys, entries of exactly dtype/shape/data_offsets), each tensor's byte count
// against dtype and shape, contiguous offsets from 0, and that header plus data cover the file exactly. It
// allocates at most a small multiple of the header's size, never anything the header declares. file names the file
// in errors.
func parseSafetensorsHeader(file string, buf []byte) (*stHeader, error) {
	size := uint64(len(buf))
	if size < 8 {
		return nil, fmt.Errorf("loaders: %s: %w: the file has %d bytes, fewer than the 8-byte header length (empty or truncated file?)", file, ErrHeaderTooSmall, size)
	}
	n := binary.LittleEndian.Uint64(buf[:8])
	if n > MaxSafetensorsHeader {
		return nil, fmt.Errorf("loaders: %s: %w: the length prefix declares %d bytes, the limit is %d (corrupt file, or not a safetensors file)", file, ErrHeaderTooLarge, n, MaxSafetensorsHeader)
	}
	if n > size-8 {
		return nil, fmt.Errorf("loaders: %s: %w: the length prefix declares a %d-byte header but only %d bytes follow it (truncated file?)", file, ErrInvalidHeaderLength, n, size-8)
	}
	h, err := decodeHeaderJSON(buf[8 : 8+n])
	if err != nil {
		return nil, fmt.Errorf("loaders: %s: %w", file, err)
	}
	h.n = n
	dataSize := size - 8 - n
	if err := h.validateOffsets(dataSize); err != nil {
		return nil, fmt.Errorf("loaders: %s: %w", file, err)
	}
	return h, nil
}

// decodeHeaderJSON parses the header JSON strictly. It walks tokens instead of unmarshalling into a map so that
// duplicate keys are caught and nothing is allocated from declared sizes.
func decodeHeaderJSON(hdr []byte) (*stHeader, error) {
	if !utf8.Valid(hdr) {
		return nil, fmt.Errorf("%w: the header is not valid UTF-8", ErrInvalidHeader)
	}
	dec := json.NewDecoder(bytes.NewReader(hdr))
	dec.UseNumber()
	if err := expectDelim(dec, '{', "the header"); err != nil {
		return nil, err
	}
	h := &stHeader{byName: map[string]int{}, libOK: true}
	seenMeta := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, jsonError(err)
		}
		key, err := objectKey(tok)
		if err != nil {
			return nil, err
		}
		if key == "__metadata__" {
			if seenMeta {
				return nil, fmt.Errorf("%w: duplicate key \"__metadata__\"", ErrInvalidHeader)
			}
			seenMeta = true
			if h.metadata, err = decodeMetadata(dec); err != nil {
				return nil, err
			}
			continue
		}
		if _, dup := h.byName[key]; dup {
			return nil, fmt.Errorf("%w: tensor %q appears twice", ErrInvalidHeader, key)
		}
		e, err := decodeEntry(dec, key)
		if err != nil {
			return nil, err
		}
		if !safetensorsDTypes[e.dtype].libOK {
			h.libOK = false
		}
		h.byName[key] = len(h.entries)
		h.entries = append(h.entries, e)
	}
	if err := expectDelim(dec, '}', "the header"); err != nil {
		return nil, err
	}
	off := dec.InputOffset()
	for i, c := range hdr[off:] {
		if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
			return nil, fmt.Errorf("%w: trailing characters after the JSON object: byte 0x%02x at header offset %d (a header may only be padded with spaces)", ErrInvalidHeader, c, off+int64(i))
		}
	}
	return h, nil
}

// decodeMetadata reads the __metadata__ value: null or an object of string values.
func decodeMetadata(dec *json.Decoder) (map[string]string, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, jsonError(err)
	}
	if tok == nil {
		return nil, nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("%w: \"__metadata__\" must be an object of strings, got %v", ErrInvalidHeader, describeToken(tok))
	}
	m := map[string]string{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, jsonError(err)
		}
		k, err := objectKey(kt)
		if err != nil {
			return nil, err
		}
		vt, err := dec.Token()
		if err != nil {
			return nil, jsonError(err)
		}
		v, ok := vt.(string)
		if !ok {
			return nil, fmt.Errorf("%w: \"__metadata__\" value of %q must be a string, got %v", ErrInvalidHeader, k, describeToken(vt))
		}
		if _, dup := m[k]; dup {
			return nil, fmt.Errorf("%w: \"__metadata__\" has the key %q twice", ErrInvalidHeader, k)
		}
		m[k] = v
	}
	if err := expectDelim(dec, '}', "\"__metadata__\""); err != nil {
		return nil, err
	}
	return m, nil
}

// decodeEntry reads one tensor entry {"dtype": ..., "shape": [...], "data_offsets": [b, e]} and checks that its
// dtype is known and its byte count matches dtype and shape.
func decodeEntry(dec *json.Decoder, name string) (stEntry, error) {
	e := stEntry{name: name}
	if err := expectDelim(dec, '{', fmt.Sprintf("tensor %q", name)); err != nil {
		return e, err
	}
	var haveDType, haveShape, haveOffsets bool
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return e, jsonError(err)
		}
		k, err := objectKey(kt)
		if err != nil {
			return e, err
		}
		switch k {
		case "dtype":
			if haveDType {
				return e, fmt.Errorf("%w: tensor %q has \"dtype\" twice", ErrInvalidHeader, name)
			}
			haveDType = true
			vt, err := dec.Token()
			if err != nil {
				return e, jsonError(err)
			}
			s, ok := vt.(string)
			if !ok {
				return e, fmt.Errorf("%w: tensor %q: \"dtype\" must be a string, got %v", ErrInvalidHeader, name, describeToken(vt))
			}
			if _, known := safetensorsDTypes[s]; !known {
				return e, fmt.Errorf("%w: tensor %q has the unknown dtype %q; safetensors dtypes are %s (tune computes "+
					"with %s)", ErrInvalidHeader, name, s, strings.Join(dtypeNames(false), ", "), strings.Join(dtypeNames(true), ", "))
			}
			e.dtype = s
		case "shape":
			if haveShape {
				return e, fmt.Errorf("%w: tensor %q has \"shape\" twice", ErrInvalidHeader, name)
			}
			haveShape = true
			dims, err := decodeUints(dec, name, "shape", -1)
			if err != nil {
				return e, err
			}
			e.shape = make([]int, len(dims))
			for i, d := range dims {
				if d > math.MaxInt {
					return e, fmt.Errorf("%w: tensor %q: shape[%d] = %d is too large", ErrTensorInvalidInfo, name, i, d)
				}
				e.shape[i] = int(d)
			}
		case "data_offsets":
			if haveOffsets {
				return e, fmt.Errorf("%w: tensor %q has \"data_offsets\" twice", ErrInvalidHeader, name)
			}
			haveOffsets = true
			offs, err := decodeUints(dec, name, "data_offsets", 2)
			if err != nil {
				return e, err
			}
			e.begin, e.end = offs[0], offs[1]
		default:
			return e, fmt.Errorf("%w: tensor %q has the unexpected key %q (want dtype, shape, data_offsets)", ErrInvalidHeader, name, k)
		}
	}
	if err := expectDelim(dec, '}', fmt.Sprintf("tensor %q", name)); err != nil {
		return e, err
	}
	switch {
	case !haveDType:
		return e, fmt.Errorf("%w: tensor %q has no \"dtype\"", ErrInvalidHeader, name)
	case !haveShape:
		return e, fmt.Errorf("%w: tensor %q has no \"shape\"", ErrInvalidHeader, name)
	case !haveOffsets:
		return e, fmt.Errorf("%w: tensor %q has no \"data_offsets\"", ErrInvalidHeader, name)
	}
	if e.end < e.begin {
		return e, fmt.Errorf("%w: tensor %q: data_offsets [%d, %d] end before they begin", ErrInvalidOffset, name, e.begin, e.end)
	}
	want, ok := entryBytes(safetensorsDTypes[e.dtype].bits, e.shape)
	if !ok {
		return e, fmt.Errorf("%w: tensor %q: %s %v does not fill a whole number of bytes or overflows", ErrTensorInvalidInfo, name, e.dtype, e.shape)
	}
	if got := e.end - e.begin; got != want {
		return e, fmt.Errorf("%w: tensor %q: %s %v needs %d bytes but data_offsets [%d, %d] span %d", ErrTensorInvalidInfo, name, e.dtype, e.shape, want, e.begin, e.end, got)
	}
	return e, nil
}

// entryBytes returns numel(shape)·bits/8, or false on overflow or when the bits do not fill whole bytes.
func entryBytes(width uint64, shape []int) (uint64, bool) {
	numel := uint64(1)
	for _, d := range shape {
		hi, lo := bits.Mul64(numel, uint64(d))
		if hi != 0 {
			return 0, false
		}
		numel = lo
	}
	hi, total := bits.Mul64(numel, width)
	if hi != 0 || total%8 != 0 {
		return 0, false
	}
	return total / 8, true
}

// decodeUints reads a JSON array of non-negative integers; want >= 0 demands exactly that many.
func decodeUints(dec *json.Decoder, name, key string, want int) ([]uint64, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, jsonError(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, fmt.Errorf("%w: tensor %q: %q must be an array, got %v", ErrInvalidHeader, name, key, describeToken(tok))
	}
	var out []uint64
	for dec.More() {
		vt, err := dec.Token()
		if err != nil {
			return nil, jsonError(err)
		}
		num, ok := vt.(json.Number)
		if !ok {
			return nil, fmt.Errorf("%w: tensor %q: %q must hold non-negative integers, got %v", ErrInvalidHeader, name, key, describeToken(vt))
		}
		v, err := strconv.ParseUint(string(num), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: tensor %q: %q holds %s, not a non-negative 64-bit integer", ErrInvalidHeader, name, key, num)
		}
		if want >= 0 && len(out) == want {
			return nil, fmt.Errorf("%w: tensor %q: %q must have exactly %d elements", ErrInvalidHeader, name, key, want)
		}
		out = append(out, v)
	}
	if err := expectDelim(dec, ']', fmt.Sprintf("tensor %q %q", name, key)); err != nil {
		return nil, err
	}
	if want >= 0 && len(out) != want {
		return nil, fmt.Errorf("%w: tensor %q: %q must have exactly %d elements, got %d", ErrInvalidHeader, name, key, want, len(out))
	}
	return out, nil
}

// validateOffsets sorts the entries by offset and checks that they tile [0, dataSize) exactly: the first begins
// at 0, each begins where the previous ended, and the last ends at dataSize.
func (h *stHeader) validateOffsets(dataSize uint64) error {
	sort.SliceStable(h.entries, func(i, j int) bool {
		a, b := h.entries[i], h.entries[j]
		return a.begin < b.begin || (a.begin == b.begin && a.end < b.end)
	})
	for i := range h.entries {
		h.byName[h.entries[i].name] = i
	}
	var prev *stEntry
	end := uint64(0)
	for i := range h.entries {
		e := &h.entries[i]
		switch {
		case e.begin < end:
			return fmt.Errorf("%w: tensor %q [%d, %d) overlaps tensor %q [%d, %d)", ErrInvalidOffset, e.name, e.begin, e.end, prev.name, prev.begin, prev.end)
		case e.begin > end && prev == nil:
			return fmt.Errorf("%w: the first tensor %q begins at %d, not 0: bytes [0, %d) belong to no tensor", ErrInvalidOffset, e.name, e.begin, e.begin)
		case e.begin > end:
			return fmt.Errorf("%w: bytes [%d, %d) between tensor %q and tensor %q belong to no tensor", ErrInvalidOffset, end, e.begin, prev.name, e.name)
		}
		end, prev = e.end, e
	}
	if end != dataSize {
		expected := 8 + h.n + end
		actual := 8 + h.n + dataSize
		what := "trailing bytes after the last tensor"
		if end > dataSize {
			what = fmt.Sprintf("truncated: tensor %q ends at data offset %d, past the end of the file", prev.name, end)
		}
		return fmt.Errorf("%w: header and tensors need %d bytes (8 + %d header + %d data) but the file has %d (%s)", ErrIncompleteMetadata, expected, h.n, end, actual, what)
	}
	return nil
}

// objectKey returns tok as an object key. The decoder only yields strings in key position; the check keeps a
// surprise from becoming a panic.
func objectKey(tok json.Token) (string, error) {
	k, ok := tok.(string)
	if !ok {
		return "", fmt.Errorf("%w: expected an object key, got %v", ErrInvalidHeader, describeToken(tok))
	}
	return k, nil
}

// expectDelim reads the next token and checks that it is the delimiter d.
func expectDelim(dec *json.Decoder, d json.Delim, what string) error {
	tok, err := dec.Token()
	if err != nil {
		return jsonError(err)
	}
	if got, ok := tok.(json.Delim); !ok || got != d {
		want := "an object"
		switch d {
		case '}':
			want = "the end of the object"
		case ']':
			want = "the end of the array"
		}
		return fmt.Errorf("%w: %s must be %s, got %v", ErrInvalidHeader, what, want, describeToken(tok))
	}
	return nil
}

// jsonError wraps a decoder error as ErrInvalidHeader, with the byte offset of a syntax error.
func jsonError(err error) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("%w: invalid JSON: %v at header offset %d", ErrInvalidHeader, se, se.Offset)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("%w: the JSON ends early", ErrInvalidHeader)
	}
	return fmt.Errorf("%w: %v", ErrInvalidHeader, err)
}

// describeToken renders a JSON token for an error message.
func describeToken(tok json.Token) string {
	switch v := tok.(type) {
	case nil:
		return "null"
	case json.Delim:
		return fmt.Sprintf("%q", string(v))
	case string:
		return strconv.Quote(v)
	}
	return fmt.Sprint(tok)
}
