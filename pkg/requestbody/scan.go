package requestbody

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/bits"
	"strconv"
)

// maxNestingDepth is encoding/json's nesting limit; the same one keeps the two
// in agreement on which documents are valid.
const maxNestingDepth = 10000

// SyntaxError reports a request body that is not valid JSON. The message is
// encoding/json's for the same input; Offset is the offending byte's (the
// body's length when it ends too early).
type SyntaxError struct {
	Offset int64
	msg    string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("%s (at byte %d)", e.msg, e.Offset) }

// scanner walks one JSON document in place, with the grammar and limits of
// encoding/json. Its methods start at a value (or a token) and leave i after
// it; they return false once the document is invalid, with err saying why.
// Nothing is decoded unless a method is asked to.
//
// With more set the document may arrive in pieces: where the scanner reaches
// the end of b it calls more, which returns once b is longer (true) or the
// document has ended (false). Without it b is the whole document.
type scanner struct {
	b     []byte
	i     int
	depth int
	more  func() bool
	err   *SyntaxError
}

// fill waits for more of the document; false at its end.
func (s *scanner) fill() bool { return s.more != nil && s.more() }

// at reports whether the document has a byte at offset i, waiting for it if
// need be.
func (s *scanner) at(i int) bool {
	for i >= len(s.b) {
		if !s.fill() {
			return false
		}
	}
	return true
}

// next skips white space and returns the next byte without consuming it, -1
// at the end of the document.
func (s *scanner) next() int {
	for {
		for s.i < len(s.b) {
			switch c := s.b[s.i]; c {
			case ' ', '\t', '\n', '\r':
				s.i++
			default:
				return int(c)
			}
		}
		if !s.fill() {
			return -1
		}
	}
}

// failAt records the error at offset i, described as encoding/json does:
// context follows the offending character, and past the end the input ended
// too early. It returns false for the caller to return.
func (s *scanner) failAt(i int, context string) bool {
	if s.err == nil {
		if i >= len(s.b) {
			s.err = &SyntaxError{Offset: int64(len(s.b)), msg: "unexpected end of JSON input"}
		} else {
			s.err = &SyntaxError{Offset: int64(i), msg: fmt.Sprintf("invalid character %q %s", s.b[i], context)}
		}
	}
	return false
}

func (s *scanner) fail(context string) bool { return s.failAt(s.i, context) }

// document reads the top-level value: an object through field (see object),
// anything else stepped over. It reports whether the document is valid and
// whether its value is an object.
func (s *scanner) document(field func(key []byte, escaped bool) bool) (valid, isObject bool) {
	c := s.next()
	isObject = c == '{'
	var ok bool
	if isObject {
		ok = s.object(field)
	} else {
		ok = s.value()
	}
	if ok && s.next() != -1 {
		ok = s.fail("after top-level value")
	}
	return ok, isObject
}

func (s *scanner) push() bool {
	if s.depth == maxNestingDepth {
		return s.fail("exceeding the maximum nesting depth")
	}
	s.depth++
	s.i++
	return true
}

// pop steps over the closing bracket of the container push entered.
func (s *scanner) pop() bool {
	s.i++
	s.depth--
	return true
}

// separator reads what follows a member or element: a comma (stepped over;
// more is true), the container's closing bracket (popped), or anything else,
// a failure described as after.
func (s *scanner) separator(closing int, after string) (more, ok bool) {
	switch s.next() {
	case ',':
		s.i++
		return true, true
	case closing:
		return false, s.pop()
	}
	return false, s.fail(after)
}

// object reads the object at i, calling field for each key (its raw text,
// escapes undecoded, and whether it has any) with the scanner at the member's
// value, which field must consume (value steps over it).
func (s *scanner) object(field func(key []byte, escaped bool) bool) bool {
	if !s.push() {
		return false
	}
	c := s.next()
	if c == '}' {
		return s.pop()
	}
	for {
		if c != '"' {
			return s.fail("looking for beginning of object key string")
		}
		key, escaped, ok := s.rawString()
		if !ok {
			return false
		}
		if s.next() != ':' {
			return s.fail("after object key")
		}
		s.i++
		if !field(key, escaped) {
			return false
		}
		if more, ok := s.separator('}', "after object key:value pair"); !more {
			return ok
		}
		c = s.next()
	}
}

