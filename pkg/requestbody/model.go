package requestbody

import (
	"errors"
	"fmt"
	"iter"
)

// ErrNotObject is returned for a valid JSON document that is not an object.
var ErrNotObject = errors.New("request body must be a JSON object")

// ModelTypeError is returned when the top-level "model" member is not a string.
type ModelTypeError struct {
	Kind string // "number", "boolean", "object" or "array"
}

func (e *ModelTypeError) Error() string {
	return fmt.Sprintf("invalid type for 'model': expected a string, but got %s %s instead", Article(e.Kind), e.Kind)
}

// Article is the indefinite article of a JSON kind's name.
func Article(kind string) string {
	if kind == "object" || kind == "array" {
		return "an"
	}
	return "a"
}

// modelMember is the last top-level "model" member the scan met.
type modelMember struct {
	first   byte // its value's first byte; 0 when there is none
	raw     span // a string's content, between the quotes
	escaped bool
}

// read steps over the member's value, whose first byte is c, remembering it.
func (m *modelMember) read(s *scanner, c int) bool {
	*m = modelMember{first: byte(max(c, 0))}
	if c != '"' {
		return s.value()
	}
	start := s.i + 1
	_, escaped, ok := s.rawString()
	m.raw, m.escaped = span{start, s.i - 1}, escaped
	return ok
}

// result is ExtractModel's answer once the scan has ended.
func (m *modelMember) result(doc []byte, s *scanner, valid, isObject bool) (string, bool, error) {
	switch {
	case !valid:
		return "", false, s.err
	case !isObject:
		return "", false, ErrNotObject
	}
	switch m.first {
	case 0, 'n':
		return "", false, nil
	case '"':
		return decodeModel(doc[m.raw.start:m.raw.end], m.escaped), true, nil
	case '{':
		return "", false, &ModelTypeError{Kind: "object"}
	case '[':
		return "", false, &ModelTypeError{Kind: "array"}
	case 't', 'f':
		return "", false, &ModelTypeError{Kind: "boolean"}
	}
	return "", false, &ModelTypeError{Kind: "number"}
}

// ExtractModel validates body as one JSON document and returns the value of its
// top-level "model" member. found is false when the member is absent or null.
//
// The rules are encoding/json's, so the gateway and a Go model server agree on
// every body: the whole document is validated (any syntax error anywhere, trailing
// data, or nesting deeper than 10000 is a *SyntaxError); keys match exactly after
// unescaping (\u escapes included), and when "model" appears more than once the
// last one wins; strings decode with invalid UTF-8 and lone surrogates replaced by
// U+FFFD. A document that is not an object is ErrNotObject, and a "model" that is
// not a string or null is a *ModelTypeError.
//
// Nothing is decoded except the model string itself: the cost is one pass over the
// bytes and no allocation besides the returned string.
func ExtractModel(body []byte) (model string, found bool, err error) {
	s := &scanner{b: body}
	f, valid, isObject := scanBody(s, nil)
	return f.model.result(body, s, valid, isObject)
}

// Stream is ExtractModel for a body that arrives in pieces: it checks each
// piece as it comes, so that a body that cannot be valid JSON is refused at
// the piece that shows it, and the scan is done when the last piece is. The
// zero value is ready; Close it if the body is abandoned before Finish.
type Stream struct {
	s        scanner
	f        fields
	valid    bool
	isObject bool
	ended    bool // the scan has returned
	// scanned is the length of the first piece, scanned as if it were the
	// whole body: a body that comes in one piece needs no more.
	scanned int

	available []byte
	atEnd     bool
	next      func() (struct{}, bool)
	stop      func()
}

// Write scans doc, the body received so far (each call's doc begins with the
// previous one's), and reports a syntax error as soon as there is one.
func (st *Stream) Write(doc []byte) error {
	switch {
	case st.ended:
	case st.scanned == 0 && st.next == nil:
		// The first piece is scanned whole, without a coroutine. An error
		// before its end stands whatever follows; one at its end only says
		// that more is to come, and the coroutine takes over from the start
		// with the next piece.
		st.scanWhole(doc)
		if !st.valid && st.s.err.Offset < int64(len(doc)) {
			break
		}
		st.ended, st.scanned = false, len(doc)
	default:
		st.resume(doc, false)
	}
	if st.ended && !st.valid {
		return st.s.err
	}
	return nil
}

// Finish scans the rest of doc, now complete, and returns ExtractModel's
// answer for it.
func (st *Stream) Finish(doc []byte) (string, bool, error) {
	switch {
	case st.ended:
	case st.next != nil:
		st.resume(doc, true)
	case st.scanned != len(doc) || st.scanned == 0:
		st.scanWhole(doc)
	default:
		st.ended = true // the first piece was all of it
	}
	return st.f.model.result(doc, &st.s, st.valid, st.isObject)
}

// Close releases a scan that will not be finished.
func (st *Stream) Close() {
	if st.stop != nil {
		st.stop()
	}
}

func (st *Stream) scanWhole(doc []byte) {
	st.s = scanner{b: doc}
	st.f, st.valid, st.isObject = scanBody(&st.s, nil)
	st.ended = true
}

// resume lets the scan run over doc until it needs more or ends. The scan is
// the same recursive descent as ExtractModel's, run as a coroutine: where it
// reaches the end of what has arrived, it yields until the next piece.
func (st *Stream) resume(doc []byte, atEnd bool) {
	st.available, st.atEnd = doc, atEnd
	if st.next == nil {
		st.s = scanner{}
		st.next, st.stop = iter.Pull(st.run)
	}
	if _, more := st.next(); !more {
		st.ended = true
		st.stop()
	}
}

func (st *Stream) run(yield func(struct{}) bool) {
	st.s.b = st.available
	st.s.more = func() bool {
		for n := len(st.s.b); ; {
			if len(st.available) > n {
				st.s.b = st.available
				return true
			}
			if st.atEnd || !yield(struct{}{}) {
				return false
			}
		}
	}
	st.f, st.valid, st.isObject = scanBody(&st.s, nil)
}
