package bbr

import (
	"unicode/utf16"
	"unicode/utf8"
)

// appendUnquoted appends the decoded content of a JSON string to dst. raw is the text
// between the quotes and must already have passed the scanner. It decodes exactly as
// encoding/json does, so the model name seen here is the one a Go (or any lenient)
// server decodes: invalid UTF-8 bytes and unpaired surrogate escapes become U+FFFD,
// and a high surrogate escape followed by a low one combines into one code point.
func appendUnquoted(dst, raw []byte) []byte {
	for i := 0; i < len(raw); {
		c := raw[i]
		switch {
		case c == '\\':
			switch e := raw[i+1]; e {
			case 'b':
				dst = append(dst, '\b')
			case 'f':
				dst = append(dst, '\f')
			case 'n':
				dst = append(dst, '\n')
			case 'r':
				dst = append(dst, '\r')
			case 't':
				dst = append(dst, '\t')
			case 'u':
				r := hex4(raw[i+2:])
				i += 6
				if utf16.IsSurrogate(r) {
					if i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
						if pair := utf16.DecodeRune(r, hex4(raw[i+2:])); pair != utf8.RuneError {
							dst = utf8.AppendRune(dst, pair)
							i += 6
							continue
						}
					}
					r = utf8.RuneError
				}
				dst = utf8.AppendRune(dst, r)
				continue
			default: // '"', '\\', '/'
				dst = append(dst, e)
			}
			i += 2
		case c < utf8.RuneSelf:
			dst = append(dst, c)
			i++
		default:
			r, size := utf8.DecodeRune(raw[i:])
			if r == utf8.RuneError && size == 1 {
				dst = utf8.AppendRune(dst, utf8.RuneError)
			} else {
				dst = append(dst, raw[i:i+size]...)
			}
			i += size
		}
	}
	return dst
}

// hex4 decodes four hex digits the scanner has already checked.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b[:4] {
		switch {
		case c <= '9':
			c -= '0'
		case c >= 'a':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// unquote decodes a JSON string's raw content, without copying work when there is
// nothing to decode.
func unquote(raw []byte, escaped bool) string {
	if !escaped && utf8.Valid(raw) {
		return string(raw)
	}
	return string(appendUnquoted(make([]byte, 0, len(raw)+8), raw))
}
