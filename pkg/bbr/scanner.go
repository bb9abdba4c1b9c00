package bbr

import (
	"encoding/binary"
	"fmt"
	"math/bits"
)

// maxNestingDepth is encoding/json's nesting limit; using the same one keeps the
// two in agreement on which documents are valid.
const maxNestingDepth = 10000

// scanState is where the scanner is in the JSON grammar.
type scanState uint8

const (
	stValue      scanState = iota // expecting a value
	stValueOrEnd                  // after '[': a value or ']'
	stKeyOrEnd                    // after '{': a key or '}'
	stKey                         // after ',' in an object: a key
	stColon                       // after a key
	stAfterValue                  // after a value inside a container: ',' or its closer
	stEndTop                      // after the top-level value: only whitespace may follow
	stString                      // inside a string
	stStringEsc                   // after '\' in a string
	stStringHex                   // inside a \uXXXX escape
	stNeg                         // after '-'
	stZero                        // after a leading 0
	stInt                         // in integer digits
	stDot                         // after '.'
	stFrac                        // in fraction digits
	stExp                         // after 'e' or 'E'
	stExpSign                     // after the exponent's sign
	stExpDigits                   // in exponent digits
	stLiteral                     // inside true, false or null
)

// SyntaxError reports a request body that is not valid JSON.
type SyntaxError struct {
	Offset int64 // byte offset of the offending input
	msg    string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("%s (at byte %d)", e.msg, e.Offset) }

// modelScanner validates one JSON document with the grammar and limits of
// encoding/json, and remembers where the last top-level "model" member's value is.
// It never decodes: strings, numbers and nested containers are stepped over in
// place, and it allocates nothing.
//
// It is resumable: scan may be called again with a longer prefix of the same
// document as more of it arrives, and continues where it stopped, even inside a
// token. This is what lets a streamed body be checked chunk by chunk.
type modelScanner struct {
	pos   int // next byte to read
	state scanState
	depth int
	// objects has bit d-1 set when the container at depth d is an object.
	objects [maxNestingDepth/64 + 1]uint64

	strStart   int  // offset of the current string's opening quote
	strEscaped bool // the current string contains an escape
	strIsKey   bool
	hexLeft    uint8
	lit        string // the literal being matched
	litPos     uint8

	root          byte // first byte of the top-level value
	afterModelKey bool // a top-level "model" key was read; its value comes next
	inModelString bool // the current string is that value

	// The last top-level "model" member: its value's first byte (0: none) and, for a
	// string, its raw extent including the quotes.
	modelFirst   byte
	modelStart   int
	modelEnd     int
	modelEscaped bool

	err *SyntaxError
}

