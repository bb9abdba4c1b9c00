package requestbody

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"slices"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxDepth bounds nesting, as encoding/json does, so that a body of brackets
// cannot exhaust the stack.
const maxDepth = 10000

// scanner walks JSON in place. Every method leaves i after what it read and
// returns false on malformed input; nothing is decoded unless asked for.
type scanner struct {
	b     []byte
	i     int
	depth int
}

func (s *scanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte (0 at the end).
func (s *scanner) peek() byte {
	s.ws()
	if s.i < len(s.b) {
		return s.b[s.i]
	}
	return 0
}

// str reads a string and returns its raw contents (between the quotes),
// escapes undecoded (and unchecked: they are decoded, leniently, only where
// the text is used).
func (s *scanner) str() (raw []byte, ok bool) {
	if s.peek() != '"' {
		return nil, false
	}
	start := s.i + 1
	end := closingQuote(s.b, start)
	if end < 0 {
		return nil, false
	}
	s.i = end + 1
	return s.b[start:end], true
}

// closingQuote finds the quote that ends a string whose contents start at
// start: a quote after an even run of backslashes. It asks bytes.IndexByte
// (vectorised) for each quote; after a few escaped quotes it switches to a
// SWAR scan, so that dense escaped quotes do not cost a call each.
func closingQuote(b []byte, start int) int {
	pos := start
	for range 4 {
		q := bytes.IndexByte(b[pos:], '"')
		if q < 0 {
			return -1
		}
		if q += pos; !escapedAt(b, start, q) {
			return q
		}
		pos = q + 1
	}
	for ; pos+8 <= len(b); pos += 8 {
		for m := zeroBytes(binary.LittleEndian.Uint64(b[pos:]) ^ quotes); m != 0; m &= m - 1 {
			if q := pos + bits.TrailingZeros64(m)/8; !escapedAt(b, start, q) {
				return q
			}
		}
	}
	for ; pos < len(b); pos++ {
		if b[pos] == '"' && !escapedAt(b, start, pos) {
			return pos
		}
	}
	return -1
}

// escapedAt reports whether the quote at q follows an odd run of backslashes
// (counting back no further than start).
func escapedAt(b []byte, start, q int) bool {
	n := 0
	for q-n > start && b[q-n-1] == '\\' {
		n++
	}
	return n%2 == 1
}

const (
	lows7       = 0x7f7f7f7f7f7f7f7f
	quotes      = '"' * 0x0101010101010101
	backslashes = '\\' * 0x0101010101010101
)

// zeroBytes has the high bit set in exactly the bytes of x that are zero.
func zeroBytes(x uint64) uint64 {
	return ^((x&lows7 + lows7) | x | lows7)
}

// appendText decodes the string at the scanner into dst and consumes it.
func (s *scanner) appendText(dst []byte) ([]byte, bool) {
	if s.peek() != '"' {
		return dst, false
	}
	dst, next, closed := decodeString(dst, s.b, s.i+1)
	if !closed {
		return dst, false
	}
	s.i = next
	return dst, true
}

// appendUnescaped appends the decoded contents of a raw string from str.
func appendUnescaped(dst, raw []byte) []byte {
	dst, _, _ = decodeString(dst, raw, 0)
	return dst
}

// decodeString appends the decoded string contents starting at b[i] to dst,
// up to an unescaped quote (closed, next is after it) or the end of b. A
// string without escapes costs two vectorised searches and one copy; from
// the first escape on, eight bytes at a time are copied while a SWAR test
// looks for a quote or a backslash, so dense escapes (code, quoted dialogue,
// line breaks) cost no function call each. Lone surrogates become U+FFFD, as
// in encoding/json; an invalid escape keeps its character.
func decodeString(dst, b []byte, i int) (out []byte, next int, closed bool) {
	q := bytes.IndexByte(b[i:], '"')
	run := b[i:]
	if q >= 0 {
		run = run[:q]
	}
	bs := bytes.IndexByte(run, '\\')
	if bs < 0 {
		if q < 0 {
			return append(dst, run...), len(b), false
		}
		return append(dst, run...), i + q + 1, true
	}
	dst = append(dst, run[:bs]...)
	i += bs
	n := len(dst)
	for {
		if cap(dst)-n < 16 {
			dst = slices.Grow(dst[:n], 16)
		}
		dst = dst[:cap(dst)]
		if i+8 <= len(b) {
			w := binary.LittleEndian.Uint64(b[i:])
			binary.LittleEndian.PutUint64(dst[n:], w)
			m := zeroBytes(w^quotes) | zeroBytes(w^backslashes)
			if m == 0 {
				i, n = i+8, n+8
				continue
			}
			k := bits.TrailingZeros64(m) / 8
			i, n = i+k, n+k
		} else if i == len(b) {
			return dst[:n], i, false
		} else if c := b[i]; c != '"' && c != '\\' {
			dst[n] = c
			i, n = i+1, n+1
			continue
		}
		// b[i] is a quote or a backslash.
		switch {
		case b[i] == '"':
			return dst[:n], i + 1, true
		case i+1 == len(b):
			dst[n] = '\\'
			return dst[:n+1], i + 1, false
		case b[i+1] != 'u':
			dst[n] = unescapeByte(b[i+1])
			i, n = i+2, n+1
		default:
			r, size := decodeU(b[i:])
			n += utf8.EncodeRune(dst[n:], r)
			i += size
		}
	}
}

// decodeU decodes the \u escape at the start of b (with its low surrogate
// when one follows) and returns the rune and the bytes read. Without four hex
// digits it is an invalid escape: 'u', two bytes read.
func decodeU(b []byte) (rune, int) {
	r, ok := hex4(b[2:])
	if !ok {
		return 'u', 2
	}
	if !utf16.IsSurrogate(r) {
		return r, 6
	}
	if len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
		if r2, ok := hex4(b[8:]); ok {
			if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
				return d, 12
			}
		}
	}
	return utf8.RuneError, 6
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		v := hexVal(c)
		if v < 0 {
			return 0, false
		}
		r = r<<4 | v
	}
	return r, true
}