// array reads the array at i, calling elem with the scanner at each element,
// which elem must consume.
func (s *scanner) array(elem func() bool) bool {
	if !s.push() {
		return false
	}
	if s.next() == ']' {
		return s.pop()
	}
	for {
		if !elem() {
			return false
		}
		if more, ok := s.separator(']', "after array element"); !more {
			return ok
		}
	}
}

// value steps over any value, checking its syntax.
func (s *scanner) value() bool {
	switch c := s.next(); {
	case c == '"':
		_, _, ok := s.rawString()
		return ok
	case c == '{':
		return s.object(s.skipMember)
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
	return s.fail("looking for beginning of value")
}

func (s *scanner) skipMember([]byte, bool) bool { return s.value() }

func (s *scanner) literal(lit string) bool {
	for k := 1; k < len(lit); k++ {
		if !s.at(s.i+k) || s.b[s.i+k] != lit[k] {
			return s.failAt(s.i+k, fmt.Sprintf("in literal %s (expecting %q)", lit, lit[k]))
		}
	}
	s.i += len(lit)
	return true
}

// number reads the number at i with JSON's grammar and returns its text.
// Where the number ends is known only from the byte after it, or from the end
// of the document.
func (s *scanner) number() ([]byte, bool) {
	start := s.i
	i := s.i
	digits := func() int {
		n := 0
		for s.at(i) && isDigit(s.b[i]) {
			i++
			n++
		}
		return n
	}
	if s.b[i] == '-' {
		i++
	}
	switch {
	case s.at(i) && s.b[i] == '0':
		i++
	case digits() == 0:
		return nil, s.failAt(i, "in numeric literal")
	}
	if s.at(i) && s.b[i] == '.' {
		i++
		if digits() == 0 {
			return nil, s.failAt(i, "after decimal point in numeric literal")
		}
	}
	if s.at(i) && (s.b[i] == 'e' || s.b[i] == 'E') {
		i++
		if s.at(i) && (s.b[i] == '+' || s.b[i] == '-') {
			i++
		}
		if digits() == 0 {
			return nil, s.failAt(i, "in exponent of numeric literal")
		}
	}
	s.i = i
	return s.b[start:i], true
}

// float reads the number at i as a float64 (±Inf beyond its range).
func (s *scanner) float() (float64, bool) {
	raw, ok := s.number()
	if !ok {
		return 0, false
	}
	f, _ := strconv.ParseFloat(string(raw), 64) // valid JSON numbers parse, or overflow to ±Inf
	return f, true
}

// rawString reads the string at i and returns its raw content (between the
// quotes, escapes undecoded) and whether it has escapes.
//
// Nearly all of a body is string content, so this loop is the scanner's
// throughput. Plain text ends at a quote, a backslash or a control character.
// Close to the last one (escapes in code and dialogue come every few bytes)
// it is read byte by byte, then eight bytes a step; a long run (prose) is
// searched with bytes.IndexByte (vectorised) for the backslash up to the next
// quote, which is found once and again only after an escaped one, and 32
// bytes a step for control characters.
func (s *scanner) rawString() (raw []byte, escaped, ok bool) {
	start := s.i + 1
	i := start
	// quote is the first quote at or after i when known; when not, there is
	// none before it (a search reached the end of what had arrived).
	quote, known := i, false
	for {
		b := s.b
		k := indexSpecialShort(b[i:min(len(b), i+shortRun)])
		if i += k; k == shortRun {
			i = indexSpecialLong(b, i, &quote, &known)
		}
		if i == len(b) {
			if !s.fill() {
				return nil, false, s.failAt(i, "")
			}
			continue
		}
		switch c := b[i]; {
		case c == '"':
			s.i = i + 1
			return s.b[start:i], escaped, true
		case c == '\\':
			escaped = true
			if i+1 < len(b) {
				switch b[i+1] {
				case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
					i += 2
					continue
				}
			}
			if i, ok = s.escape(i); !ok {
				return nil, false, false
			}
		default:
			return nil, false, s.failAt(i, "in string literal")
		}
	}
}

// escape checks the escape whose backslash is at i and returns the offset
// after it.
func (s *scanner) escape(i int) (int, bool) {
	if !s.at(i + 1) {
		return 0, s.failAt(i+1, "")
	}
	switch s.b[i+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 2, true
	case 'u':
		for j := i + 2; j < i+6; j++ {
			if !s.at(j) || !isHex(s.b[j]) {
				return 0, s.failAt(j, "in \\u hexadecimal character escape")
			}
		}
		return i + 6, true
	}
	return 0, s.failAt(i+1, "in string escape code")
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isHex(c byte) bool {
	return isDigit(c) || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}

// stringSpecial marks the bytes that end plain string content: '"', '\\' and
// the control characters.
var stringSpecial = func() (t [256]bool) {
	for c := range 0x20 {
		t[c] = true
	}
	t['"'], t['\\'] = true, true
	return t
}()

// A run of plain string content is read byte by byte for shortRun bytes,
// then eight bytes a step up to mediumRun, then with vectorised searches.
const (
	shortRun  = 32
	mediumRun = 128
)

// indexSpecialShort returns the offset of the first byte of b that ends plain
// string content, or len(b).
func indexSpecialShort(b []byte) int {
	for i, c := range b {
		if stringSpecial[c] {
			return i
		}
	}
	return len(b)
}

// indexSpecialLong returns the offset of the first byte at or after i that
// ends plain string content, or len(b). *quote and *known carry rawString's
// knowledge of the next quote from call to call.
func indexSpecialLong(b []byte, i int, quote *int, known *bool) int {
	end := min(len(b), i+mediumRun)
	for ; i+8 <= end; i += 8 {
		w := binary.LittleEndian.Uint64(b[i:])
		if m := specialLanes(w); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	if end == len(b) {
		return i + indexSpecialShort(b[i:])
	}
	if *quote < i {
		*quote, *known = i, false // passed it: that quote was escaped
	}
	if !*known {
		if k := bytes.IndexByte(b[*quote:], '"'); k >= 0 {
			*quote, *known = *quote+k, true
		} else {
			*quote = len(b)
		}
	}
	e := *quote
	if k := bytes.IndexByte(b[i:e], '\\'); k >= 0 {
		e = i + k
	}
	if k := indexControl(b[i:e]); k >= 0 {
		e = i + k
	}
	return e
}

// SWAR constants: one bit pattern per byte lane of a 64-bit word.
const (
	lanesLow    = 0x0101010101010101
	lanesHigh   = 0x8080808080808080
	lows7       = 0x7f7f7f7f7f7f7f7f
	quotes      = '"' * lanesLow
	backslashes = '\\' * lanesLow
)

// specialLanes has the high bit set in the lowest byte of x that ends plain
// string content (a quote, a backslash or a control character), and maybe in
// higher ones: per lane, (x - k) &^ x has its high bit set when the byte is
// below k, and a borrow only runs upward from a lane that matched. Zero when
// none does.
func specialLanes(w uint64) uint64 {
	q, bs := w^quotes, w^backslashes
	return ((q-lanesLow)&^q | (bs-lanesLow)&^bs | (w-0x20*lanesLow)&^w) & lanesHigh
}

// controlBytes has the high bit set in exactly the bytes of x below 0x20: a
// lane's low seven bits plus 0x60 reach the high bit from 0x20 on, and carry
// into no other lane.
func controlBytes(x uint64) uint64 {
	return ^((x&lows7 + 0x60*lanesLow) | x) & lanesHigh
}

// indexControl returns the offset of the first byte below 0x20 in b, or -1.
// Raw control characters are invalid in JSON, so the common answer is none:
// 32 bytes a step are tested with (x - 0x20…) &^ x, which is non-zero
// exactly when a lane is below 0x20 (it may mark lanes above a true one too,
// so the one found is then located with controlBytes).
func indexControl(b []byte) int {
	i := 0
	for ; i+32 <= len(b); i += 32 {
		w := b[i : i+32]
		w0, w1 := binary.LittleEndian.Uint64(w), binary.LittleEndian.Uint64(w[8:])
		w2, w3 := binary.LittleEndian.Uint64(w[16:]), binary.LittleEndian.Uint64(w[24:])
		if ((w0-0x20*lanesLow)&^w0|(w1-0x20*lanesLow)&^w1|(w2-0x20*lanesLow)&^w2|(w3-0x20*lanesLow)&^w3)&lanesHigh != 0 {
			break
		}
	}
	for ; i+8 <= len(b); i += 8 {
		if m := controlBytes(binary.LittleEndian.Uint64(b[i:])); m != 0 {
			return i + bits.TrailingZeros64(m)/8
		}
	}
	for ; i < len(b); i++ {
		if b[i] < 0x20 {
			return i
		}
	}
	return -1
}