// scan consumes doc from where the previous call stopped. doc must begin with the
// bytes given to earlier calls. atEOF says the document is complete.
func (s *modelScanner) scan(doc []byte, atEOF bool) error {
	if s.err != nil {
		return s.err
	}
	i, st := s.pos, s.state
	for i < len(doc) {
		c := doc[i]
		switch st {
		case stValue, stValueOrEnd:
			if isSpace(c) {
				i++
				continue
			}
			if c == ']' && st == stValueOrEnd {
				i++
				st = s.pop()
				continue
			}
			st = s.beginValue(c, i)
			if s.err != nil {
				return s.err
			}
			i++

		case stKeyOrEnd, stKey:
			if isSpace(c) {
				i++
				continue
			}
			if c == '}' && st == stKeyOrEnd {
				i++
				st = s.pop()
				continue
			}
			if c != '"' {
				return s.fail(i, c, "looking for beginning of object key string")
			}
			s.strStart, s.strEscaped, s.strIsKey = i, false, true
			st = stString
			i++

		case stColon:
			if isSpace(c) {
				i++
				continue
			}
			if c != ':' {
				return s.fail(i, c, "after object key")
			}
			st = stValue
			i++

		case stAfterValue:
			if isSpace(c) {
				i++
				continue
			}
			inObject := s.objects[(s.depth-1)/64]&(1<<((s.depth-1)%64)) != 0
			switch {
			case c == ',' && inObject:
				st = stKey
			case c == ',':
				st = stValue
			case c == '}' && inObject, c == ']' && !inObject:
				st = s.pop()
			case inObject:
				return s.fail(i, c, "after object key:value pair")
			default:
				return s.fail(i, c, "after array element")
			}
			i++

		case stEndTop:
			if !isSpace(c) {
				return s.fail(i, c, "after top-level value")
			}
			i++

		case stString:
			if i, st = s.scanString(doc, i); s.err != nil {
				return s.err
			}

		case stStringEsc:
			switch c {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				st = stString
			case 'u':
				st, s.hexLeft = stStringHex, 4
			default:
				return s.fail(i, c, "in string escape code")
			}
			i++

		case stStringHex:
			if !isHex(c) {
				return s.fail(i, c, "in \\u hexadecimal character escape")
			}
			i++
			if s.hexLeft--; s.hexLeft == 0 {
				st = stString
			}

		case stNeg:
			switch {
			case c == '0':
				st = stZero
			case '1' <= c && c <= '9':
				st = stInt
			default:
				return s.fail(i, c, "in numeric literal")
			}
			i++

		case stInt, stFrac, stExpDigits:
			for i < len(doc) && isDigit(doc[i]) {
				i++
			}
			if i == len(doc) {
				continue
			}
			c = doc[i]
			switch {
			case c == '.' && st == stInt:
				st = stDot
				i++
			case (c == 'e' || c == 'E') && st != stExpDigits:
				st = stExp
				i++
			default:
				st = s.endScalar() // c belongs to what follows the number
			}

		case stZero:
			switch c {
			case '.':
				st = stDot
				i++
			case 'e', 'E':
				st = stExp
				i++
			default:
				st = s.endScalar()
			}

		case stDot:
			if !isDigit(c) {
				return s.fail(i, c, "after decimal point in numeric literal")
			}
			st = stFrac
			i++

		case stExp:
			switch {
			case c == '+' || c == '-':
				st = stExpSign
			case isDigit(c):
				st = stExpDigits
			default:
				return s.fail(i, c, "in exponent of numeric literal")
			}
			i++

		case stExpSign:
			if !isDigit(c) {
				return s.fail(i, c, "in exponent of numeric literal")
			}
			st = stExpDigits
			i++

		case stLiteral:
			if c != s.lit[s.litPos] {
				return s.fail(i, c, fmt.Sprintf("in literal %s (expecting %q)", s.lit, s.lit[s.litPos]))
			}
			i++
			if s.litPos++; int(s.litPos) == len(s.lit) {
				st = s.endScalar()
			}
		}
	}
	s.pos, s.state = i, st
	if !atEOF {
		return nil
	}
	switch st {
	case stEndTop:
		return nil
	case stZero, stInt, stFrac, stExpDigits:
		if s.depth == 0 { // a top-level number ends with the input
			s.state = stEndTop
			return nil
		}
	}
	s.err = &SyntaxError{Offset: int64(len(doc)), msg: "unexpected end of JSON input"}
	return s.err
}

// scanString steps over string content from offset i, up to and including the
// closing quote. Escapes complete in doc are checked here, without leaving the
// loop: prompts are full of them. One cut by the end of doc is left to the
// escape states, which resume it when more arrives.
func (s *modelScanner) scanString(doc []byte, i int) (int, scanState) {
	for {
		i += indexStringSpecial(doc[i:])
		if i == len(doc) {
			return i, stString
		}
		switch c := doc[i]; c {
		case '"':
			i++
			return i, s.endString(doc, i)
		case '\\':
			s.strEscaped = true
			if i+1 == len(doc) {
				return i + 1, stStringEsc
			}
			switch e := doc[i+1]; e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(doc) {
					return i + 1, stStringEsc
				}
				for j := i + 2; j < i+6; j++ {
					if !isHex(doc[j]) {
						s.fail(j, doc[j], "in \\u hexadecimal character escape")
						return j, stString
					}
				}
				i += 6
			default:
				s.fail(i+1, e, "in string escape code")
				return i + 1, stString
			}
		default:
			s.fail(i, c, "in string literal")
			return i, stString
		}
	}
}