func hexVal(c byte) rune {
	switch {
	case '0' <= c && c <= '9':
		return rune(c - '0')
	case 'a' <= c && c <= 'f':
		return rune(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return rune(c - 'A' + 10)
	}
	return -1
}

func unescapeByte(c byte) byte {
	switch c {
	case 'b':
		return '\b'
	case 'f':
		return '\f'
	case 'n':
		return '\n'
	case 'r':
		return '\r'
	case 't':
		return '\t'
	}
	return c // '"', '\\', '/', or an invalid escape's character
}

// text returns a string value decoded (a copy).
func (s *scanner) text() (string, bool) {
	raw, ok := s.str()
	if !ok {
		return "", false
	}
	return string(appendUnescaped(nil, raw)), true
}

// keyIs reports whether a raw key decodes to name.
func keyIs(raw []byte, name string) bool {
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == name
	}
	var buf [32]byte
	return len(raw) <= 6*len(name) && string(appendUnescaped(buf[:0], raw)) == name
}

// object reads an object, calling field for each key with the scanner at the
// value, which field must consume (or skip with value).
func (s *scanner) object(field func(key []byte) bool) bool {
	if s.peek() != '{' {
		return false
	}
	if s.depth++; s.depth > maxDepth {
		return false
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		s.depth--
		return true
	}
	for {
		key, ok := s.str()
		if !ok || s.peek() != ':' {
			return false
		}
		s.i++
		if !field(key) {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			s.depth--
			return true
		default:
			return false
		}
	}
}

// array reads an array, calling elem with the scanner at each element, which
// elem must consume.
func (s *scanner) array(elem func() bool) bool {
	if s.peek() != '[' {
		return false
	}
	if s.depth++; s.depth > maxDepth {
		return false
	}
	s.i++
	if s.peek() == ']' {
		s.i++
		s.depth--
		return true
	}
	for {
		if !elem() {
			return false
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			s.depth--
			return true
		default:
			return false
		}
	}
}

// value skips any value, checking its syntax.
func (s *scanner) value() bool {
	switch c := s.peek(); {
	case c == '"':
		_, ok := s.str()
		return ok
	case c == '{':
		return s.object(func([]byte) bool { return s.value() })
	case c == '[':
		return s.array(s.value)
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || '0' <= c && c <= '9':
		_, ok := s.number()
		return ok
	}
	return false
}

func (s *scanner) literal(lit string) bool {
	if !bytes.HasPrefix(s.b[s.i:], []byte(lit)) {
		return false
	}
	s.i += len(lit)
	return true
}

// number reads a number with JSON's grammar and returns its text.
func (s *scanner) number() ([]byte, bool) {
	s.ws()
	start := s.i
	digits := func() int {
		n := 0
		for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.i < len(s.b) && s.b[s.i] == '-' {
		s.i++
	}
	if s.i < len(s.b) && s.b[s.i] == '0' {
		s.i++
	} else if digits() == 0 {
		return nil, false
	}
	if s.i < len(s.b) && s.b[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return nil, false
		}
	}
	if s.i < len(s.b) && (s.b[s.i] == 'e' || s.b[s.i] == 'E') {
		s.i++
		if s.i < len(s.b) && (s.b[s.i] == '+' || s.b[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return nil, false
		}
	}
	return s.b[start:s.i], true
}

// float reads a number value as float64.
func (s *scanner) float() (float64, bool) {
	raw, ok := s.number()
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	return f, err == nil || errIsRange(err)
}

func errIsRange(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}
