package requestbody

import (
	"bytes"
	"encoding/binary"
	"math/bits"
	"slices"
	"unicode/utf16"
	"unicode/utf8"
)

// appendText decodes the string at i into dst and consumes it, checking it as
// rawString does. It needs the whole document (more unset): the prompt is
// read only from complete bodies.
//
// A string without escapes costs two vectorised searches, the control
// character check and one copy; from the first escape on, eight bytes at a
// time are copied while a SWAR test looks for a quote, a backslash or a
// control character, so dense escapes (code, quoted dialogue, line breaks)
// cost no function call each. Anything wrong with the string is left to
// rawString, run again from its start, so that both report the same error.
func (s *scanner) appendText(dst []byte) ([]byte, bool) {
	start := s.i
	out, next, ok := decodeString(dst, s.b, s.i+1)
	if !ok {
		s.i = start
		_, _, _ = s.rawString()
		return dst, false
	}
	s.i = next
	return out, true
}

// decodeString appends the contents of the string starting at b[i] to dst,
// up to its closing quote (next is after it). ok is false when the string is
// not valid JSON or does not end within b. Lone surrogates become U+FFFD, as
// in encoding/json; other bytes are copied as they are (invalid UTF-8
// included: the prompt is only hashed and measured).
func decodeString(dst, b []byte, i int) (out []byte, next int, ok bool) {
	q := bytes.IndexByte(b[i:], '"')
	if q < 0 {
		return dst, 0, false
	}
	run := b[i : i+q]
	bs := bytes.IndexByte(run, '\\')
	if bs < 0 {
		if indexControl(run) >= 0 {
			return dst, 0, false
		}
		return append(dst, run...), i + q + 1, true
	}
	if indexControl(run[:bs]) >= 0 {
		return dst, 0, false
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
			m := specialLanes(w)
			if m == 0 {
				i, n = i+8, n+8
				continue
			}
			k := bits.TrailingZeros64(m) / 8
			i, n = i+k, n+k
		} else if i == len(b) {
			return dst[:n], 0, false
		} else if c := b[i]; !stringSpecial[c] {
			dst[n] = c
			i, n = i+1, n+1
			continue
		}
		// b[i] is a quote, a backslash or a control character.
		switch {
		case b[i] == '"':
			return dst[:n], i + 1, true
		case b[i] != '\\', i+1 == len(b):
			return dst[:n], 0, false
		case b[i+1] == 'u':
			r, size, ok := decodeU(b[i:])
			if !ok {
				return dst[:n], 0, false
			}
			n += utf8.EncodeRune(dst[n:], r)
			i += size
		default:
			c, ok := unescapeByte(b[i+1])
			if !ok {
				return dst[:n], 0, false
			}
			dst[n] = c
			i, n = i+2, n+1
		}
	}
}

// decodeU decodes the \u escape at the start of b, with the low surrogate
// escape that follows a high one; ok is false without four hex digits.
func decodeU(b []byte) (r rune, size int, ok bool) {
	r, ok = hex4(b[2:])
	if !ok {
		return 0, 0, false
	}
	if !utf16.IsSurrogate(r) {
		return r, 6, true
	}
	if len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
		if r2, ok := hex4(b[8:]); ok {
			if d := utf16.DecodeRune(r, r2); d != utf8.RuneError {
				return d, 12, true
			}
		}
	}
	return utf8.RuneError, 6, true
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		var v byte
		switch {
		case '0' <= c && c <= '9':
			v = c - '0'
		case 'a' <= c && c <= 'f':
			v = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			v = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(v)
	}
	return r, true
}

func unescapeByte(c byte) (byte, bool) {
	switch c {
	case '"', '\\', '/':
		return c, true
	case 'b':
		return '\b', true
	case 'f':
		return '\f', true
	case 'n':
		return '\n', true
	case 'r':
		return '\r', true
	case 't':
		return '\t', true
	}
	return 0, false
}

// appendUnescaped appends the decoded content of a raw string rawString
// has checked.
func appendUnescaped(dst, raw []byte) []byte {
	for {
		bs := bytes.IndexByte(raw, '\\')
		if bs < 0 {
			return append(dst, raw...)
		}
		dst, raw = append(dst, raw[:bs]...), raw[bs:]
		if raw[1] == 'u' {
			r, size, _ := decodeU(raw)
			dst, raw = utf8.AppendRune(dst, r), raw[size:]
			continue
		}
		c, _ := unescapeByte(raw[1])
		dst, raw = append(dst, c), raw[2:]
	}
}

// keyIs reports whether a raw key decodes to name (ASCII).
func keyIs(raw []byte, escaped bool, name string) bool {
	if !escaped {
		// Without escapes only invalid UTF-8 changes when decoded, and never
		// into ASCII: the raw bytes must be name itself.
		return string(raw) == name
	}
	// Every escape decodes to at least one byte per six.
	if len(raw) > 6*len(name) {
		return false
	}
	var buf [64]byte
	return string(appendUnescaped(buf[:0], raw)) == name
}

// decodeModel decodes a raw string as encoding/json does, invalid UTF-8
// included (each invalid byte becomes U+FFFD), so that the model name seen
// here is the one a Go (or any lenient) server decodes.
func decodeModel(raw []byte, escaped bool) string {
	if !escaped && utf8.Valid(raw) {
		return string(raw)
	}
	d := appendUnescaped(make([]byte, 0, len(raw)+8), raw)
	if utf8.Valid(d) {
		return string(d)
	}
	// Escapes decode to whole runes, so the invalid bytes are raw ones.
	out := make([]byte, 0, len(d)+8)
	for len(d) > 0 {
		r, size := utf8.DecodeRune(d)
		if r == utf8.RuneError && size == 1 {
			out = utf8.AppendRune(out, utf8.RuneError)
		} else {
			out = append(out, d[:size]...)
		}
		d = d[size:]
	}
	return string(out)
}