// beginValue starts the value whose first byte c is at offset i.
func (s *modelScanner) beginValue(c byte, i int) scanState {
	if s.depth == 0 {
		s.root = c
	}
	if s.afterModelKey {
		s.afterModelKey = false
		s.modelFirst = c
		s.inModelString = c == '"'
		s.modelStart = i
	}
	switch c {
	case '{':
		return s.push(true, i, c)
	case '[':
		return s.push(false, i, c)
	case '"':
		s.strStart, s.strEscaped, s.strIsKey = i, false, false
		return stString
	case '-':
		return stNeg
	case '0':
		return stZero
	case 't':
		s.lit, s.litPos = "true", 1
		return stLiteral
	case 'f':
		s.lit, s.litPos = "false", 1
		return stLiteral
	case 'n':
		s.lit, s.litPos = "null", 1
		return stLiteral
	}
	if '1' <= c && c <= '9' {
		return stInt
	}
	s.fail(i, c, "looking for beginning of value")
	return stValue
}

func (s *modelScanner) push(object bool, i int, c byte) scanState {
	if s.depth == maxNestingDepth {
		s.fail(i, c, "exceeding the maximum nesting depth")
		return stValue
	}
	word, bit := s.depth/64, uint(s.depth%64)
	if object {
		s.objects[word] |= 1 << bit
	} else {
		s.objects[word] &^= 1 << bit
	}
	s.depth++
	if object {
		return stKeyOrEnd
	}
	return stValueOrEnd
}

func (s *modelScanner) pop() scanState {
	s.depth--
	if s.depth == 0 {
		return stEndTop
	}
	return stAfterValue
}

func (s *modelScanner) endScalar() scanState {
	if s.depth == 0 {
		return stEndTop
	}
	return stAfterValue
}

// endString finishes the string whose closing quote ends just before end.
func (s *modelScanner) endString(doc []byte, end int) scanState {
	if s.strIsKey {
		if s.depth == 1 {
			s.afterModelKey = isModelKey(doc[s.strStart+1:end-1], s.strEscaped)
		}
		return stColon
	}
	if s.inModelString {
		s.inModelString = false
		s.modelEnd, s.modelEscaped = end, s.strEscaped
	}
	return s.endScalar()
}

func (s *modelScanner) fail(i int, c byte, context string) error {
	s.err = &SyntaxError{Offset: int64(i), msg: fmt.Sprintf("invalid character %q %s", c, context)}
	return s.err
}

// isModelKey reports whether a raw top-level key decodes to "model".
func isModelKey(raw []byte, escaped bool) bool {
	if !escaped {
		// Without escapes only invalid UTF-8 changes when decoded, and it decodes to
		// U+FFFD, never to ASCII: the raw bytes must be "model" themselves.
		return string(raw) == "model"
	}
	// Every raw byte sequence decodes to at least one byte per six ("\u00XX"), so a
	// longer key cannot decode to five bytes.
	if len(raw) > 6*len("model") {
		return false
	}
	var buf [3 * 6 * len("model")]byte
	return string(appendUnquoted(buf[:0], raw)) == "model"
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isHex(c byte) bool {
	return isDigit(c) || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

// SWAR constants: one bit pattern per byte lane of a 64-bit word.
const (
	lanesLow  = 0x0101010101010101
	lanesHigh = 0x8080808080808080
)

// stringSpecial marks the bytes that interrupt plain string content: '"', '\\'
// and the control characters.
var stringSpecial = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// shortRun is how far indexStringSpecial looks byte by byte before switching to
// eight bytes at a time: escapes in code and chat text are usually closer than
// that, and the byte loop finds them without the word loop's setup.
const shortRun = 32

// indexStringSpecial returns the offset of the first byte in b that interrupts plain
// string content, or len(b).
//
// Prompts make up nearly all of a request body, so this is the scanner's
// throughput. Past the short run it tests eight bytes per step. Per lane,
// (x - k) &^ x has its high bit set when the byte is below k; a borrow can only
// propagate upward from a lane that already matched, so the lowest flagged lane is
// always a true match.
func indexStringSpecial(b []byte) int {
	i := 0
	for n := min(len(b), shortRun); i < n; i++ {
		if stringSpecial[b[i]] {
			return i
		}
	}
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		quote := x ^ (lanesLow * '"')
		backslash := x ^ (lanesLow * '\\')
		m := ((quote - lanesLow) &^ quote) | ((backslash - lanesLow) &^ backslash) | ((x - lanesLow*0x20) &^ x)
		if m &= lanesHigh; m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(b); i++ {
		if stringSpecial[b[i]] {
			return i
		}
	}
	return len(b)
}
