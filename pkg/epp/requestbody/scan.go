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

// str reads a string and returns its raw contents (between the quotes). Only
// quotes are searched for (bytes.IndexByte, vectorised); a quote preceded by
// an odd run of backslashes is escaped. Escapes are decoded, leniently, only
// where the text is used.
func (s *scanner) str() (raw []byte, ok bool) {
	if s.peek() != '"' {
		return nil, false
	}
	start := s.i + 1
	for pos := start; ; {
		q := bytes.IndexByte(s.b[pos:], '"')
		if q < 0 {
			return nil, false
		}
		q += pos
		bs := 0
		for q-bs-1 >= start && s.b[q-bs-1] == '\\' {
			bs++
		}
		if bs%2 == 0 {
			s.i = q + 1
			return s.b[start:q], true
		}
		pos = q + 1
	}
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// appendUnescaped appends the decoded contents of a string str accepted.
// Without escapes it is one copy. With them, eight bytes at a time are copied
// while a SWAR test looks for a backslash, so dense escapes (code, quoted
// dialogue) cost no function call each. Lone surrogates become U+FFFD, as in
// encoding/json; an invalid escape keeps its character.
func appendUnescaped(dst, raw []byte) []byte {
	first := bytes.IndexByte(raw, '\\')
	if first < 0 {
		return append(dst, raw...)
	}
	dst = append(dst, raw[:first]...)
	raw = raw[first:]
	// Decoding never lengthens the text, so out can be written ahead.
	n := len(dst)
	dst = slices.Grow(dst, len(raw))
	out := dst[n : n+len(raw)]
	o, i := 0, 0
	for i < len(raw) {
		if raw[i] != '\\' {
			if i+8 <= len(raw) {
				w := binary.LittleEndian.Uint64(raw[i:])
				binary.LittleEndian.PutUint64(out[o:], w)
				x := w ^ ('\\' * ones)
				if m := (x - ones) &^ x & highs; m != 0 {
					k := bits.TrailingZeros64(m) / 8
					i, o = i+k, o+k
				} else {
					i, o = i+8, o+8
				}
				continue
			}
			out[o] = raw[i]
			i, o = i+1, o+1
			continue
		}
		if i+1 >= len(raw) { // cannot follow str, kept for safety
			out[o] = '\\'
			i, o = i+1, o+1
			continue
		}
		if c := raw[i+1]; c != 'u' {
			out[o] = unescapeByte(c)
			i, o = i+2, o+1
			continue
		}
		r, size := decodeU(raw[i:])
		o += utf8.EncodeRune(out[o:], r)
		i += size
	}
	return dst[:n+o]
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
